#include "ipc/cpu_affinity.hpp"

#include <cstring>

#include <pthread.h>
#include <sched.h>

namespace troupe::ipc {

std::vector<int> usable_cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set))
      cpus.push_back(cpu);
  return cpus;
}

std::string run_current_thread_on(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE)
      return "core " + std::to_string(cpu) + " is not a CPU number";
    CPU_SET(cpu, &set);
  }
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0) {
    std::string which;
    for (const int cpu : cpus)
      which += (which.empty() ? "" : ",") + std::to_string(cpu);
    return "cannot pin a thread to core " + which + ": " + std::strerror(rc);
  }
  return {};
}

} // namespace troupe::ipc
