#pragma once

#include <string>
#include <vector>

#include "backends/rank_layout.hpp"

namespace troupe::backends {

/// Whether this process was started by Open MPI's mpirun.
bool launched_by_mpirun();

/// Initialises MPI once per process (MPI_THREAD_MULTIPLE); MPI cannot be
/// initialised twice, so it is finalised at process exit, not at shutdown,
/// and init() after shutdown() keeps working. Throws backend_error.
void ensure_mpi_initialized();

/// Identity from MPI_COMM_WORLD; local = same shared-memory node.
rank_layout mpi_world_identity();

/// Throws backend_error with MPI's text for a failed call.
void check_mpi(int rc, const char* what);

/// Every rank's `mine`, in rank order (MPI_Allgatherv over COMM_WORLD).
std::vector<std::string> mpi_allgather_strings(const std::string& mine);

} // namespace troupe::backends
