#include "backends/thread_affinity.hpp"

#include <thread>

#include "ipc/cpu_affinity.hpp"

namespace troupe::backends {

std::string pin_current_thread(int core) {
  return ipc::run_current_thread_on({core});
}

int usable_cpus() {
  const auto cpus = ipc::usable_cpu_list();
  return cpus.empty() ? static_cast<int>(std::thread::hardware_concurrency())
                      : static_cast<int>(cpus.size());
}

} // namespace troupe::backends
