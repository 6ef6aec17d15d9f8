#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/rank_layout.hpp"

namespace troupe::backends {

/// Names of the CPU backends this build has.
std::vector<std::string> built_cpu_backends();

/// The CPU backend a process set of several ranks runs on: `requested`
/// (TROUPE_CPU_OPERATIONS) when set, else Gloo where troupe-run's store is
/// and MPI where it is not (mpirun, or a process started alone, as Horovod
/// built with MPI). Built or not: make_set_backends() says when it is not.
std::string chosen_cpu_backend(const std::string& requested, bool have_store);

/// Whether this build takes CUDA tensors (TROUPE_WITH_CUDA) and has the
/// NCCL backend (TROUPE_WITH_NCCL).
bool cuda_built();
bool nccl_built();
/// NCCL_VERSION_CODE of the headers the NCCL backend was built with (2.28.9:
/// 22809, as Horovod's nccl_built()); 0 without it.
int nccl_version();

/// Whether MPI has been initialised in this process (by Troupe under
/// mpirun, or by the program, e.g. mpi4py); false in a build without MPI.
bool mpi_started();

/// Whether MPI is initialised in this process with MPI_THREAD_MULTIPLE
/// (Horovod's mpi_threads_supported()); false without MPI, before it is
/// initialised, or with TROUPE_MPI_THREADS_DISABLE's MPI_THREAD_SERIALIZED.
bool mpi_thread_multiple();

/// Why a tensor on `kind` cannot run here ("this build has no GPU backend
/// (NCCL: TROUPE_WITH_NCCL)", "no CUDA device is visible to this process
/// ..."), or "" when it can.
std::string missing_backend(device_kind kind);

/// Which libraries a process set's backends use: the configuration's
/// TROUPE_CPU_OPERATIONS and TROUPE_GPU_OPERATIONS ("" = the default).
struct backend_choice {
  std::string cpu;  // "gloo", "mpi", "" = gloo under troupe-run, mpi under mpirun
  std::string gpu;  // "nccl", "gloo", "mpi", "" = nccl where built, else the CPU backend
};

/// A process set's backends on this rank.
struct set_backends {
  /// CPU tensors: over a communicator (none for a set of one, else Gloo or
  /// MPI); in a CUDA build it also takes CUDA tensors staged through host
  /// memory, when `gpu` is null.
  std::unique_ptr<backend> cpu;
  /// CUDA tensors, when they have a backend of their own (NCCL).
  std::unique_ptr<backend> gpu;
  /// CUDA tensors go to `cpu` (staged).
  bool gpu_on_cpu = false;
};

/// Creates them. Throws backend_error saying what is missing when the
/// choice cannot work in this build or launch.
set_backends make_set_backends(const backend_context& ctx, const backend_choice& choice);

/// A job started by another launcher's library (mpirun): who this process
/// is, and an allgather of strings to bootstrap the control plane with.
struct external_launch {
  rank_layout layout;
  std::function<std::vector<std::string>(const std::string&)> allgather;
};

/// Set when mpirun started this process and this build has MPI (MPI gets
/// initialised, with MPI_THREAD_SERIALIZED when `mpi_threads_disable`, else
/// MPI_THREAD_MULTIPLE); nothing otherwise. Throws backend_error if MPI
/// fails.
std::optional<external_launch> detect_external_launch(bool mpi_threads_disable);

/// Whether MPI runs in this process and yields its core while it waits
/// (Open MPI's mpi_yield_when_idle); false without MPI.
bool mpi_yielding();

/// Whether each of the `host_ranks` ranks of this host has a core of its
/// own, so that a thread waiting for the others may poll (peer_poll_time)
/// instead of sleeping; where they share cores, a polling rank holds the
/// core a late one needs. Under MPI: MPI's verdict (it does not yield
/// unless started with more ranks than slots). Otherwise: this process may
/// run on at least `host_ranks` CPUs, or `own_core` (troupe-run bound each
/// rank of the host to a CPU of its own: identity::own_core).
bool ranks_have_cores(int host_ranks, bool own_core);

/// Whether this rank's runtime is bound to CPUs of its own: troupe-run
/// bound it or its runtime's threads (`own_cpu`: identity::own_core or
/// runtime_cpu), or MPI did (the process may run on fewer CPUs than the
/// host has online, and MPI does not yield).
bool rank_bound(bool own_cpu);

} // namespace troupe::backends
