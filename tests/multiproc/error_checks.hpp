#pragma once

namespace troupe::test {

/// Provokes every user error (cross-rank mismatches and submission errors),
/// checks the exact message on every rank, then proves the runtime still
/// runs a correct collective. Returns the process exit code.
int run_error_checks(int rank, int size);

/// Uneven work: every rank but the last joins at once; the last one's
/// allreduce sees zeros from them, its allgather fails with Horovod's join
/// error; then it joins too, join() returns its rank everywhere, and a
/// normal allreduce works again. Returns the process exit code.
int run_join_checks(int rank, int size);

/// Every rank but the last submits a tensor the last never does; with the
/// stall times set small, it must fail on them with a timeout naming the
/// missing rank, and a correct allreduce must work afterwards.
int run_stall_checks(int rank, int size);

/// One rank's output allocator fails its allgather: nothing after it
/// mixes up collectives.
int run_failed_allocator_check(int rank, int size);

/// After troupe::shutdown(): every call fails cleanly. Returns an exit code.
int check_after_shutdown(int rank);

} // namespace troupe::test
