#pragma once

#include <memory>
#include <vector>

#include "bench/contender.hpp"

namespace troupe::bench {

/// The libraries Troupe runs on, called directly, that this job can reach:
/// raw-mpi (MPI_Allreduce in place on a duplicate of MPI_COMM_WORLD) when
/// started by mpirun, and always raw-gloo (gloo::allreduce on its own
/// context). Troupe must already be initialized: under mpirun it has
/// initialized MPI, which raw-gloo then uses to agree on a rendezvous
/// directory; under troupe-run raw-gloo rendezvous through the job's store.
std::vector<std::unique_ptr<contender>> make_raw_peers(int rank, int size);

} // namespace troupe::bench
