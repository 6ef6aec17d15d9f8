#pragma once

namespace troupe::test {

/// Process sets on 4 ranks, started with static sets [0, 2] (id 1) and
/// [1, 3] (id 2) and TROUPE_DYNAMIC_PROCESS_SETS=1: the even/odd example,
/// overlapping sets used at once, every error case, removal failing pending
/// work, and 100 add/remove rounds leaking no threads or sockets.
/// Returns the process exit code.
int run_process_set_checks(int rank, int size);

/// The last rank calls add_process_set([0, 1]) `lateness` seconds after the
/// others (TROUPE_DYNAMIC_PROCESS_SETS=1). Meanwhile a second thread on
/// every waiting rank calls rank(), size() and is_initialized() in a loop;
/// each must answer in under 10 ms. Within TROUPE_START_TIMEOUT the call
/// succeeds everywhere; past it, it fails on every rank (the late one
/// too) naming the late rank. Either way a checked allreduce and one more
/// add/remove round work afterwards. Returns the process exit code.
int run_late_set_check(int rank, int size, double lateness);

/// On 3 ranks under MPI with TROUPE_MPI_THREADS_DISABLE=1: the global set
/// runs, a second process set is refused on every rank naming the knob, and
/// the global set runs on. Returns the process exit code.
int run_serialized_mpi_check(int rank);

} // namespace troupe::test
