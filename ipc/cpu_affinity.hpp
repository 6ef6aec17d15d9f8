#pragma once

#include <string>
#include <vector>

namespace troupe::ipc {

/// The CPUs the calling thread may run on (its affinity mask), in order;
/// a process's own until one of its threads changes its mask.
std::vector<int> usable_cpu_list();

/// Lets the calling thread run on `cpus` only. Empty when done, else why
/// not (a CPU number out of range, or the kernel's refusal).
std::string run_current_thread_on(const std::vector<int>& cpus);

} // namespace troupe::ipc
