#pragma once

#include <sys/types.h>

namespace troupe::ipc {

/// False once `pid` has exited, reaped or not (a zombie counts as gone);
/// true while it runs, or when this process may not know (no procfs and
/// kill() saw it).
bool process_alive(pid_t pid);

} // namespace troupe::ipc
