#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "actors/backend_actors.hpp"

namespace troupe::metrics {
class set_metrics;
}

namespace troupe::actors {

class submission_inbox;

/// The settings the application has set on a process set (troupe::tune), as
/// the coordinator's last list that named them said (ResponseList.application,
/// a serialized Tuning; empty: none set): the set's negotiator records them,
/// and its rank reads them after that negotiator is gone (a reset asks the
/// new epoch's coordinator for them again).
class application_tuning {
public:
  void record(std::string tuning) {
    std::lock_guard<std::mutex> guard{mtx_};
    tuning_ = std::move(tuning);
  }
  std::string recorded() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return tuning_;
  }

private:
  mutable std::mutex mtx_;
  std::string tuning_;
};

/// Where a negotiator sits in its process set.
struct negotiator_args {
  uint32_t process_set_id = 0;
  int32_t set_rank = 0;
  /// The set's metrics on this rank (required): negotiation time, cycles,
  /// queue depth, cache hits.
  std::shared_ptr<metrics::set_metrics> metrics;
  /// The timeline writes from the start (TROUPE_TIMELINE=path); else it
  /// waits for (tracing, true, mark_cycles).
  bool tracing = false;
  /// The membership epoch: stamped on every request list sent.
  int64_t epoch = 0;
  /// As an inner node of the control tree: how long cache hits of part of
  /// the subtree wait for the rest before they go up as they are. Well
  /// below the stall inspector's check time, so its warnings name only
  /// ranks that really are missing.
  std::chrono::milliseconds tree_hold{1000};
  /// This rank's host, told to the coordinator: the control tree follows
  /// hosts.
  std::string host;
  /// Sends no list before the coordinator placed it in the control tree
  /// (control::tree_possible, and not the coordinator's own rank).
  bool await_place = false;
  /// Members of the set: an allgather response carries sizes for each.
  int32_t set_size = 1;
  /// A CYCLE_START marker per list while tracing from the start.
  bool mark_cycles = false;
  /// How long the control channel's reader looks for the reply to what
  /// this rank sent or posted before it sleeps (channel_member::poll_replies);
  /// 0 = it sleeps at once.
  std::chrono::microseconds channel_poll{0};
  /// The negotiator runs a small CPU work itself (backend_ref::run_here),
  /// blocking its scheduler thread for it, when its backends run nothing
  /// (docs/architecture.md, "Small works on the negotiator's thread"). For
  /// the global set only: a rank blocked in one set's work cannot run its
  /// negotiator of another set, which a peer blocked in that other set's
  /// work could be waiting for.
  bool runs_small_works = false;
  /// Where the API's submissions wait for (submit) (see
  /// submission_inbox); closed when the negotiator stops. Null: it takes
  /// only (submit, batch) messages.
  std::shared_ptr<submission_inbox> inbox = nullptr;
  /// Where the application's settings the lists name go (see
  /// application_tuning); null: nowhere.
  std::shared_ptr<application_tuning> application = nullptr;
};

/// Spawns the negotiator of one process set on this rank. It owns the set's
/// tensor table: (submit, batch) registers collectives, as does (submit)
/// for those waiting in its inbox, and asks the coordinator; (response, epoch, set id, bytes) runs or fails what the
/// coordinator decided, in its order, each work on the backend of its
/// response's device kind (failing it when `backends` has none); (abort,
/// status) fails everything pending and is passed on to every backend.
///
/// It talks to the coordinator directly, wherever that lives, once told its
/// handle, (coordinator, handle): it then introduces itself, (hello, set
/// rank, self), and sends what it held back meanwhile as (request, epoch,
/// set id, RequestList bytes), or, once placed in the set's control tree,
/// to its tree parent, passing each response list on to its children (see
/// docs/architecture.md, "Control tree"). A response list from another membership
/// epoch is refused. `local_coordinator` is the coordinator itself when it
/// lives in this process (else a null handle): it is told when this rank
/// has executed a response list, so it can batch the next. `timeline` (or
/// a null handle) receives NEGOTIATE_<OP> and <OP> spans and the backend's
/// activities while tracing; (tracing, on, mark_cycles) turns that on or
/// off, with a CYCLE_START marker per response list.
negotiator_actor spawn_negotiator(caf::actor_system& sys, const negotiator_args& args,
                                  const coordinator_actor& local_coordinator,
                                  const backend_actors& backends, const caf::actor& timeline);

} // namespace troupe::actors
