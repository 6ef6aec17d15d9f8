// The negotiator's way down: the coordinator's response lists, the works
// it hands to the backends, and their completion.

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/negotiator_state.hpp"
#include "actors/work_tracers.hpp"
#include "metrics/rank_metrics.hpp"
#include "proto/op_properties.hpp"
#include "proto/request_checks.hpp"

namespace troupe::actors::negotiation {

// A backend failure usually means a peer died; the supervisor learns which
// one within milliseconds. Waiting this long lets the handles carry the
// precise "rank N was lost" message instead of a socket error.
constexpr auto backend_failure_grace = std::chrono::milliseconds(300);

// Fails the entries a malformed response names, saying what was wrong (not
// those running: the backend may still use their memory).
void fail_named(negotiator_state& st, const v1::Response& resp, const status& s) {
  spdlog::error("negotiator: {}", s.message());
  for (const auto& name : resp.tensor_names()) {
    auto it = st.table.find(name);
    if (it != st.table.end() && !it->second->launched)
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
  for (const auto& e : work->entries)
    e->launched = true;
  work->id = st.next_work_id++;
  work->response = std::move(resp);
  work->fusion_chunk_bytes = st.fusion_chunk_bytes;
  if (st.tracing)
    attach_tracers(st.timeline, *work);
  // Nothing runs or waits on the backends, so the backend is free on this
  // thread (and every work before this one has finished: order kept).
  // Not while tracing: the timeline's spans follow the actor's path.
  const bool idle = st.in_flight.empty();
  st.in_flight.emplace(work->id, work);
  if (idle && st.runs_small_works && !st.broken && !st.tracing && backend->second.run_here)
    if (auto ran = backend->second.run_here(*work)) {
      st.ran_here_results.push_back({work->id, std::move(*ran)});
      return true;
    }
  self->send(backend->second.actor, execute_atom::value, work);
  return true;
}

void ran_here_done(negotiator_self self) {
  auto& st = self->state;
  // on_executed may write and run an agreed list, which may run another
  // work here: the outermost call handles it, in order.
  if (std::exchange(st.handling_ran_here, true))
    return;
  for (size_t i = 0; i < st.ran_here_results.size(); ++i) {
    auto ran = std::move(st.ran_here_results[i]);  // the vector may grow meanwhile
    on_executed(self, ran.id, ran.outcome.result, ran.outcome.moved);
  }
  st.ran_here_results.clear();
  st.handling_ran_here = false;
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
  if (list.has_application() && st.application)
    st.application->record(list.application().SerializeAsString());
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
    std::optional<std::string> running;
    for (int i = 0; i < resp.tensor_names_size(); ++i) {
      const auto& name = resp.tensor_names(i);
      auto it = st.table.find(name);
      if (it != st.table.end() && it->second->launched) {
        if (resp.op() != v1::OP_TYPE_ERROR && !running)  // (an error leaves it alone)
          running = name;
      } else if (it != st.table.end()) {
        trace(self, *it->second, "E", it->second->request.op(), true);
        st.metrics->negotiated(it->second->submitted, now);
        work->entries.push_back(it->second);
      } else if (st.joined && resp.op() == v1::OP_TYPE_ALLREDUCE) {
        work->entries.push_back(joined_stand_in(resp, i));
      } else if (resp.op() != v1::OP_TYPE_ERROR && !unknown) {  // errors reach every rank
        unknown = name;
      }
    }
    // Run twice, a tensor would be reduced twice, and its caller could free
    // its memory while the first run still writes it. Without one of its
    // tensors a fused work's sizes no longer line up with the response's.
    // Either way nothing of it runs here.
    std::optional<std::string> refused;
    if (running)
      refused = "names tensor '" + *running + "', which already runs on set rank " +
                std::to_string(st.set_rank);
    else if (unknown && (!work->entries.empty() || !st.joined))
      refused = "names tensor '" + *unknown + "', which set rank " +
                std::to_string(st.set_rank) + " has not submitted";
    if (refused) {
      const status s{status_code::internal, "process set " + std::to_string(st.set_id) +
                                              ": the coordinator's " +
                                              properties(resp.op()).name + " response " +
                                              *refused};
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
  ran_here_done(self);
  if (!st.posted.empty())
    repost_changed(self);
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
  // After the list's count: the agreed list may run a work here at once,
  // whose (executed) must not count toward this one's list.
  write_agreed(self);
  finish_if_stopping(self);
}

} // namespace troupe::actors::negotiation
