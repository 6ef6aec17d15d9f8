#include "actors/negotiator.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/negotiator_state.hpp"
#include "actors/timeline.hpp"
#include "actors/work_tracers.hpp"
#include "control/shm_channel.hpp"
#include "control/hit_aggregator.hpp"
#include "metrics/rank_metrics.hpp"
#include "proto/op_properties.hpp"
#include "proto/request_checks.hpp"

namespace troupe::actors {

namespace negotiation {

// A backend failure usually means a peer died; the supervisor learns which
// one within milliseconds. Waiting this long lets the handles carry the
// precise "rank N was lost" message instead of a socket error.
constexpr auto backend_failure_grace = std::chrono::milliseconds(300);

const char* duplicate_name_error =
  "Requested to allreduce, allgather, or broadcast a tensor with the same name as "
  "another tensor that is currently being processed. If you want to request another "
  "tensor, use a different tensor name.";

// Timeline spans, Horovod's names: NEGOTIATE_<OP> from submission to the
// coordinator's answer, then <OP> while the backend runs it.
// Names are built only when a timeline is written: nothing on the hot path
// otherwise.
void trace(negotiator_self self, const tensor_entry& e, const char* phase, v1::OpType op,
           bool negotiation) {
  if (!self->state.tracing)
    return;
  caf::anon_send(self->state.timeline, timeline_atom::value, e.request.tensor_name(),
                 std::string(phase),
                 (negotiation ? "NEGOTIATE_" : "") + std::string(properties(op).name),
                 timeline_now_us());
}

// The name may already belong to a newer entry: the backend completes a
// successful work's handles itself, so the caller can submit the name again
// before (executed) arrives here.
void complete(negotiator_state& st, const tensor_entry_ptr& e, status s) {
  auto it = st.table.find(e->request.tensor_name());
  if (it != st.table.end() && it->second == e)
    st.table.erase(it);
  e->handle->complete(std::move(s));
}

void mark_cycle(const negotiator_state& st) {
  if (st.tracing && st.mark_cycles)
    caf::anon_send(st.timeline, timeline_atom::value, std::string("CYCLE_START"),
                   timeline_now_us());
}

// Sampled on submission and after each response list, not per message.
void observe_depths(negotiator_state& st, negotiator_self self) {
  st.metrics->queue_depth(st.table.size());
  st.metrics->mailbox_depth(metrics::actor_kind::negotiator, self->mailbox().size());
}

// Tells the co-located coordinator that one more response list is done
// here, and what it moved (not for an agreed list: the coordinator never
// sent it).
void list_done(negotiator_state& st, negotiator_self self, list_stats moved, bool agreed) {
  st.metrics->cycle();
  observe_depths(st, self);
  moved.lists = 1;
  if (st.local_coordinator && !agreed)
    self->send(st.local_coordinator, executed_atom::value, moved);
}

// Fails every entry the backend is not running. Running ones complete when
// the backend returns them (with `s` unless they succeeded): until then it
// may still read or write the caller's memory, whatever happened to the
// peers. A dead peer's sockets fail the backend's call at once; for a
// frozen one the abort interrupts the backend (Gloo: at once; MPI cannot
// be interrupted, and ends the job with MPI_Abort if still blocked after a
// grace).
void fail_pending(negotiator_state& st, const status& s) {
  std::unordered_map<std::string, tensor_entry_ptr> running;
  for (const auto& [id, work] : st.in_flight)
    for (const auto& e : work->entries)
      running.emplace(e->request.tensor_name(), e);
  auto table = std::move(st.table);
  st.table = std::move(running);
  // Their peers find these on the board and ask the coordinator, whose
  // stall inspector names this rank: an agreed list would have them run
  // collectives this rank no longer joins. What this rank posted must not
  // complete a round, and what it completed must look unagreed again.
  if (auto* board = st.board()) {
    for (const auto& [id, posted] : st.posted)
      board->withdraw(id, posted.list, st.set_rank);
    for (const auto& [ref, e] : st.completed)
      board->reopen(ref.id, ref.list, st.set_rank);
  }
  st.posted.clear();
  st.completed.clear();
  for (auto& [name, e] : table) {
    auto r = st.table.find(name);
    if (r == st.table.end() || r->second != e)
      e->handle->complete(s);
  }
}

void flush_requests(negotiator_self self);

// What arrived goes up at once when nothing else is queued; messages
// already queued behind it (typically more submissions or children's
// lists) first join the same RequestList: the flush message lands after
// them.
void flush_soon(negotiator_self self) {
  auto& st = self->state;
  if (self->mailbox().empty())
    flush_requests(self);
  else if (!st.flush_scheduled) {
    st.flush_scheduled = true;
    self->send(self, flush_atom::value);
  }
}

// Accepts the whole batch or none of it: a group with one member refused
// would otherwise wait forever for that member at the coordinator.
void accept(negotiator_self self, const entry_batch& batch) {
  auto& st = self->state;
  auto fail_batch = [&](const status& s) {
    for (const auto& e : batch)
      e->handle->complete(s);
  };
  if (st.broken)
    return fail_batch(*st.broken);
  // A completed handle whose (executed) is still on its way is done.
  const auto taken = [](const tensor_entry_ptr& held) { return held && !held->handle->done(); };
  if (batch.size() == 1) {
    // One lookup: a training step submits hundreds of these one by one.
    auto& held = st.table[batch.front()->request.tensor_name()];
    if (taken(held))
      return fail_batch({status_code::invalid_argument, duplicate_name_error});
    held = batch.front();
  } else {
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& name = batch[i]->request.tensor_name();
      auto it = st.table.find(name);
      bool repeated = it != st.table.end() && taken(it->second);
      for (size_t j = 0; j < i && !repeated; ++j)
        repeated = batch[j]->request.tensor_name() == name;
      if (repeated)
        return fail_batch({status_code::invalid_argument, duplicate_name_error});
    }
    for (const auto& e : batch)
      st.table.insert_or_assign(e->request.tensor_name(), e);
  }
  for (const auto& e : batch) {
    trace(self, *e, "B", e->request.op(), true);
    st.joined = st.joined || e->request.op() == v1::OP_TYPE_JOIN;
    e->request.set_request_rank(st.set_rank);
    st.outbox.push_back(e);
  }
}

// Batches submitted together go up in one flush.
void on_submit(negotiator_self self, const std::vector<entry_batch>& batches) {
  for (const auto& batch : batches)
    accept(self, batch);
  observe_depths(self->state, self);
  flush_soon(self);
}

// What the channel could not take yet (no room, or another writer in the
// middle of a message) goes on a later flush.
void retry_channel_unless(negotiator_self self, bool written) {
  auto& st = self->state;
  if (!written && !st.channel_retry_scheduled) {
    st.channel_retry_scheduled = true;
    self->delayed_send(self, std::chrono::microseconds(200), flush_atom::value);
  }
}

// Sends a RequestList (none: only what the channel still holds) up: to
// the parent in the control tree, else to the coordinator, through the
// control channel or over the network. What the channel has no room for
// yet goes out on a later flush, in order behind what it holds.
void send_up(negotiator_self self, std::optional<std::string> bytes) {
  auto& st = self->state;
  // (The coordinator's own rank reads the channel but sends in-process.)
  if (st.parent || !st.channel || st.local_coordinator) {
    if (bytes && st.parent)
      self->send(st.parent, request_atom::value, st.epoch, st.set_id, std::move(*bytes));
    else if (bytes)
      self->send(st.coordinator, request_atom::value, st.epoch, st.set_id, std::move(*bytes));
    if (st.channel)
      retry_channel_unless(self, st.channel->flush());  // agreed lists
    return;
  }
  if (bytes)
    st.channel->expect_reply();
  retry_channel_unless(self, bytes ? st.channel->send(std::move(*bytes)) : st.channel->flush());
}

// The coordinator places every member right after the last one
// introduced itself, and answers nothing before; this bounds the wait of
// a member whose coordinator places nobody (its fanout configured
// otherwise): its lists then go to the coordinator, as in a star.
constexpr auto place_wait = std::chrono::seconds(5);
// Children's lists kept while this rank waits for its place; past this,
// they go up as they came (only a broken peer sends that many).
constexpr size_t max_early_lists = 1024;

// Wakes an inner node when the hits it holds are due to go up anyway.
void schedule_hold(negotiator_self self, control::hit_aggregator::clock::time_point now) {
  auto& st = self->state;
  const auto next = st.aggregator->next_deadline();
  if (!next || (st.hold_timer && *st.hold_timer <= *next))
    return;
  st.hold_timer = next;
  self->delayed_send(self, *next - now, flush_atom::value);
}

// The hold sent rounds up as they came (the coordinator still waits for
// the missing ranks, and its stall inspector names them if they never
// come): said at the 1st, 2nd, 4th, 8th... such round, so that a rank
// that is often late, or requests that bypass this node, are visible
// without flooding the log.
void note_late(negotiator_state& st, const control::late_round& late, uint64_t rounds) {
  st.late_rounds += rounds;
  if (st.late_rounds < st.next_late_note)
    return;
  std::string missing;
  for (const auto& [first, end] : late.missing)
    missing += fmt::format("{}[{}, {})", missing.empty() ? "" : ", ", first, end);
  spdlog::info("process set {}: set rank {} held '{}' for the control tree's hold ({} ms) "
               "but set ranks {} had not asked for it; sent up what the rest of its subtree "
               "sent, as it came ({} such round(s) so far; the next line at {})",
               st.set_id, st.set_rank, late.tensor, st.tree_hold.count(), missing,
               st.late_rounds, 2 * st.late_rounds);
  st.next_late_note = 2 * st.late_rounds;
}

// Sends what was submitted since the last flush as one RequestList, once
// the coordinator is known; an inner node of the control tree sends it
// with its children's, aggregated. Cache hits are decided here, against
// the cache state the list reports.
void flush_requests(negotiator_self self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (!st.coordinator || !st.placed)
    return;
  v1::RequestList list;
  list.set_process_set_id(st.set_id);
  list.set_lists_applied(st.cache.lists_applied());
  list.set_sender_rank(st.set_rank);
  list.set_ranks_end(st.set_rank + 1);
  if (st.tuning) {
    *list.mutable_tuning() = std::move(*st.tuning);
    st.tuning.reset();
  }
  for (const auto& e : st.outbox) {
    // Failed (aborted) meanwhile. (A pending entry is the one its name maps
    // to in the table: a name is taken again only once done.)
    if (e->handle->done())
      continue;
    const auto ref = st.cache.hit(e->request);
    if (const auto a = ref ? post_arrival(st, e, ref) : arrival::slow;
        a != arrival::slow) {
      st.metrics->cache_hit();
      if (a == arrival::agreed)
        st.completed.emplace_back(ref, e);
      continue;
    }
    auto* req = list.add_requests();
    if (ref) {
      st.metrics->cache_hit();
      req->set_cache_id(ref.id);
      req->set_cache_list(ref.list);
      req->set_request_rank(st.set_rank);
    } else {
      st.metrics->cache_miss();
      *req = e->request;
    }
  }
  st.outbox.clear();
  write_agreed(self);
  const bool any = list.requests_size() > 0 || list.has_tuning();
  if (!st.aggregator) {
    send_up(self, any ? std::optional<std::string>(list.SerializeAsString()) : std::nullopt);
    return;
  }
  const auto now = control::hit_aggregator::clock::now();
  if (st.hold_timer && now >= *st.hold_timer)
    st.hold_timer.reset();
  if (any)
    st.aggregator->add(list, now);
  auto up = st.aggregator->take(now);
  schedule_hold(self, now);
  const auto sent = st.aggregator->take_counts();
  st.metrics->tree_hits(sent.aggregated, sent.passed);
  const auto requests = st.aggregator->take_request_counts();
  st.metrics->tree_requests(requests.merged, requests.passed);
  // Once per set each: the first time this node sent its subtree's
  // requests, and its hits, up as one.
  const auto tell_once = [&](bool& told, uint64_t merged, const char* what) {
    if (told || merged == 0)
      return;
    told = true;
    spdlog::info("process set {}: set rank {} sent the {} of set ranks [{}, {}) up as one "
                 "(control tree)",
                 st.set_id, st.set_rank, what, st.set_rank, st.aggregator->subtree_end());
  };
  tell_once(st.told_merged, requests.merged, "requests");
  tell_once(st.told_aggregated, sent.aggregated, "cache hits");
  st.metrics->tree_hold_expired(sent.expired, requests.expired);
  if (auto late = st.aggregator->take_late())
    note_late(st, *late, sent.expired + requests.expired);
  if (up) {
    up->set_process_set_id(st.set_id);
    send_up(self, up->SerializeAsString());
  } else {
    send_up(self, std::nullopt);
  }
}

// A child's RequestList (an inner node of the control tree): aggregated
// with the rest of the subtree's, sent up with the next flush. Lists queued
// behind it join the same flush.
void on_child_list(negotiator_self self, const std::string& bytes) {
  auto& st = self->state;
  // A child can be placed, and send, before its parent: the coordinator
  // places everyone at once, and messages from two senders are not ordered.
  if (!st.placed && st.early_lists.size() < max_early_lists) {
    st.early_lists.push_back(bytes);
    return;
  }
  v1::RequestList list;
  if (!list.ParseFromString(bytes)) {
    spdlog::error("negotiator of set {}: dropped a malformed request list from a control-tree "
                  "child ({} bytes)",
                  st.set_id, bytes.size());
    return;
  }
  if (!st.aggregator) {
    spdlog::error("negotiator of set {}: set rank {} has no control-tree children; passed a "
                  "request list up as it came",
                  st.set_id, st.set_rank);
    send_up(self, bytes);
    return;
  }
  st.aggregator->add(list, control::hit_aggregator::clock::now());
  flush_soon(self);
}

// Takes this rank's place in the control tree (once, from the coordinator).
bool on_placed(negotiator_self self, int32_t parent_rank, int32_t end,
               std::vector<int32_t>& children, caf::actor& parent,
               std::vector<caf::actor>& relay) {
  auto& st = self->state;
  const bool ascending = std::is_sorted(children.begin(), children.end()) &&
                         std::adjacent_find(children.begin(), children.end()) == children.end();
  if (!st.children.empty() || st.aggregator || st.parent || end <= st.set_rank || !ascending ||
      (!children.empty() && (children.front() <= st.set_rank || children.back() >= end))) {
    spdlog::error("negotiator of set {}: ignored a second or invalid place in the control tree "
                  "(set rank {}, subtree end {}, {} children)",
                  st.set_id, st.set_rank, end, children.size());
    return false;
  }
  if (!children.empty())
    st.aggregator.emplace(control::tree_node{st.set_rank, end, parent_rank, std::move(children)},
                          st.tree_hold, [&view = st.cache](uint32_t id, uint64_t list) {
                            return view.name_of(id, list);
                          });
  st.parent = caf::actor_cast<member_actor>(parent);
  for (auto& c : relay)
    st.children.push_back(caf::actor_cast<member_actor>(c));
  return true;
}

// This rank's place is settled (told, or the wait for it ran out): the
// lists its children sent before go on as if they came now, then its own.
void settle_place(negotiator_self self) {
  auto& st = self->state;
  if (st.placed)
    return;
  st.placed = true;
  for (const auto& bytes : std::exchange(st.early_lists, {}))
    on_child_list(self, bytes);
  flush_soon(self);
}

// Opens the set's control channel when the coordinator runs on this host
// (in another process, or in this one with the fast lane); its reader
// thread passes each response list on as if it had come over the network.
void open_channel(negotiator_self self, const std::string& name) {
  auto& st = self->state;
  if (name.empty())
    return;
  st.channel = control::channel_member::open(name, st.set_rank);
  // The coordinator's own rank hears it in-process; it reads the channel
  // only for the fast lane, whose lists and agreed lists come in one order
  // there.
  if (st.channel && st.local_coordinator && !st.channel->board())
    st.channel.reset();
  if (!st.channel)
    return;
  st.channel->poll_replies(st.channel_poll);
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  const auto epoch = st.epoch;
  const auto set = st.set_id;
  const auto rank = st.set_rank;
  st.channel->start(
    [weak, epoch, set, delivered = st.channel_delivered](std::string bytes) {
      if (auto strong = weak.lock()) {
        delivered->fetch_add(1, std::memory_order_release);
        caf::anon_send(caf::actor_cast<negotiator_actor>(strong), response_atom::value, epoch,
                       set, std::move(bytes));
      }
    },
    // No response list can reach this rank any more: what it waits for
    // fails now, naming why, instead of never completing. (Not peer_lost:
    // no peer is gone, and a call the backend runs can still complete.)
    [weak, set, rank](std::string why) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<negotiator_actor>(strong), abort_atom::value,
                       status{status_code::timeout,
                              fmt::format("process set {}: set rank {} can no longer hear its "
                                          "coordinator through the control channel ({}); the "
                                          "set's collectives fail on this rank",
                                          set, rank, why)});
    });
}

