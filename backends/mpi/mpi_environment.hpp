#pragma once

#include <string>
#include <vector>

namespace troupe::backends {

/// Whether this process was started by Open MPI's mpirun.
bool launched_by_mpirun();

/// Initialises MPI once per process (MPI_THREAD_MULTIPLE); MPI cannot be
/// initialised twice, so it is finalised at process exit, not at shutdown,
/// and init() after shutdown() keeps working. Throws backend_error.
void ensure_mpi_initialized();

/// Identity from MPI_COMM_WORLD; local = same shared-memory node.
struct mpi_identity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};
mpi_identity mpi_world_identity();

/// Every rank's `mine`, in rank order (MPI_Allgatherv over COMM_WORLD).
std::vector<std::string> mpi_allgather_strings(const std::string& mine);

} // namespace troupe::backends
