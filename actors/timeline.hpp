#pragma once

#include <cstdint>
#include <string>

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace troupe::actors {

/// Spawns this rank's detached timeline actor (see timeline_writer), so the
/// collective path never waits for the disk. It writes `path` from the
/// start, or nothing until told to start when `path` is empty (dynamic
/// timeline). Messages:
///   (timeline, tensor, phase "B"/"E", activity, ts_us)   one span edge
///   (timeline, name, ts_us)                             a global marker
///   (tl_start, path) -> status                          (re)starts a file
///   (tl_stop)                                           closes it
caf::actor spawn_timeline(caf::actor_system& sys, const std::string& path);

/// Microseconds on the steady clock, the timeline's time base.
int64_t timeline_now_us();

} // namespace troupe::actors
