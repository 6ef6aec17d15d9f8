// The negotiator's way up: what the API submits, the request lists it
// sends to the coordinator or its control-tree parent (with its children's,
// at an inner node), its place in the control tree, and the control
// channel it opens.

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/negotiator_state.hpp"
#include "control/hit_aggregator.hpp"
#include "control/shm_channel.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::actors::negotiation {

const char* duplicate_name_error =
  "Requested to allreduce, allgather, or broadcast a tensor with the same name as "
  "another tensor that is currently being processed. If you want to request another "
  "tensor, use a different tensor name.";

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
  if (st.restored) {
    *list.mutable_restored() = std::move(*st.restored);
    st.restored.reset();
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
  const bool any = list.requests_size() > 0 || list.has_tuning() || list.has_restored();
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

} // namespace troupe::actors::negotiation
