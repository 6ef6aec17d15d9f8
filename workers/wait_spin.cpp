#include "workers/wait_spin.hpp"

#include <sched.h>

#include <thread>

namespace troupe::workers {

namespace {

constexpr std::chrono::microseconds spin_with_a_spare_core{100};

} // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

std::chrono::microseconds wait_spin(int configured, int local_size, int cpus) {
  if (configured >= 0)
    return std::chrono::microseconds(configured);
  return cpus >= 2 * local_size ? spin_with_a_spare_core : std::chrono::microseconds(0);
}

} // namespace troupe::workers
