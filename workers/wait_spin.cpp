#include "workers/wait_spin.hpp"

namespace troupe::workers {

namespace {

constexpr std::chrono::microseconds spin_with_a_spare_core{100};

} // namespace

std::chrono::microseconds wait_spin(int configured, int local_size, int cpus) {
  if (configured >= 0)
    return std::chrono::microseconds(configured);
  return cpus >= 2 * local_size ? spin_with_a_spare_core : std::chrono::microseconds(0);
}

} // namespace troupe::workers