// Fails the entries a malformed response names, saying what was wrong.
void fail_named(negotiator_state& st, const v1::Response& resp, const status& s) {
  spdlog::error("negotiator: {}", s.message());
  for (const auto& name : resp.tensor_names()) {
    auto it = st.table.find(name);
    if (it != st.table.end())
      complete(st, it->second, s);
  }
}

// What a joined rank runs for an allreduce it never submitted: zeros of the
// negotiated size, so the sum (and AVERAGE over all ranks) is right.
tensor_entry_ptr joined_stand_in(const v1::Response& resp, int index) {
  auto e = std::make_shared<tensor_entry>();
  const auto& name = resp.tensor_names(index);
  const auto dtype = static_cast<data_type>(resp.dtype());
  const int64_t count = index < resp.tensor_sizes_size() ? resp.tensor_sizes(index) : 0;
  e->request.set_tensor_name(name);
  e->stand_in.assign(static_cast<size_t>(count) * element_size(dtype), 0);
  e->input = tensor{e->stand_in.data(), dtype, {count}};
  e->output = e->input;
  return e;
}

// join() returns once what this rank ran before the JOIN has run: the
// caller may exit then, and a peer still in a collective this rank stood
// in for would otherwise lose it (the backend may not have started it).
void complete_join_when_due(negotiator_state& st) {
  if (!st.join_due)
    return;
  const auto before = st.join_due->last_work;
  if (std::any_of(st.in_flight.begin(), st.in_flight.end(),
                  [&](const auto& w) { return w.first <= before; }))
    return;
  auto e = std::move(st.join_due->entry);
  st.join_due.reset();
  if (!e->handle->done())
    complete(st, e, {});
}

