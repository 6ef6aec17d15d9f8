#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "elastic/store_endpoint.hpp"

namespace troupe::workers {

/// A knob had a value that does not parse; the message names the variable.
class config_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Every tunable of a worker, parsed once at init. Defaults follow Horovod
/// where Horovod has the knob.
struct config {
  /// A peer that sends nothing (not even a heartbeat) this long is lost.
  double heartbeat_timeout_seconds = 5.0;
  /// Upper bound of one Gloo operation; also bounds rendezvous inside Gloo.
  double gloo_timeout_seconds = 30.0;
  /// Deadline for bootstrap (store connection, endpoint exchange, Gloo
  /// mesh) and for each step of a process-set registration.
  double start_timeout_seconds = 30.0;
  /// Threads of the CAF scheduler (actors only; backends run on their own);
  /// unless given, at most the CPUs the process may run on.
  int scheduler_threads = 2;
  /// How long a thread waiting for a collective yields before it sleeps,
  /// in microseconds; -1 = decided from this host's CPUs and ranks (see
  /// workers/wait_spin.hpp).
  int wait_spin_us = -1;
  /// CPU cores, one per rank of this machine (by its index there): each
  /// rank pins its backend threads, which run the collectives, to its core
  /// (Horovod pins its background thread so). Empty = not pinned.
  std::vector<int> thread_affinity;
  /// trace, debug, info, warning, error, critical, off.
  std::string log_level = "warning";
  /// Log lines without their date and time.
  bool log_hide_time = false;
  /// CPU backend: "gloo", "mpi", or "" = gloo under troupe-run, mpi under
  /// mpirun.
  std::string cpu_operations;
  /// MPI_THREAD_SERIALIZED instead of MPI_THREAD_MULTIPLE (Horovod's
  /// HOROVOD_MPI_THREADS_DISABLE): only the global set's backend thread then
  /// calls MPI, so other process sets cannot run on MPI.
  bool mpi_threads_disable = false;
  /// Gloo: ranks of a process set on one host reduce allreduces through
  /// shared memory (backends/shm/).
  bool shared_memory = true;
  /// Request and response lists between a process set's coordinator and its
  /// members on the same host through shared memory (control/), not TCP.
  bool shm_control = true;
  /// Members of a set that all read the control channel agree on cached
  /// allreduces on its arrival board, without the coordinator.
  bool fast_lane = true;
  /// Children per node of a process set's control tree
  /// (control/control_tree.hpp); 0 = a star.
  int control_fanout = 16;
  /// Backend of CUDA tensors: "nccl", "gloo" / "mpi" (staged through host
  /// memory to the CPU backend), or "" = NCCL where built, else staged.
  std::string gpu_operations;
  /// NCCL: allreduces as a reduce-scatter among a host's ranks, an
  /// allreduce among the ranks of the same local index on each host, an
  /// allgather on the host; allgathers across hosts first, then on the host
  /// (docs/gpu.md says when it falls back to the flat collective).
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;
  /// troupe-run gives each rank NCCL_HOSTID=<job id>-<rank> (unless the user
  /// set NCCL_HOSTID), so that NCCL accepts several ranks on one GPU.
  bool nccl_host_id_per_rank = false;
  /// How troupe-run binds the ranks it starts to CPUs
  /// (elastic/launcher/cpu_binding.hpp): "auto", "cpu" or "none".
  std::string cpu_binding = "auto";
  /// Chrome-trace timeline, one file per rank ("t.json" -> "t.<rank>.json");
  /// empty = none; "DYNAMIC" = only between start_timeline / stop_timeline.
  std::string timeline;
  /// A CYCLE_START marker per response list (and agreed list) in a timeline
  /// written from the start.
  bool timeline_mark_cycles = false;
  /// Fusion buffer bytes per process set (Horovod: 128 MiB); 0 = no fusion.
  int64_t fusion_threshold = 128 << 20;
  /// Bytes an MPI exchange of Adasum sends and receives at a time.
  int64_t adasum_mpi_chunk_size = int64_t{1} << 30;
  /// Each grouped call fuses only within itself, and plain calls not at all
  /// (Horovod's HOROVOD_DISABLE_GROUP_FUSION).
  bool disable_group_fusion = false;
  /// Bytes of a fused allreduce reduced at a time on CPU (0 = the whole
  /// buffer at once): chunks that fit the cache keep the copies in and out
  /// and the reduction out of main memory. -1 = the backend's choice (MPI
  /// 1 MiB, Gloo 0).
  int64_t fusion_chunk_bytes = -1;
  /// Response cache entries per process set (Horovod's default); 0 = off.
  int cache_capacity = 1024;
  /// Minimum milliseconds between two response lists of a process set; 0 =
  /// event-driven (a ready tensor goes out as soon as the backend is free).
  double cycle_time_ms = 0;
  /// add_process_set / remove_process_set allowed after init.
  bool dynamic_process_sets = false;
  /// Stall inspector (Horovod's defaults): warn after this long, fail the
  /// stalled tensors after the shutdown time (0 = never).
  bool stall_check = true;
  double stall_check_seconds = 60;
  double stall_shutdown_seconds = 0;
  /// Prometheus /metrics: the launcher serves on this port, rank with local
  /// rank L on port + 1 + L; 0 = off.
  int metrics_port = 0;
  /// Address the /metrics endpoints bind to.
  std::string metrics_address = "127.0.0.1";
  /// Autotuning (docs/autotune.md): each process set's coordinator searches
  /// the fusion threshold, cycle time and response cache, those not set
  /// explicitly, and freezes the fastest.
  bool autotune = false;
  /// Horovod's CSV of every scored setting; empty = none.
  std::string autotune_log;
  int autotune_warmup_samples = 3;
  /// Response lists per sample.
  int autotune_steps_per_sample = 10;
  /// Settings tried by Bayesian optimisation.
  int autotune_bayes_opt_max_samples = 20;
  /// Observation noise of the Gaussian process (standardised scores).
  double autotune_gaussian_process_noise = 0.8;
  /// TROUPE_* names of the knobs given a value (variable or troupe-run
  /// flag): autotuning leaves them as they are.
  std::vector<std::string> explicit_knobs;

