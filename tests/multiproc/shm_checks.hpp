#pragma once

#include <string>

namespace troupe::test {

/// Allreduces one at a time (so nothing is fused) of sizes around Gloo's
/// shm path thresholds: one element, either side of 16 KiB (where a round
/// switches to the reduce-scatter among a host's ranks) and of 256 KiB (one
/// round), 2.5 rounds, and past the CPU backend's 1 MiB chunk (a chunk and
/// a few elements, 2.5 chunks); for integer, float16, bfloat16, float32 and
/// float64 data, sum, min and product of small integers, so each result is
/// exact in its dtype and compared for equality. Returns the exit code.
int run_shm_size_checks(int rank, int size);

/// Creates a control-channel and a data segment by the runtime's naming
/// rule, prints "rank R: ORPHAN NAME" for each and dies by SIGKILL before
/// unlinking them, as a rank killed before its peers opened its segments.
[[noreturn]] void run_shm_orphans(int rank);

/// The shared-memory segment of kind `kind` this process maps ("data-":
/// the Gloo shm path, "ctl-": a control channel), "NAME BYTES"
/// ("/troupe-<kind>..."; names are unlinked once every rank of the host
/// mapped them), or "" when none.
std::string mapped_shm_segment(const std::string& kind);

/// Every rank reduces 16 MiB allreduces one after another until one fails;
/// `victim` SIGKILLs itself 5 ms after its first submission past 300 ms into
/// the loop (first writing the time to `stamp_file`), so it dies holding
/// the segment, inside a shared-memory allreduce. With `fds_held` it first forks a child that
/// keeps its sockets open for 3 s, so that no peer sees a connection close
/// and only the segment's check of its members' pids finds the loss at
/// once. Each survivor reports how long after the kill its pending
/// allreduce failed, and with what error ("FAILED-AFTER"), then shuts
/// down. Every rank prints its pid and segment first. Returns 3 on a
/// survivor that saw its allreduce fail, 1 otherwise.
int run_shm_kill(int rank, int size, int victim, const std::string& stamp_file,
                 bool fds_held);

} // namespace troupe::test
