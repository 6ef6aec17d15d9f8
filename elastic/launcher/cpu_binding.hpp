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

/// The CPU of each of the `host_ranks` ranks troupe-run starts itself on
/// this host (Gloo mode; by their index among them), or none: one of
/// `usable` each for `mode` "cpu" (throws std::invalid_argument when there
/// are fewer), none for "auto" and "none".
std::vector<int> rank_cpus(const std::string& mode, int host_ranks,
                           const std::vector<int>& usable);

/// rank_cpus for the ranks of a static job that run on this machine
/// (`is_local_host`), indexed by their machine_local_rank.
std::vector<int> machine_rank_cpus(const std::string& mode, const std::vector<rank_slot>& ranks,
                                   const std::string& own_hostname);

/// mpirun's binding arguments (mpirun binds on every host): one hardware
/// thread per rank (mapped so with --map-by hwthread, unless the user maps
/// the ranks) for "cpu", and for "auto" where the job runs on this host
/// alone (`one_host`) with exactly one rank per usable CPU (each rank has
/// one CPU's share either way; with more CPUs a rank's compute threads keep
/// them, Horovod's default); else --bind-to none.
std::vector<std::string> mpirun_binding(const std::string& mode, int np, bool one_host,
                                        int usable);

} // namespace troupe::elastic::launcher
