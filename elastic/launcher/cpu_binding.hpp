#pragma once

#include <string>
#include <vector>

#include "elastic/launcher/host_plan.hpp"

// Whether troupe-run binds the ranks it starts to CPUs (TROUPE_CPU_BINDING,
// --cpu-binding). Bound, a rank's threads stay on its CPU: unbound, the
// scheduler wakes a rank's thread on the CPU of the rank that woke it, and
// the two ranks then share one CPU while the other idles (2 ranks on 2
// CPUs, a 4-byte allreduce: 121 -> 50 us bound, Gloo mode,
// docs/benchmarks.md run (18)). Gloo's TCP transport is slower with its
// threads bound, so where a Gloo-mode job's data goes over it (--shm 0)
// only the runtime's own threads are pinned ("runtime"), and the process,
// with the backend's thread, stays unbound. With the host's shared segment
// carrying the data (every collective but Adasum on one host), whole
// processes are bound as under mpirun: pinning only the runtime's threads
// left the unbound ones free to land on the other rank's CPU, next to its
// polling threads (4 B 92-130 vs 19 us, run (26)).
namespace troupe::elastic::launcher {

/// Where the ranks troupe-run starts itself on this host run (Gloo mode).
struct rank_placement {
  /// One CPU each, by their index among this host's ranks; empty: none.
  std::vector<int> cpus;
  /// The whole process is bound to its CPU (TROUPE_CPU); else only the
  /// runtime's scheduler and control-channel threads run there
  /// (TROUPE_RUNTIME_CPU).
  bool whole_process = false;
};

/// The placement of the `host_ranks` ranks troupe-run starts itself on this
/// host: one of `usable` each, the whole process for `mode` "cpu", the
/// runtime's threads for "runtime" (both throw std::invalid_argument when
/// there are fewer), and for "auto" where the job runs on this host alone
/// (`host_alone`) with exactly one rank per usable CPU: the whole process,
/// or the runtime's threads when their data goes over TCP (`tcp_data`:
/// the shared segment is off); else, and for "none", none.
rank_placement rank_cpus(const std::string& mode, int host_ranks, const std::vector<int>& usable,
                         bool host_alone, bool tcp_data);

/// rank_cpus for the ranks of a static job that run on this machine
/// (`is_local_host`), indexed by their machine_local_rank.
rank_placement machine_rank_cpus(const std::string& mode, const std::vector<rank_slot>& ranks,
                                 const std::string& own_hostname, bool tcp_data);

/// mpirun's binding arguments (mpirun binds on every host): one hardware
/// thread per rank (mapped so with --map-by hwthread, unless the user maps
/// the ranks) for "cpu", and for "auto" where the job runs on this host
/// alone (`one_host`) with exactly one rank per usable CPU (each rank has
/// one CPU's share either way; with more CPUs a rank's compute threads keep
/// them, Horovod's default); else --bind-to none. "runtime" throws
/// std::invalid_argument: mpirun binds whole processes.
std::vector<std::string> mpirun_binding(const std::string& mode, int np, bool one_host,
                                        int usable);

} // namespace troupe::elastic::launcher