// Every rank joined: join() returns the last rank that joined, after the
// works launched before the JOIN.
void on_all_joined(negotiator_state& st, const v1::Response& resp) {
  st.joined = false;
  auto it = st.table.find(resp.tensor_names(0));
  if (it == st.table.end())
    return;
  auto e = it->second;
  const int32_t last = resp.last_joined_rank();
  e->handle->output.assign(reinterpret_cast<const char*>(&last),
                           reinterpret_cast<const char*>(&last) + sizeof last);
  e->handle->output_shape = {};
  st.join_due = negotiator_state::due_join{std::move(e), st.next_work_id - 1};
  complete_join_when_due(st);
}

// Hands a negotiated work to the backend of its device kind (failing its
// entries when the set has none): true when it went.
bool launch(negotiator_self self, v1::Response resp, const collective_work_ptr& work) {
  auto& st = self->state;
  const auto kind = static_cast<device_kind>(resp.device_kind());
  const auto backend = st.backends.find(kind);
  if (backend == st.backends.end()) {
    const status s{status_code::invalid_argument,
                   std::string("process set ") + std::to_string(st.set_id) +
                     " has no backend for " + to_string(kind) + " tensors on rank " +
                     std::to_string(st.set_rank) + " of the set"};
    for (auto& e : work->entries)
      complete(st, e, s);
    return false;
  }
  for (const auto& e : work->entries)
    trace(self, *e, "B", resp.op(), false);
  if (work->entries.empty())
    return false;
  work->id = st.next_work_id++;
  work->response = std::move(resp);
  work->fusion_chunk_bytes = st.fusion_chunk_bytes;
  if (st.tracing)
    attach_tracers(st.timeline, *work);
  st.in_flight.emplace(work->id, work);
  self->send(backend->second.actor, execute_atom::value, work);
  return true;
}

