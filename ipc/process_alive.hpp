#pragma once

#include <string>

#include <sys/types.h>

namespace troupe::ipc {

/// False once `pid` has exited, reaped or not (a zombie counts as gone);
/// true while it runs, or when this process may not know (no procfs and
/// kill() saw it).
bool process_alive(pid_t pid);

/// This process's boot and pid namespace ("<boot id>:<namespace inode>"),
/// empty where procfs does not say. A pid names the same process to two
/// processes only where both read the same, non-empty.
std::string pid_namespace();

} // namespace troupe::ipc
