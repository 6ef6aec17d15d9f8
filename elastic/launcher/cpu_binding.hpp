#pragma once

#include <string>
#include <vector>

#include "elastic/launcher/host_plan.hpp"

// Whether troupe-run binds the ranks it starts to CPUs (TROUPE_CPU_BINDING,
// --cpu-binding). Bound, a rank's threads stay on its CPU: unbound, the
// scheduler wakes a rank's thread on the CPU of the rank that woke it, and
// the two ranks then share one CPU while the other idles (2 ranks on 2
// CPUs, a 4-byte allreduce: 121 -> 50 us bound, Gloo mode,
// docs/benchmarks.md run (18)).
namespace troupe::elastic::launcher {

/// The CPUs this process may run on (its affinity mask), in order.
std::vector<int> usable_cpu_list();

/// The CPU of each of the `host_ranks` ranks troupe-run starts on this host
/// (by their index among them), or none. `mode` "none": none; "cpu": one of
/// `usable` each (throws std::invalid_argument when there are fewer);
/// "auto": as "cpu" when the job runs on this host alone (`one_host`) with
/// exactly one rank per usable CPU (each rank has one CPU's share either
/// way), else none (Horovod's default: a rank whose compute threads have
/// several CPUs keeps them).
std::vector<int> rank_cpus(const std::string& mode, int host_ranks, bool one_host,
                           const std::vector<int>& usable);

/// rank_cpus for the ranks of a static job that run on this machine
/// (`is_local_host`), indexed by their machine_local_rank; a job with ranks
/// on other hosts is not "one host".
std::vector<int> machine_rank_cpus(const std::string& mode, const std::vector<rank_slot>& ranks,
                                   const std::string& own_hostname);

/// mpirun's binding arguments for the same choice (mpirun binds on every
/// host): --bind-to none, or to one hardware thread per rank (mapped so
/// with --map-by hwthread, unless the user maps the ranks).
std::vector<std::string> mpirun_binding(const std::string& mode, int np, bool one_host,
                                        int usable);

} // namespace troupe::elastic::launcher