void on_response_list(negotiator_self self, const std::string& bytes) {
  auto& st = self->state;
  v1::ResponseList list;
  if (!list.ParseFromString(bytes)) {
    spdlog::error("negotiator: dropped a malformed response list ({} bytes)", bytes.size());
    return;
  }
  if (list.agreed_ids_size() > 0)
    return on_agreed_list(self, list);
  mark_cycle(st);
  // Before the subtree can ask for these tensors again: their rounds of
  // full requests at this node are over.
  if (st.aggregator && st.aggregator->answered(list))
    flush_soon(self);
  if (list.tuning().has_cache_capacity())
    st.cache.clear();  // the coordinator emptied its cache as of this list
  if (list.tuning().has_fusion_chunk_bytes()) {
    const auto chunk = list.tuning().fusion_chunk_bytes();
    st.fusion_chunk_bytes =
      chunk < 0 ? std::nullopt : std::optional<size_t>(static_cast<size_t>(chunk));
  }
  st.cache.apply(list, [&](const std::string& name) -> const v1::Request* {
    auto it = st.table.find(name);
    return it == st.table.end() ? nullptr : &it->second->request;
  });
  st.lane_on = list.fast_lane().on();
  st.lane_fusion = list.fast_lane().fusion_threshold();
  size_t launched = 0;
  const auto now = std::chrono::steady_clock::now();
  for (auto& resp : *list.mutable_responses()) {
    // The backends index and allocate by what a response says: one that
    // does not add up fails what it names here instead of reaching them.
    if (auto err = check_response(resp, st.set_size); !err.empty()) {
      fail_named(st, resp, {status_code::internal, "process set " + std::to_string(st.set_id) +
                                                     ": the coordinator's " + err});
      continue;
    }
    if (resp.op() == v1::OP_TYPE_JOIN) {
      if (st.aggregator)
        st.aggregator->join_ended();
      on_all_joined(st, resp);
      continue;
    }
    auto work = std::make_shared<collective_work>();
    std::optional<std::string> unknown;
    for (int i = 0; i < resp.tensor_names_size(); ++i) {
      const auto& name = resp.tensor_names(i);
      auto it = st.table.find(name);
      if (it != st.table.end()) {
        trace(self, *it->second, "E", it->second->request.op(), true);
        st.metrics->negotiated(it->second->submitted, now);
        work->entries.push_back(it->second);
      }
      else if (st.joined && resp.op() == v1::OP_TYPE_ALLREDUCE)
        work->entries.push_back(joined_stand_in(resp, i));
      else if (resp.op() != v1::OP_TYPE_ERROR && !unknown)  // errors reach every rank
        unknown = name;
    }
    // Without one of its tensors a fused work's sizes no longer line up with
    // the response's: nothing of it runs here.
    if (unknown && (!work->entries.empty() || !st.joined)) {
      const status s{status_code::internal,
                     "process set " + std::to_string(st.set_id) + ": the coordinator's " +
                       properties(resp.op()).name + " response names tensor '" + *unknown +
                       "', which set rank " + std::to_string(st.set_rank) + " has not submitted"};
      spdlog::error("negotiator: {}", s.message());
      for (auto& e : work->entries)
        complete(st, e, s);
      continue;
    }
    if (resp.op() == v1::OP_TYPE_ERROR) {
      if (resp.has_only_rank() && resp.only_rank() != st.set_rank)
        continue;  // another rank's late request: this rank's may be a newer round
      status s{static_cast<status_code>(resp.error().code()), resp.error().message()};
      for (auto& e : work->entries)
        complete(st, e, s);
      continue;
    }
    if (launch(self, std::move(resp), work))
      ++launched;
  }
  if (launched == 0)
    list_done(st, self, {}, false);
  else
    st.lists_running.push_back({launched, {}, false});
  if (!st.posted.empty())
    repost_changed(self);
}