  bool is_explicit(const std::string& env) const;
  /// Network interface (e.g. eth0) whose IPv4 address the rank's listeners
  /// bind to and advertise; empty = loopback for a job on one host, else
  /// the address this host's name resolves to. Never every interface.
  std::string network_interface;
  /// The job's secret (at least 16 bytes); empty = troupe-run's, or one
  /// rank 0 draws and shares over MPI under a plain mpirun.
  std::string secret_key;
  /// PEM files replacing the certificates derived from the secret: this
  /// rank's certificate chain, its private key, the CAs peers must chain to.
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_cafile;
  /// Plain TCP between ranks' actor systems: anyone who can reach a rank's
  /// port can send it control messages. Unsafe; for comparisons only.
  bool insecure_control_plane = false;
  /// Elastic jobs: how long troupe-run waits for --min-np slots (and a
  /// resetting worker for its next membership plan).
  double elastic_timeout_seconds = 600;
  /// The job's rendezvous store in an etcd cluster (TROUPE_RENDEZVOUS,
  /// troupe-run --rendezvous); nothing = troupe-run's embedded store.
  std::optional<elastic::store_endpoint> rendezvous;
  /// Elastic jobs: the reset barrier's deadline; a worker that has not
  /// arrived this long after the barrier opened is failed and killed.
  double reset_timeout_seconds = 60;
};

/// TROUPE_TIMELINE's value for a timeline started and stopped at run time.
constexpr const char* dynamic_timeline = "DYNAMIC";

using env_lookup = std::function<std::optional<std::string>(const char*)>;

/// One row of the configuration table: how a knob is named everywhere.
struct knob {
  const char* env;    // TROUPE_* variable
  const char* alias;  // HOROVOD_* variable, or nullptr
  const char* flag;   // troupe-run flag, without leading dashes; nullptr = none
                      // (a secret does not belong on a command line)
  const char* help;
  std::function<void(config&, const std::string&)> parse;
  std::function<std::string(const config&)> print;
  /// A troupe-run flag that takes no value sets the knob to this (Horovod's
  /// `--autotune`); nullptr: the flag takes a value.
  const char* flag_value = nullptr;
};

/// The table, in a stable order.
const std::vector<knob>& knobs();

/// Reads the table from the environment (TROUPE_* wins over HOROVOD_*).
/// Throws config_error naming the variable and its bad value.
config config_from_env(const env_lookup& lookup);

/// The process environment as an env_lookup.
env_lookup process_env();

/// "name=value" pairs of every knob, for the start-up log line.
std::string describe(const config& cfg);

} // namespace troupe::workers
