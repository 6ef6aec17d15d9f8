#include "elastic/launcher/cpu_binding.hpp"

#include <algorithm>
#include <stdexcept>

#include <sched.h>

namespace troupe::elastic::launcher {

namespace {

// "cpu" gives each rank of a host a CPU of its own: there must be enough.
void check_enough(int ranks, int usable) {
  if (ranks > usable)
    throw std::invalid_argument("--cpu-binding cpu: " + std::to_string(ranks) +
                                " ranks on this host but only " + std::to_string(usable) +
                                " CPUs to bind them to");
}

} // namespace

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

std::vector<int> rank_cpus(const std::string& mode, int host_ranks,
                           const std::vector<int>& usable) {
  if (mode != "cpu")
    return {};
  check_enough(host_ranks, static_cast<int>(usable.size()));
  return {usable.begin(), usable.begin() + host_ranks};
}

std::vector<int> machine_rank_cpus(const std::string& mode, const std::vector<rank_slot>& ranks,
                                   const std::string& own_hostname) {
  const auto here = std::count_if(ranks.begin(), ranks.end(), [&](const rank_slot& slot) {
    return is_local_host(slot.host, own_hostname);
  });
  return rank_cpus(mode, static_cast<int>(here), usable_cpu_list());
}

std::vector<std::string> mpirun_binding(const std::string& mode, int np, bool one_host,
                                        int usable) {
  bool bind = mode == "auto" && one_host && np == usable;
  if (mode == "cpu") {
    if (one_host)  // across hosts, mpirun alone knows their CPUs
      check_enough(np, usable);
    bind = true;
  }
  return {"--bind-to", bind ? "hwthread" : "none"};
}

} // namespace troupe::elastic::launcher
