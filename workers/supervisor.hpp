#pragma once

#include <memory>
#include <string>

#include "workers/config.hpp"
#include "workers/identity.hpp"

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace troupe::elastic {
class store_client;
}

namespace troupe::metrics {
class rank_metrics;
}

namespace troupe::workers {

struct supervisor_args {
  identity id;
  config cfg;
  std::shared_ptr<elastic::store_client> store;  // null for a job of one
  std::shared_ptr<metrics::rank_metrics> metrics;  // the runtime's; each set gets its series
};

/// Spawns the per-rank supervisor. It is this rank's endpoint: peers send it
/// (hello, rank, endpoint, address) at bootstrap, (request|response, set id,
/// bytes) for the process sets, (bye, rank) when they shut down. It owns the
/// actor group of every process set (negotiator, coordinator on the set's
/// lowest rank, detached backend), monitors peers and children, and turns a
/// lost peer into an abort of the groups.
///
/// Bootstrap protocol from the runtime: (peers) -> true once every peer has
/// said hello; (start) -> (status, negotiator of the global set);
/// (shutdown) -> true after peers were told (bye) and groups stopped.
caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_args args);

} // namespace troupe::workers
