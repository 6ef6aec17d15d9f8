#include "elastic/launcher/cpu_binding.hpp"

#include <algorithm>
#include <stdexcept>

#include "ipc/cpu_affinity.hpp"

namespace troupe::elastic::launcher {

namespace {

// "cpu" and "runtime" give each rank of a host a CPU of its own: there
// must be enough.
void check_enough(const std::string& mode, int ranks, int usable) {
  if (ranks > usable)
    throw std::invalid_argument("--cpu-binding " + mode + ": " + std::to_string(ranks) +
                                " ranks on this host but only " + std::to_string(usable) +
                                " CPUs to bind them to");
}

} // namespace

rank_placement rank_cpus(const std::string& mode, int host_ranks, const std::vector<int>& usable,
                         bool host_alone, bool tcp_data) {
  const int cpus = static_cast<int>(usable.size());
  const bool automatic = mode == "auto" && host_alone && host_ranks == cpus;
  if (mode != "cpu" && mode != "runtime" && !automatic)
    return {};
  check_enough(mode, host_ranks, cpus);
  return {{usable.begin(), usable.begin() + host_ranks},
          mode == "cpu" || (automatic && !tcp_data)};
}

rank_placement machine_rank_cpus(const std::string& mode, const std::vector<rank_slot>& ranks,
                                 const std::string& own_hostname, bool tcp_data) {
  const auto here = std::count_if(ranks.begin(), ranks.end(), [&](const rank_slot& slot) {
    return is_local_host(slot.host, own_hostname);
  });
  return rank_cpus(mode, static_cast<int>(here), ipc::usable_cpu_list(),
                   static_cast<size_t>(here) == ranks.size(), tcp_data);
}

std::vector<std::string> mpirun_binding(const std::string& mode, int np, bool one_host,
                                        int usable) {
  bool bind = mode == "auto" && one_host && np == usable;
  if (mode == "runtime")
    throw std::invalid_argument("--cpu-binding runtime is for troupe-run's own launch (Gloo "
                                "mode): under --mpi, mpirun binds whole processes (cpu, auto, "
                                "none)");
  if (mode == "cpu") {
    if (one_host)  // across hosts, mpirun alone knows their CPUs
      check_enough(mode, np, usable);
    bind = true;
  }
  return {"--bind-to", bind ? "hwthread" : "none"};
}

} // namespace troupe::elastic::launcher
