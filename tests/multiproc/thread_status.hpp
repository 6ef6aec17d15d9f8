#pragma once

#include <string>
#include <vector>

namespace troupe::test {

/// What /proc/self/task/<tid>/status says of one thread.
struct thread_status {
  std::string tid;
  std::string name;
  std::string cpus;  // Cpus_allowed_list
  long switches = 0;  // voluntary and involuntary context switches so far
};

/// Every thread of this process, the main thread first; threads that end
/// while being listed are left out.
std::vector<thread_status> thread_statuses();

} // namespace troupe::test