// The backends have let go of every buffer: stop them, then this actor.
void finish_if_stopping(negotiator_self self) {
  auto& st = self->state;
  if (!st.stopping || !st.in_flight.empty())
    return;
  for (const auto& [kind, backend] : st.backends)
    self->send_exit(backend.actor, caf::exit_reason::user_shutdown);
  self->quit();
}

void on_executed(negotiator_self self, uint64_t id, status& result, const list_stats& moved) {
  auto& st = self->state;
  auto node = st.in_flight.extract(id);
  if (node.empty())
    return;  // failed by an abort meanwhile
  if (result.code() == status_code::backend && !st.broken) {
    // The communicator is gone; keep the entries pending so the abort that
    // names the lost peer (or this error, after the grace) fails them all.
    self->delayed_send(self, backend_failure_grace, abort_atom::value, result);
    return;
  }
  // A work that failed after the set broke failed because of it.
  const auto& outcome = result.ok() || !st.broken ? result : *st.broken;
  // Only a span this work began is ended: its caller may have seen the
  // backend complete it and started the timeline since.
  const auto& entries = node.mapped()->entries;
  if (node.mapped()->trace)
    for (const auto& e : entries)
      trace(self, *e, "E", node.mapped()->response.op(), false);
  // Last first, as the backend completes a success (backend_actor.cpp): a
  // caller waiting in submission order wakes once.
  for (auto e = entries.rbegin(); e != entries.rend(); ++e)
    complete(st, *e, outcome);
  complete_join_when_due(st);
  write_agreed(self);
  if (!st.lists_running.empty()) {
    auto& oldest = st.lists_running.front();
    oldest.moved += moved;  // moved.lists is 0: list_done counts the list
    if (--oldest.remaining == 0) {
      auto done = oldest.moved;
      const bool agreed = oldest.agreed;
      st.lists_running.pop_front();
      list_done(st, self, done, agreed);
    }
  }
  finish_if_stopping(self);
}

