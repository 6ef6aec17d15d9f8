#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

#include "backends/rank_layout.hpp"
#include "elastic/store_endpoint.hpp"
#include "workers/config.hpp"

namespace troupe::workers {

/// Who this process is in the job, as the launcher (troupe-run) said in the
/// environment. Without a launcher: a job of one rank.
struct identity : backends::rank_layout {
  std::string hostname = "127.0.0.1";  // this rank's host, as the launcher named it
  // IPv4 address this rank's listeners bind to and peers connect to (see
  // listen_address.hpp); set at init.
  std::string listen_host = "127.0.0.1";
  /// Index among the ranks on this machine (TROUPE_MACHINE_LOCAL_RANK, else
  /// the local rank); differs from local_rank when several of troupe-run's
  /// hosts are this machine. Picks the rank's metrics port.
  int machine_local_rank = 0;
  /// The job's rendezvous store: troupe-run's (TROUPE_STORE_ADDR /
  /// TROUPE_STORE_PORT) or the etcd of TROUPE_RENDEZVOUS.
  elastic::store_endpoint store;
  std::string job_id = "local";
  /// Started by troupe-run's elastic driver (TROUPE_ELASTIC=1): membership
  /// comes from the driver's plans in the store, not from the rank variables.
  bool elastic = false;
  /// The driver's id for this process (TROUPE_WORKER_ID), elastic jobs only.
  int64_t worker_id = -1;
  /// troupe-run bound this process to a CPU of its own among the ranks of
  /// its host (TROUPE_CPU, the CPU's number; see --cpu-binding), and it
  /// still runs on that CPU alone.
  bool own_core = false;
  /// The process is not bound, but the runtime's scheduler and
  /// control-channel threads run on this CPU (TROUPE_RUNTIME_CPU, set by
  /// troupe-run's --cpu-binding runtime, or auto in Gloo mode; taken while
  /// the process may run there), -1 if not.
  int runtime_cpu = -1;
  /// The CPUs the thread that read the identity (init's caller) may run
  /// on: where a backend's thread runs beside a runtime_cpu.
  std::vector<int> process_cpus;
  /// troupe-run's process when it started this rank through mpirun on this
  /// machine (TROUPE_LAUNCHER_PID, and its ipc::process_start_time in
  /// TROUPE_LAUNCHER_START; taken only where TROUPE_LAUNCHER_NS is this
  /// process's ipc::pid_namespace()), -1 if not: a rank without a store
  /// watches that process instead (launcher_watch).
  pid_t launcher_pid = -1;
  uint64_t launcher_start = 0;

  /// The runtime's own threads share one CPU (own_core or runtime_cpu).
  bool runtime_on_one_cpu() const {
    return own_core || runtime_cpu >= 0;
  }

  bool has_store() const {
    return store.known();
  }
};

/// Reads TROUPE_RANK / TROUPE_SIZE / ... (HOROVOD_* as aliases); the store
/// is `cfg.rendezvous` when set. Throws config_error naming the variable
/// when a value is malformed or when a multi-rank job has no rendezvous
/// store address.
identity identity_from_env(const env_lookup& lookup, const config& cfg);

} // namespace troupe::workers
