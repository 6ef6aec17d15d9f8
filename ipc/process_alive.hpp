#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

namespace troupe::ipc {

/// False once `pid` has exited, reaped or not (a zombie counts as gone);
/// true while it runs, or when this process may not know (no procfs and
/// kill() saw it).
bool process_alive(pid_t pid);

/// This process's boot and pid namespace ("<boot id>:<device>:<inode>" of
/// the namespace), empty where procfs does not say. A pid names the same
/// process to two processes only where both read the same, non-empty.
std::string pid_namespace();

/// When `pid` started, in clock ticks after boot (/proc/<pid>/stat, field
/// 22); nullopt when it cannot be read (no such process, no procfs). With
/// the pid, it names one process for the whole boot: a pid is reused, a
/// start time is not.
std::optional<uint64_t> process_start_time(pid_t pid);

} // namespace troupe::ipc
