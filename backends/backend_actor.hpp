#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <memory>

#include "actors/protocols.hpp"
#include "backends/backend.hpp"

namespace troupe::metrics {
class collective_metrics;
}

namespace troupe::backends {

/// Spawns the detached actor (its own thread, so a blocking library may
/// block it) that owns `b` and starts its works in mailbox order.
/// Protocol: actors::backend_actor. (execute, work) is answered with
/// (executed, work id, status, list_stats of this work) once the work's
/// completion has finished: at once for a blocking library, else when a
/// poll with back-off sees it finished, while the actor goes on starting
/// works. After (abort, status) the backend is told to abort, and queued
/// works answer with that status without running. `metrics` (required)
/// counts what ran.
actors::backend_actor spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                                          std::shared_ptr<metrics::collective_metrics> metrics);

} // namespace troupe::backends
