#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <memory>

#include "actors/protocols.hpp"
#include "backends/backend.hpp"

namespace troupe::metrics {
class collective_metrics;
}

namespace troupe::backends {

/// Spawns the detached actor (its own thread, blocking allowed) that owns
/// `b` and runs its collectives one at a time in mailbox order.
/// Protocol: actors::backend_actor. (execute, work) is answered with
/// (executed, work id, status, list_stats of this work); after (abort,
/// status) queued works answer with that status without running.
/// `metrics` (required) counts what ran.
actors::backend_actor spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                                          int set_rank, int set_size,
                                          std::shared_ptr<metrics::collective_metrics> metrics);

} // namespace troupe::backends
