#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <caf/actor.hpp>

namespace caf {
class actor_system;
}

namespace troupe::workers {

/// Spawns this process's directory: the one actor a runtime publishes, for
/// its whole life. Peers find this rank's supervisor of a membership epoch
/// through it, over the connection they already have, so a reset opens no
/// new connection and never meets a stale endpoint (CAF caches remote
/// actors by host and port, and a port the previous epoch freed can come
/// back).
///
/// (enter, epoch, supervisor): the supervisor of `epoch`; older epochs are
/// forgotten. (lookup, epoch) -> actor: that epoch's supervisor, answered
/// once it has entered (the asker bounds the wait); a null handle when a
/// newer epoch has replaced it.
caf::actor spawn_directory(caf::actor_system& sys);

} // namespace troupe::workers
