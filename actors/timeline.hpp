#pragma once

#include <cstdint>
#include <string>

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace troupe::actors {

/// Spawns the detached timeline actor writing `path` (see timeline_writer);
/// it takes (timeline, tensor, phase "B"/"E", activity, ts_us) messages so
/// the collective path never waits for the disk. A null handle when the
/// file cannot be created (the reason is logged).
caf::actor spawn_timeline(caf::actor_system& sys, const std::string& path);

/// Microseconds on the steady clock, the timeline's time base.
int64_t timeline_now_us();

} // namespace troupe::actors
