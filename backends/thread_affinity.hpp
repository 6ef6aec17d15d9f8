#pragma once

#include <string>

namespace troupe::backends {

/// Pins the calling thread to CPU `core` (TROUPE_THREAD_AFFINITY, Horovod's
/// HOROVOD_THREAD_AFFINITY). Empty when done, else why not.
std::string pin_current_thread(int core);

/// CPUs this process may run on (its affinity mask).
int usable_cpus();

} // namespace troupe::backends
