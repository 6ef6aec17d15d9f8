#include "backends/thread_affinity.hpp"

#include <cstring>
#include <thread>

#include <pthread.h>
#include <sched.h>

namespace troupe::backends {

std::string pin_current_thread(int core) {
  if (core < 0 || core >= CPU_SETSIZE)
    return "core " + std::to_string(core) + " is not a CPU number";
  cpu_set_t cores;
  CPU_ZERO(&cores);
  CPU_SET(core, &cores);
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof cores, &cores); rc != 0)
    return "cannot pin a thread to core " + std::to_string(core) + ": " + std::strerror(rc);
  return {};
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

} // namespace troupe::backends
