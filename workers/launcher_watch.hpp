#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <sys/types.h>

#include "elastic/store_endpoint.hpp"

namespace troupe::workers {

/// Ends this process when troupe-run goes away, for ranks that are not its
/// direct children (those die by their parent-death signal). The process
/// then gets SIGTERM and, if still alive 1 s later, SIGKILL, as troupe-run's
/// own stop would do. How it tells depends on the store:
///
/// - troupe-run's embedded store: a connection to the store that
///   authenticates (the store drops a connection that does not) and then
///   carries no request, so the only thing it can ever read is the end of
///   the connection, which means troupe-run is gone.
/// - etcd: troupe-run keeps `<job>/launcher` alive under a lease
///   (elastic/launcher_beacon.hpp); the watch reads it every second and
///   takes its absence for troupe-run's end (so up to the lease, 5 s, after
///   troupe-run died or lost etcd).
/// - no store (ranks that mpirun started for `troupe-run --mpi` on
///   troupe-run's machine): troupe-run's process itself, through a pidfd.
///   mpirun passes on the SIGTERM its parent's death sends it, but not
///   always (docs/architecture.md), and not at all when it dies too.
class launcher_watch {
public:
  /// Connects with the job's `secret` (bounded by `timeout`) and starts
  /// watching on its own thread. Throws elastic::store_error naming the
  /// store when it cannot connect or authenticate.
  launcher_watch(const elastic::store_endpoint& store, const std::string& job,
                 const std::string& secret, std::chrono::milliseconds timeout);
  /// Watches process `launcher`, which started at `start`
  /// (identity::launcher_pid, launcher_start). Throws std::runtime_error
  /// when it cannot (no pidfd: Linux before 5.3), or when that pid no
  /// longer names the process that started then.
  launcher_watch(pid_t launcher, uint64_t start);
  /// Stops watching (shutdown(): troupe-run outliving us is no news).
  ~launcher_watch();

  launcher_watch(const launcher_watch&) = delete;
  launcher_watch& operator=(const launcher_watch&) = delete;

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace troupe::workers
