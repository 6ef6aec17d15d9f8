#pragma once

namespace troupe::test {

/// `rounds` in-place resets of the whole job (TROUPE_DYNAMIC_PROCESS_SETS=1):
/// after each, every rank is in the same, next epoch, a checked allreduce
/// passes, and a process set is added, used and removed. Threads, file
/// descriptors and sockets are flat over the rounds. Returns the exit code.
int run_reset_checks(int rank, int size, int rounds);

/// `victim` dies (SIGKILL) during a 256 MiB allreduce: the others' handles
/// fail with a retryable status, the callers free their buffers the moment
/// the handles complete, they reset() as a world one smaller, and a checked
/// allreduce passes there. Returns the exit code.
int run_reset_after_loss(int rank, int size, int victim);

} // namespace troupe::test
