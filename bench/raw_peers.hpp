#pragma once

#include <memory>

#include "bench/contender.hpp"

namespace troupe::bench {

/// The library this job's Troupe runs on, called directly: raw-mpi
/// (MPI_Allreduce in place on a duplicate of MPI_COMM_WORLD) when started by
/// mpirun (troupe-run --mpi; Troupe has initialized MPI), otherwise raw-gloo
/// (gloo::allreduce on its own context, rendezvoused through troupe-run's
/// store). Raw Gloo is left out of mpirun jobs on purpose: there it shares
/// the process with an MPI runtime and mpirun's one-core binding, and its
/// small allreduces came out 10-20x slower than under troupe-run.
std::unique_ptr<contender> make_raw_peer(int rank, int size);

} // namespace troupe::bench
