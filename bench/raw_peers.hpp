#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace troupe::bench {

/// The library Troupe runs on, called directly: the baseline each Troupe
/// number is compared with.
class raw_peer {
public:
  virtual ~raw_peer() = default;
  /// In-place float32 sum across all ranks; blocks until done.
  virtual void allreduce(float* data, size_t count) = 0;
};

/// "mpi": MPI_Allreduce(MPI_IN_PLACE) on a duplicate of MPI_COMM_WORLD (the
/// job must run under mpirun). "gloo": gloo::allreduce on its own context,
/// rendezvoused through troupe-run's store under a separate prefix.
std::unique_ptr<raw_peer> make_raw_peer(const std::string& backend);

} // namespace troupe::bench
