#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <memory>
#include <string>

#include "actors/protocols.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"

namespace troupe::elastic {
class store_client;
}

namespace troupe::metrics {
class rank_metrics;
}

namespace troupe::actors {
class application_tuning;
}

namespace troupe::workers {

struct supervisor_args {
  identity id;
  config cfg;
  std::shared_ptr<elastic::store_client> store;  // null for a job of one
  std::shared_ptr<metrics::rank_metrics> metrics;  // the runtime's; each set gets its series
  int64_t epoch = 0;  // the membership epoch this supervisor serves
  // The runtime's trace writer (it outlives epochs, so one file holds a
  // rank's whole run); null without TROUPE_TIMELINE.
  caf::actor timeline;
  // Where the global set's negotiator records the application's settings
  // (actors::application_tuning); the runtime's, read after a reset.
  std::shared_ptr<actors::application_tuning> application;
};

/// Spawns the per-rank supervisor (protocol: actors::supervisor_actor). It is
/// this rank's endpoint: its neighbours in the control connections
/// (control::control_links: every rank in a small job, the parent and
/// children in the global set's control tree in a large one) send it
/// (hello, rank, endpoint, address) at bootstrap; peers send (bye, rank)
/// when they shut down, and, once per process set, (coordinator, epoch,
/// set id, serial, handle) from the set's coordinator rank, passed on to the
/// negotiator; collectives then go between negotiators and coordinator
/// directly. Along a tree each supervisor passes byes, announcements and
/// (lost, rank, why) on to its other neighbours. It owns the actor group of
/// every process set (negotiator, coordinator on the set's lowest rank,
/// detached backend), monitors its neighbours and children, and turns a
/// lost peer into an abort of the groups it belongs to (and, along a tree,
/// of the groups it cut this rank off from).
///
/// Bootstrap protocol from the runtime: (peers, every rank's parent in the
/// tree or nothing for a mesh) -> true once every neighbour has said hello;
/// (start) -> (status, negotiator of the global set);
/// (shutdown) -> true after peers were told (bye) and groups stopped;
/// (reset, next epoch) -> the ranks that can join the next epoch (this one
/// and every peer neither lost nor shut down), after the groups stopped
/// (pending collectives fail with status_code::reset) and peers were told.
/// The supervisor stops after either: one supervisor per membership epoch.
actors::supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_args args);

} // namespace troupe::workers
