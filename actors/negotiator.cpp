#include "actors/negotiator.hpp"

#include <chrono>
#include <string>
#include <unordered_set>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/negotiator_state.hpp"
#include "actors/timeline.hpp"
#include "control/hit_aggregator.hpp"
#include "control/shm_channel.hpp"
#include "metrics/rank_metrics.hpp"
#include "proto/op_properties.hpp"

namespace troupe::actors {

namespace negotiation {

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
void complete(negotiator_state& st, tensor_entry_ptr e, status s) {
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
//
// Running is by entry, not by name: a name submitted again after the
// backend completed its last work, and already running again, has two
// entries in flight.
void fail_pending(negotiator_state& st, const status& s) {
  std::unordered_set<const tensor_entry*> running;
  for (const auto& [id, work] : st.in_flight)
    for (const auto& e : work->entries)
      running.insert(e.get());
  auto table = std::move(st.table);
  st.table.clear();
  for (const auto& [name, e] : table)
    if (running.count(e.get()) > 0)
      st.table.emplace(name, e);
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
  for (auto& [name, e] : table)
    if (running.count(e.get()) == 0)
      e->handle->complete(s);
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

// Merges a settings change (Tuning bytes) into `into`, sent with the next
// request list.
void queue_tuning(negotiator_self self, std::optional<v1::Tuning>& into,
                  const std::string& bytes) {
  v1::Tuning change;
  if (!change.ParseFromString(bytes)) {
    spdlog::error("negotiator: dropped a malformed settings change ({} bytes)", bytes.size());
    return;
  }
  if (!into)
    into.emplace();
  into->MergeFrom(change);
  if (!self->state.flush_scheduled) {
    self->state.flush_scheduled = true;
    self->send(self, flush_atom::value);
  }
}

// The coordinator places every member right after the last one
// introduced itself, and answers nothing before; this bounds the wait of
// a member whose coordinator places nobody (its fanout configured
// otherwise): its lists then go to the coordinator, as in a star.
constexpr auto place_wait = std::chrono::seconds(5);

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
  st.runs_small_works = args.runs_small_works;
  st.placed = !args.await_place;
  st.host = args.host;
  st.local_coordinator = std::move(local_coordinator);
  st.backends = std::move(backends);
  st.timeline = std::move(timeline);
  st.tracing = st.timeline && args.tracing;
  st.mark_cycles = args.mark_cycles;
  st.metrics = std::move(args.metrics);
  st.inbox = std::move(args.inbox);
  st.application = std::move(args.application);
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
      await_agreed(self);
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
      if (self->state.channel)
        on_channel_list(self, bytes);
      else
        on_response_list(self, bytes);
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
      queue_tuning(self, self->state.tuning, bytes);
    },
    [=](restore_atom, const std::string& bytes) {
      queue_tuning(self, self->state.restored, bytes);
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
