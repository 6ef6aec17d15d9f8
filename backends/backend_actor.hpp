#pragma once

#include <memory>

#include "backends/backend.hpp"

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace troupe::metrics {
class collective_metrics;
}

namespace troupe::backends {

/// Spawns the detached actor (its own thread, blocking allowed) that owns
/// `b` and runs its collectives one at a time in mailbox order.
/// Protocol: (connect) -> status; (execute, work) -> sender gets
/// (executed, work id, status, list_stats of this work); (abort, status),
/// sent with high priority: queued works answer with that status without
/// running. `metrics` (required) counts what ran.
caf::actor spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                               int set_rank, int set_size,
                               std::shared_ptr<metrics::collective_metrics> metrics);

} // namespace troupe::backends