negotiator_actor::behavior_type negotiate(negotiator_self self, negotiator_args args,
                                          coordinator_actor local_coordinator,
                                          backend_actors backends, caf::actor timeline) {
  auto& st = self->state;
  st.set_id = args.process_set_id;
  st.set_rank = args.set_rank;
  st.set_size = args.set_size;
  st.epoch = args.epoch;
  st.tree_hold = args.tree_hold;
  st.channel_poll = args.channel_poll;
  st.placed = !args.await_place;
  st.host = args.host;
  st.local_coordinator = std::move(local_coordinator);
  st.backends = std::move(backends);
  st.timeline = std::move(timeline);
  st.tracing = st.timeline && args.tracing;
  st.mark_cycles = args.mark_cycles;
  st.metrics = std::move(args.metrics);
  st.inbox = std::move(args.inbox);
  if (st.inbox)
    self->attach_functor([inbox = st.inbox] { inbox->close(); });
  return {
    [=](submit_atom, const submitted_batch_ptr& in) {
      on_submit(self, {std::exchange(in->entries, {})});
    },
    [=](submit_atom) {
      auto& st = self->state;
      if (!st.inbox)
        return;
      st.inbox->take(st.taken);
      on_submit(self, st.taken);
      st.taken.clear();
    },
    [=](flush_atom) {
      auto& st = self->state;
      st.channel_retry_scheduled = false;
      // (A broken set places nobody: nothing to warn about.)
      if (!st.placed && control::hit_aggregator::clock::now() >= st.place_deadline &&
          st.coordinator && !st.broken) {
        spdlog::warn("process set {}: set rank {} was not placed in the control tree within "
                     "{} s of its introduction (is TROUPE_CONTROL_FANOUT the same on every "
                     "rank?); its lists go to the coordinator until it is",
                     st.set_id, st.set_rank,
                     std::chrono::duration_cast<std::chrono::seconds>(place_wait).count());
        settle_place(self);
      }
      flush_requests(self);
    },
    [=](response_atom, int64_t epoch, uint32_t set, const std::string& bytes) {
      if (!same_epoch(self->state.epoch, epoch, "negotiator", set))
        return;
      // The subtree first: its ranks wait for the list as this one does.
      for (const auto& child : self->state.children)
        self->send(child, response_atom::value, epoch, set, bytes);
      on_response_list(self, bytes);
      if (self->state.channel) {
        ++self->state.channel_handled;
        write_agreed(self);
      }
    },
    [=](request_atom, int64_t epoch, uint32_t set, const std::string& bytes) {
      if (same_epoch(self->state.epoch, epoch, "negotiator", set))
        on_child_list(self, bytes);
    },
    [=](tree_atom, int32_t parent_rank, int32_t end, std::vector<int32_t>& children,
        caf::actor& parent, std::vector<caf::actor>& relay) {
      const bool taken = on_placed(self, parent_rank, end, children, parent, relay);
      settle_place(self);  // (an invalid place is refused: lists go as in a star)
      return taken;
    },
    // Once per set: the introduction goes first, so the coordinator knows
    // where to answer before it sees this rank's first request.
    [=](coordinator_atom, coordinator_actor& coordinator, const std::string& channel) {
      auto& st = self->state;
      if (st.coordinator)
        return;
      st.coordinator = std::move(coordinator);
      open_channel(self, channel);
      self->send(st.coordinator, hello_atom::value, st.set_rank,
                 member_actor{caf::actor_cast<negotiator_actor>(self)}, st.channel != nullptr,
                 st.host);
      if (!st.placed) {
        st.place_deadline = control::hit_aggregator::clock::now() + place_wait;
        self->delayed_send(self, place_wait, flush_atom::value);
      }
      flush_requests(self);
    },
    [=](executed_atom, uint64_t id, status& result, const list_stats& moved) {
      on_executed(self, id, result, moved);
    },
    [=](tune_atom, const std::string& bytes) {
      auto& st = self->state;
      v1::Tuning change;
      if (!change.ParseFromString(bytes)) {
        spdlog::error("negotiator: dropped a malformed settings change ({} bytes)",
                      bytes.size());
        return;
      }
      if (!st.tuning)
        st.tuning.emplace();
      st.tuning->MergeFrom(change);
      if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->send(self, flush_atom::value);
      }
    },
    [=](tracing_atom, bool on, bool mark_cycles) {
      self->state.tracing = on && self->state.timeline;
      self->state.mark_cycles = mark_cycles;
    },
    [=](abort_atom, const status& why) {
      auto& st = self->state;
      if (st.broken && !abort_escalates(*st.broken, why))
        return;
      st.broken = why;
      // The message makes queued works answer without running. Only a lost
      // peer (frozen, unreachable) can hold the running one in a library
      // call until the library's timeout: that one is interrupted. A peer
      // that resets or shuts down ends the call by closing its side, and a
      // call that can still complete is left to, here and on the peers.
      for (const auto& [kind, backend] : st.backends) {
        self->send<caf::message_priority::high>(backend.actor, abort_atom::value, why);
        if (why.code() == status_code::peer_lost)
          backend.interrupt();
      }
      fail_pending(st, why);
      finish_if_stopping(self);
    },
    // An ordinary message, not an exit: submissions queued before it are
    // still answered (by the abort that precedes it) instead of dropped,
    // and works the backend is running complete (and release the caller's
    // buffers) before the backend stops.
    [=](shutdown_atom) {
      self->state.stopping = true;
      finish_if_stopping(self);
    },
  };
}

} // namespace negotiation

negotiator_actor spawn_negotiator(caf::actor_system& sys, const negotiator_args& args,
                                  const coordinator_actor& local_coordinator,
                                  const backend_actors& backends, const caf::actor& timeline) {
  return sys.spawn(negotiation::negotiate, args, local_coordinator, backends, timeline);
}

} // namespace troupe::actors
