#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <memory>
#include <optional>
#include <vector>

#include "actors/backend_actors.hpp"
#include "backends/backend.hpp"

namespace troupe::metrics {
class collective_metrics;
}

namespace troupe::backends {

/// How a backend actor runs.
struct backend_actor_options {
  /// The core its thread pins itself to on (connect)
  /// (TROUPE_THREAD_AFFINITY; a core it cannot have is logged, not fatal).
  std::optional<int> core;
  /// The rank is bound to its CPU (rank_bound()): a finished work's answer
  /// goes to the negotiator before its handles complete.
  bool rank_bound = false;
  /// Without a core: the CPUs (the process's, where the runtime pins the
  /// threads CAF starts to one) its thread connects on, so that the
  /// threads a transport starts (Gloo's TCP) run there, and runs a work of
  /// more than `wide_work_bytes` on: Gloo's TCP ring was 2x slower on the
  /// runtime's CPU. Between works and for smaller ones the thread stays
  /// on the runtime's CPU, where the negotiator wakes it without waking
  /// another CPU.
  std::vector<int> cpus;
};

/// See backend_actor_options::cpus: 2 ranks, `--shm 0`, 4 B allreduce
/// 78-128 -> 51-55 us with the thread on the runtime's CPU, 1 MiB 0.96 ms
/// on the process's CPUs, 1.95 ms on the runtime's.
constexpr uint64_t wide_work_bytes = uint64_t{64} << 10;

/// The largest work backend_ref::run_here runs on its caller's thread: a
/// work this small is all latency (its rounds wait for the last member),
/// and the thread hand-offs to the actor and back were a third of it (2
/// ranks, a cached 4-byte allreduce under MPI, medians: 23.7-24.2 -> 17.7
/// us; docs/benchmarks.md run (39)).
/// Larger ones go to the actor, and the negotiator goes on meanwhile.
constexpr uint64_t run_here_bytes = 1024;

/// Spawns the detached actor (its own thread, so a blocking library may
/// block it) that owns `b` and starts its works in mailbox order.
/// Protocol: actors::backend_actor. (execute, work) is answered with
/// (executed, work id, status, list_stats of this work) once the work's
/// completion has finished: at once for a blocking library, else when a
/// poll with back-off sees it finished, while the actor goes on starting
/// works; a success also completes the work's handles (unless a timeline
/// traces it). After (abort, status) queued works answer with that status
/// without running. The returned interrupt calls `b->abort()` on a
/// detached thread of the actor system (the system waits for it at its
/// end), while `b` lives. The returned run_here runs CPU works of at most
/// run_here_bytes once (connect) succeeded and until an abort or a backend
/// error. `metrics` (required) counts what ran, on either thread.
actors::backend_ref spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                                        std::shared_ptr<metrics::collective_metrics> metrics,
                                        backend_actor_options options = {});

} // namespace troupe::backends
