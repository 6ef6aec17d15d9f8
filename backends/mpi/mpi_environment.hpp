#pragma once

#include <string>
#include <vector>

#include "backends/rank_layout.hpp"

namespace troupe::backends {

/// Whether this process was started by Open MPI's mpirun.
bool launched_by_mpirun();

/// Initialises MPI once per process, with MPI_THREAD_MULTIPLE or, when
/// `serialized`, MPI_THREAD_SERIALIZED; MPI cannot be initialised twice, so
/// it is finalised at process exit, not at shutdown, and init() after
/// shutdown() keeps working (with the first level). Throws backend_error,
/// also when MPI gives less than the level asked for.
void ensure_mpi_initialized(bool serialized = false);

/// Called when a peer of this process is lost. Open MPI's MPI_Finalize
/// waits for every process, so a frozen peer would hang this process's
/// exit: at exit this process ends the job with MPI_Abort instead, saying
/// why. Any thread.
void end_with_mpi_abort_at_exit();

/// Whether MPI runs yielding when idle (Open MPI's mpi_yield_when_idle, read
/// through MPI_T); false before MPI starts or in an MPI without it.
bool mpi_yields_when_idle();

/// Whether MPI_Init has run in this process (and MPI_Finalize not yet).
bool mpi_initialized();

/// Whether MPI may be called from several threads at once
/// (MPI_THREAD_MULTIPLE); MPI must be initialised.
bool mpi_concurrent_threads();

/// Identity from MPI_COMM_WORLD (initialising MPI as
/// ensure_mpi_initialized(serialized)); local = same shared-memory node.
rank_layout mpi_world_identity(bool serialized);

/// Throws backend_error with MPI's text for a failed call.
void check_mpi(int rc, const char* what);

/// Every rank's `mine`, in rank order (MPI_Allgatherv over COMM_WORLD).
std::vector<std::string> mpi_allgather_strings(const std::string& mine);

} // namespace troupe::backends
