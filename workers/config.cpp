#include "workers/config.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "elastic/job_secret.hpp"

namespace troupe::workers {

namespace {

double parse_positive(const char* env, const std::string& text) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && v > 0)
      return v;
  } catch (const std::exception&) {
    // reported below
  }
  throw config_error(std::string(env) + "='" + text +
                     "' is not a positive number");
}

double parse_non_negative(const char* env, const std::string& text) {
  return text == "0" ? 0.0 : parse_positive(env, text);
}

int parse_count(const char* env, const std::string& text) {
  double v = parse_positive(env, text);
  if (v != static_cast<int>(v))
    throw config_error(std::string(env) + "='" + text +
                       "' is not a whole number");
  return static_cast<int>(v);
}

// "0" or "1".
bool parse_switch(const char* env, const std::string& text) {
  if (text != "0" && text != "1")
    throw config_error(std::string(env) + "='" + text + "' is not 0 or 1");
  return text == "1";
}

// "3,0,1": whole numbers from 0, comma-separated.
std::vector<int> parse_cores(const char* env, const std::string& text) {
  std::vector<int> cores;
  size_t at = 0;
  while (!text.empty()) {
    const auto end = std::min(text.find(',', at), text.size());
    const auto item = text.substr(at, end - at);
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits)
      throw config_error(std::string(env) + "='" + text + "': '" + item +
                         "' is not a core number (a comma-separated list, one core per "
                         "local rank)");
    cores.push_back(std::stoi(item));
    if (end == text.size())
      break;
    at = end + 1;
  }
  return cores;
}

std::string lowercase(const std::string& s) {
  std::string out;
  for (char ch : s)
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// `s` in lower case when it is one of `choices`, else config_error naming
// `name` and them ("... is not gloo or mpi").
std::string parse_choice(const char* name, const std::string& s,
                         const std::vector<std::string>& choices) {
  const auto lower = lowercase(s);
  if (std::find(choices.begin(), choices.end(), lower) != choices.end())
    return lower;
  std::string listed;
  for (size_t i = 0; i < choices.size(); ++i)
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  throw config_error(std::string(name) + "='" + s + "' is not " + listed);
}

std::string print_double(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

} // namespace

const std::vector<knob>& knobs() {
  static const std::vector<knob> table{
    {"TROUPE_HEARTBEAT_TIMEOUT_SECONDS", nullptr, "heartbeat-timeout-seconds",
     "seconds of silence after which a peer counts as lost",
     [](config& c, const std::string& s) {
       c.heartbeat_timeout_seconds =
         parse_positive("TROUPE_HEARTBEAT_TIMEOUT_SECONDS", s);
     },
     [](const config& c) { return print_double(c.heartbeat_timeout_seconds); }},
    {"TROUPE_GLOO_TIMEOUT_SECONDS", "HOROVOD_GLOO_TIMEOUT_SECONDS",
     "gloo-timeout-seconds", "upper bound of one Gloo operation",
     [](config& c, const std::string& s) {
       c.gloo_timeout_seconds = parse_positive("TROUPE_GLOO_TIMEOUT_SECONDS", s);
     },
     [](const config& c) { return print_double(c.gloo_timeout_seconds); }},
    {"TROUPE_START_TIMEOUT", "HOROVOD_START_TIMEOUT", "start-timeout",
     "seconds allowed for bootstrap (store, endpoints, backend mesh), a reset, and each "
     "step of a process-set registration",
     [](config& c, const std::string& s) {
       c.start_timeout_seconds = parse_positive("TROUPE_START_TIMEOUT", s);
     },
     [](const config& c) { return print_double(c.start_timeout_seconds); }},
    {"TROUPE_SCHEDULER_THREADS", nullptr, "scheduler-threads",
     "threads of the actor scheduler in each worker (default 2, at most the CPUs the worker "
     "may run on)",
     [](config& c, const std::string& s) {
       c.scheduler_threads = parse_count("TROUPE_SCHEDULER_THREADS", s);
     },
     [](const config& c) { return std::to_string(c.scheduler_threads); }},
    {"TROUPE_WAIT_SPIN_US", nullptr, "wait-spin-us",
     "microseconds a thread waiting for a collective yields before it sleeps; auto = 100 "
     "where this host has two CPUs per rank, else 0",
     [](config& c, const std::string& s) {
       c.wait_spin_us = s == "auto" ? -1 : s == "0" ? 0 : parse_count("TROUPE_WAIT_SPIN_US", s);
     },
     [](const config& c) {
       return c.wait_spin_us < 0 ? std::string("auto") : std::to_string(c.wait_spin_us);
     }},
    {"TROUPE_THREAD_AFFINITY", "HOROVOD_THREAD_AFFINITY", "thread-affinity",
     "comma-separated CPU cores, one per rank of a machine: each rank pins the threads that "
     "run its collectives (its backends) to its core",
     [](config& c, const std::string& s) {
       c.thread_affinity = parse_cores("TROUPE_THREAD_AFFINITY", s);
     },
     [](const config& c) {
       std::string out;
       for (auto core : c.thread_affinity)
         out += (out.empty() ? "" : ",") + std::to_string(core);
       return out.empty() ? std::string("off") : out;
     }},
    {"TROUPE_LOG_LEVEL", "HOROVOD_LOG_LEVEL", "log-level",
     "trace, debug, info, warning, error, critical or off",
     [](config& c, const std::string& s) {
       static const char* levels[] = {"trace", "debug",    "info", "warning",
                                      "error", "critical", "off"};
       const auto lower = lowercase(s);
       for (const char* level : levels)
         if (lower == level) {
           c.log_level = lower;
           return;
         }
       throw config_error("TROUPE_LOG_LEVEL='" + s + "' is not a log level");
     },
     [](const config& c) { return c.log_level; }},
    {"TROUPE_LOG_HIDE_TIME", "HOROVOD_LOG_HIDE_TIME", "log-without-timestamp",
     "1 leaves the date and time out of log lines",
     [](config& c, const std::string& s) {
       c.log_hide_time = parse_switch("TROUPE_LOG_HIDE_TIME", s);
     },
     [](const config& c) { return std::string(c.log_hide_time ? "1" : "0"); }, "1"},
    {"TROUPE_CPU_OPERATIONS", "HOROVOD_CPU_OPERATIONS", "cpu-operations",
     "CPU backend: gloo or mpi (default: gloo under troupe-run, mpi under mpirun)",
     [](config& c, const std::string& s) {
       c.cpu_operations = parse_choice("TROUPE_CPU_OPERATIONS", s, {"gloo", "mpi"});
     },
     [](const config& c) { return c.cpu_operations.empty() ? "auto" : c.cpu_operations; }},
    {"TROUPE_MPI_THREADS_DISABLE", "HOROVOD_MPI_THREADS_DISABLE", "mpi-threads-disable",
     "1 asks MPI for MPI_THREAD_SERIALIZED instead of MPI_THREAD_MULTIPLE (for an MPI "
     "without it); only the global process set may then run on MPI",
     [](config& c, const std::string& s) {
       c.mpi_threads_disable = parse_switch("TROUPE_MPI_THREADS_DISABLE", s);
     },
     [](const config& c) { return std::string(c.mpi_threads_disable ? "1" : "0"); }, "1"},
    {"TROUPE_SHM", nullptr, "shm",
     "1 reduces allreduces of a process set's ranks on one host through shared memory (Gloo "
     "and MPI), 0 through the backend as the rest",
     [](config& c, const std::string& s) { c.shared_memory = parse_switch("TROUPE_SHM", s); },
     [](const config& c) { return std::string(c.shared_memory ? "1" : "0"); }},
    {"TROUPE_SHM_CONTROL", nullptr, "shm-control",
     "1 sends request and response lists between a process set's coordinator and its members "
     "on the same host through shared memory, 0 over the control plane's TCP connections",
     [](config& c, const std::string& s) {
       c.shm_control = parse_switch("TROUPE_SHM_CONTROL", s);
     },
     [](const config& c) { return std::string(c.shm_control ? "1" : "0"); }},
    {"TROUPE_FAST_LANE", nullptr, "fast-lane",
     "1 lets the members of a process set that all read its control channel (one host, up to "
     "32 ranks) agree on cached allreduces among themselves, without a round trip to the "
     "coordinator; 0 sends every request to the coordinator",
     [](config& c, const std::string& s) { c.fast_lane = parse_switch("TROUPE_FAST_LANE", s); },
     [](const config& c) { return std::string(c.fast_lane ? "1" : "0"); }},
    {"TROUPE_CONTROL_FANOUT", nullptr, "control-fanout",
     "children per node of a process set's control tree: a member sends its lists to its tree "
     "parent, which sends its subtree's cache hits up as one; 0 = every member talks to the "
     "coordinator (sets of up to fanout + 1 ranks are that star anyway)",
     [](config& c, const std::string& s) {
       c.control_fanout = s == "0" ? 0 : parse_count("TROUPE_CONTROL_FANOUT", s);
     },
     [](const config& c) { return std::to_string(c.control_fanout); }},
    {"TROUPE_GPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS", "gpu-operations",
     "backend of CUDA tensors: nccl, or gloo / mpi (staged through host memory; the CPU "
     "backend's own library) (default: nccl where built, else the CPU backend)",
     [](config& c, const std::string& s) {
       c.gpu_operations = parse_choice("TROUPE_GPU_OPERATIONS", s, {"nccl", "gloo", "mpi"});
     },
     [](const config& c) { return c.gpu_operations.empty() ? "auto" : c.gpu_operations; }},
    {"TROUPE_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE", "hierarchical-allreduce",
     "1 = NCCL allreduces go reduce-scatter on each host, allreduce across hosts, allgather "
     "on each host (needs two or more hosts with equal rank counts, else flat)",
     [](config& c, const std::string& s) {
       c.hierarchical_allreduce = parse_switch("TROUPE_HIERARCHICAL_ALLREDUCE", s);
     },
     [](const config& c) { return std::string(c.hierarchical_allreduce ? "1" : "0"); }, "1"},
    {"TROUPE_HIERARCHICAL_ALLGATHER", "HOROVOD_HIERARCHICAL_ALLGATHER", "hierarchical-allgather",
     "1 = NCCL allgathers go across hosts, then on each host (needs two or more hosts with "
     "equal rank counts and one tensor of equal rows on every rank, else flat)",
     [](config& c, const std::string& s) {
       c.hierarchical_allgather = parse_switch("TROUPE_HIERARCHICAL_ALLGATHER", s);
     },
     [](const config& c) { return std::string(c.hierarchical_allgather ? "1" : "0"); }, "1"},
    {"TROUPE_NUM_NCCL_STREAMS", "HOROVOD_NUM_NCCL_STREAMS", "num-nccl-streams",
     "CUDA streams per device for NCCL: 1, the only count Troupe runs (as Horovod's default)",
     [](config&, const std::string& s) {
       if (s != "1")
         throw config_error("TROUPE_NUM_NCCL_STREAMS='" + s + "': Troupe's NCCL backend "
                            "runs one stream per device, so only 1 is taken");
     },
     [](const config&) { return std::string("1"); }},
    {"TROUPE_NCCL_HOSTID_PER_RANK", nullptr, "nccl-host-id-per-rank",
     "1 = troupe-run gives each rank NCCL_HOSTID=<job id>-<rank> (an NCCL_HOSTID already set "
     "is kept), so NCCL runs several ranks on one GPU, as in tests",
     [](config& c, const std::string& s) {
       c.nccl_host_id_per_rank = parse_switch("TROUPE_NCCL_HOSTID_PER_RANK", s);
     },
     [](const config& c) { return std::string(c.nccl_host_id_per_rank ? "1" : "0"); }, "1"},
    {"TROUPE_CPU_BINDING", nullptr, "cpu-binding",
     "how troupe-run binds ranks to CPUs: cpu = each rank of a host to a CPU of its own; "
     "runtime (Gloo mode) = a CPU of its own for each rank's scheduler and control-channel "
     "threads, the process and its backend's thread unbound (Gloo's TCP transport is slower "
     "bound); auto = where a one-host job has exactly one rank per CPU, cpu (runtime in Gloo "
     "mode with --shm 0), else none; none = never (Horovod's way); mpirun arguments that "
     "bind (--binding-args, --mpi-args) win",
     [](config& c, const std::string& s) {
       c.cpu_binding =
         parse_choice("TROUPE_CPU_BINDING", s, {"auto", "cpu", "runtime", "none"});
     },
     [](const config& c) { return c.cpu_binding; }},
    {"TROUPE_TIMELINE", "HOROVOD_TIMELINE", "timeline-filename",
     "write a Chrome trace per rank (path gets the rank before .json)",
     [](config& c, const std::string& s) { c.timeline = s; },
     [](const config& c) { return c.timeline.empty() ? std::string("off") : c.timeline; }},
    {"TROUPE_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", "timeline-mark-cycles",
     "1 marks each negotiation cycle (CYCLE_START) in a timeline written from the start",
     [](config& c, const std::string& s) {
       c.timeline_mark_cycles = parse_switch("TROUPE_TIMELINE_MARK_CYCLES", s);
     },
     [](const config& c) { return std::string(c.timeline_mark_cycles ? "1" : "0"); }, "1"},
    {"TROUPE_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", "fusion-threshold",
     "bytes of small allreduces fused into one collective (0 disables fusion)",
     [](config& c, const std::string& s) {
       c.fusion_threshold =
         s == "0" ? 0 : static_cast<int64_t>(parse_positive("TROUPE_FUSION_THRESHOLD", s));
     },
     [](const config& c) { return std::to_string(c.fusion_threshold); }},
    {"TROUPE_ADASUM_MPI_CHUNK_SIZE", "HOROVOD_ADASUM_MPI_CHUNK_SIZE", "adasum-mpi-chunk-size",
     "bytes an MPI exchange of Adasum sends and receives at a time, each way, in one "
     "MPI_Sendrecv (default 1 GiB, as Horovod's; at most 2^31-1, an MPI count is an int)",
     [](config& c, const std::string& s) {
       c.adasum_mpi_chunk_size = parse_count("TROUPE_ADASUM_MPI_CHUNK_SIZE", s);
     },
     [](const config& c) { return std::to_string(c.adasum_mpi_chunk_size); }},
    {"TROUPE_DISABLE_GROUP_FUSION", "HOROVOD_DISABLE_GROUP_FUSION", "disable-group-fusion",
     "1 fuses the tensors of each grouped call only among themselves, never with other "
     "calls' (and two plain calls never together)",
     [](config& c, const std::string& s) {
       c.disable_group_fusion = parse_switch("TROUPE_DISABLE_GROUP_FUSION", s);
     },
     [](const config& c) { return std::string(c.disable_group_fusion ? "1" : "0"); }, "1"},
    {"TROUPE_FUSION_CHUNK_BYTES", nullptr, "fusion-chunk-bytes",
     "bytes of a CPU allreduce, fused or not, reduced at a time (0 = all at once; default: "
     "what the communicator asks for, 1 MiB under MPI and Gloo, n x 128 KiB in a Gloo set of "
     "n > 8 without a host segment)",
     [](config& c, const std::string& s) {
       c.fusion_chunk_bytes =
         s == "0" ? 0 : static_cast<int64_t>(parse_positive("TROUPE_FUSION_CHUNK_BYTES", s));
     },
     [](const config& c) {
       return c.fusion_chunk_bytes < 0 ? std::string("auto") : std::to_string(c.fusion_chunk_bytes);
     }},
    {"TROUPE_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", "cache-capacity",
     "response cache entries per process set (0 disables the cache)",
     [](config& c, const std::string& s) {
       c.cache_capacity = s == "0" ? 0 : parse_count("TROUPE_CACHE_CAPACITY", s);
     },
     [](const config& c) { return std::to_string(c.cache_capacity); }},
    {"TROUPE_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "cycle-time-ms",
     "minimum milliseconds between negotiation cycles (0 = event-driven)",
     [](config& c, const std::string& s) {
       c.cycle_time_ms = parse_non_negative("TROUPE_CYCLE_TIME", s);
     },
     [](const config& c) { return print_double(c.cycle_time_ms); }},
    {"TROUPE_DYNAMIC_PROCESS_SETS", "HOROVOD_DYNAMIC_PROCESS_SETS", "dynamic-process-sets",
     "1 allows adding and removing process sets after init",
     [](config& c, const std::string& s) {
       c.dynamic_process_sets = parse_switch("TROUPE_DYNAMIC_PROCESS_SETS", s);
     },
     [](const config& c) { return std::string(c.dynamic_process_sets ? "1" : "0"); }},
    {"TROUPE_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE", "stall-check-disable",
     "1 turns the stall inspector off",
     [](config& c, const std::string& s) {
       c.stall_check = !parse_switch("TROUPE_STALL_CHECK_DISABLE", s);
     },
     [](const config& c) { return std::string(c.stall_check ? "0" : "1"); }},
    {"TROUPE_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS",
     "stall-check-time-seconds", "warn about tensors some ranks have not submitted after this",
     [](config& c, const std::string& s) {
       c.stall_check_seconds = parse_positive("TROUPE_STALL_CHECK_TIME_SECONDS", s);
     },
     [](const config& c) { return print_double(c.stall_check_seconds); }},
    {"TROUPE_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     "stall-shutdown-time-seconds", "fail stalled tensors after this (0 = never)",
     [](config& c, const std::string& s) {
       c.stall_shutdown_seconds = parse_non_negative("TROUPE_STALL_SHUTDOWN_TIME_SECONDS", s);
     },
     [](const config& c) { return print_double(c.stall_shutdown_seconds); }},
    {"TROUPE_METRICS_PORT", nullptr, "metrics-port",
     "serve Prometheus /metrics: launcher on PORT, each rank on PORT + 1 + local rank "
     "(0 = off)",
     [](config& c, const std::string& s) {
       const int port = s == "0" ? 0 : parse_count("TROUPE_METRICS_PORT", s);
       if (port > 65535)
         throw config_error("TROUPE_METRICS_PORT='" + s + "' is not a TCP port");
       c.metrics_port = port;
     },
     [](const config& c) { return c.metrics_port ? std::to_string(c.metrics_port) : "off"; }},
    {"TROUPE_METRICS_ADDRESS", nullptr, "metrics-address",
     "address the /metrics endpoints listen on (default 127.0.0.1; 0.0.0.0 = every interface)",
     [](config& c, const std::string& s) { c.metrics_address = s; },
     [](const config& c) { return c.metrics_address; }},
    {"TROUPE_AUTOTUNE", "HOROVOD_AUTOTUNE", "autotune",
     "1 tunes each process set's fusion threshold, cycle time and response cache while "
     "the job runs (those not set explicitly)",
     [](config& c, const std::string& s) { c.autotune = parse_switch("TROUPE_AUTOTUNE", s); },
     [](const config& c) { return std::string(c.autotune ? "1" : "0"); }, "1"},
    {"TROUPE_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", "autotune-log-file",
     "CSV of every setting the autotuner scored (the coordinator's rank writes it; sets "
     "other than the global one get .set<id> before the extension)",
     [](config& c, const std::string& s) { c.autotune_log = s; },
     [](const config& c) { return c.autotune_log.empty() ? std::string("off") : c.autotune_log; }},
    {"TROUPE_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
     "autotune-warmup-samples", "samples discarded before autotuning starts",
     [](config& c, const std::string& s) {
       c.autotune_warmup_samples =
         s == "0" ? 0 : parse_count("TROUPE_AUTOTUNE_WARMUP_SAMPLES", s);
     },
     [](const config& c) { return std::to_string(c.autotune_warmup_samples); }},
    {"TROUPE_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
     "autotune-steps-per-sample", "training steps per autotune sample",
     [](config& c, const std::string& s) {
       c.autotune_steps_per_sample = parse_count("TROUPE_AUTOTUNE_STEPS_PER_SAMPLE", s);
     },
     [](const config& c) { return std::to_string(c.autotune_steps_per_sample); }},
    {"TROUPE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
     "autotune-bayes-opt-max-samples",
     "fusion threshold / cycle time settings tried by Bayesian optimisation",
     [](config& c, const std::string& s) {
       c.autotune_bayes_opt_max_samples =
         parse_count("TROUPE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", s);
     },
     [](const config& c) { return std::to_string(c.autotune_bayes_opt_max_samples); }},
    {"TROUPE_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
     "autotune-gaussian-process-noise",
     "observation noise of the autotuner's Gaussian process (relative to the scores' "
     "variance)",
     [](config& c, const std::string& s) {
       c.autotune_gaussian_process_noise =
         parse_non_negative("TROUPE_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", s);
     },
     [](const config& c) { return print_double(c.autotune_gaussian_process_noise); }},
    {"TROUPE_NETWORK_INTERFACE", "HOROVOD_GLOO_IFACE", "network-interface",
     "interface whose IPv4 address ranks listen on and advertise (default: loopback for a "
     "job on one host, else the address of the host's name); also --network-interfaces",
     [](config& c, const std::string& s) { c.network_interface = s; },
     [](const config& c) { return c.network_interface.empty() ? "auto" : c.network_interface; }},
    {"TROUPE_SECRET_KEY", "HOROVOD_SECRET_KEY", nullptr,
     "the job's secret: authenticates store requests and derives the control plane's TLS "
     "certificates (default: a random one per job)",
     [](config& c, const std::string& s) {
       if (s.size() < elastic::min_secret_size)
         throw config_error("TROUPE_SECRET_KEY is " + std::to_string(s.size()) +
                            " bytes long; a secret needs at least " +
                            std::to_string(elastic::min_secret_size));
       c.secret_key = s;
     },
     [](const config& c) { return std::string(c.secret_key.empty() ? "unset" : "set"); }},
    {"TROUPE_TLS_CERTIFICATE", nullptr, "tls-certificate",
     "PEM certificate chain of this rank (with --tls-key and --tls-cafile; default: derived "
     "from the job's secret)",
     [](config& c, const std::string& s) { c.tls_certificate = s; },
     [](const config& c) { return c.tls_certificate.empty() ? "derived" : c.tls_certificate; }},
    {"TROUPE_TLS_KEY", nullptr, "tls-key", "PEM private key of --tls-certificate",
     [](config& c, const std::string& s) { c.tls_key = s; },
     [](const config& c) { return c.tls_key.empty() ? "derived" : c.tls_key; }},
    {"TROUPE_TLS_CAFILE", nullptr, "tls-cafile",
     "PEM certificates of the CAs a peer's certificate must chain to",
     [](config& c, const std::string& s) { c.tls_cafile = s; },
     [](const config& c) { return c.tls_cafile.empty() ? "derived" : c.tls_cafile; }},
    {"TROUPE_INSECURE_CONTROL_PLANE", nullptr, "insecure-control-plane",
     "1 = plain TCP between ranks: anyone who reaches a rank's port can stop the job (unsafe)",
     [](config& c, const std::string& s) {
       c.insecure_control_plane = parse_switch("TROUPE_INSECURE_CONTROL_PLANE", s);
     },
     [](const config& c) { return std::string(c.insecure_control_plane ? "1" : "0"); }},
    {"TROUPE_ELASTIC_TIMEOUT", "HOROVOD_ELASTIC_TIMEOUT", "elastic-timeout",
     "elastic jobs: seconds to wait for --min-np slots before giving up",
     [](config& c, const std::string& s) {
       c.elastic_timeout_seconds = parse_positive("TROUPE_ELASTIC_TIMEOUT", s);
     },
     [](const config& c) { return print_double(c.elastic_timeout_seconds); }},
    {"TROUPE_RENDEZVOUS", nullptr, "rendezvous",
     "etcd://HOST:PORT[/PREFIX]: keep the job's rendezvous in that etcd (v3 HTTP gateway) "
     "instead of troupe-run's embedded store; PREFIX (default troupe/) starts every key",
     [](config& c, const std::string& s) {
       try {
         c.rendezvous = elastic::parse_rendezvous(s);
       } catch (const std::invalid_argument& e) {
         throw config_error(std::string("TROUPE_RENDEZVOUS: ") + e.what());
       }
     },
     [](const config& c) {
       return c.rendezvous ? c.rendezvous->describe() : std::string("embedded");
     }},
    {"TROUPE_RESET_TIMEOUT", nullptr, "reset-timeout",
     "elastic jobs: seconds a reset waits for every member before failing the missing ones",
     [](config& c, const std::string& s) {
       c.reset_timeout_seconds = parse_positive("TROUPE_RESET_TIMEOUT", s);
     },
     [](const config& c) { return print_double(c.reset_timeout_seconds); }},
  };
  return table;
}

config config_from_env(const env_lookup& lookup) {
  config cfg;
  for (const auto& k : knobs()) {
    auto value = lookup(k.env);
    if (!value && k.alias)
      value = lookup(k.alias);
    if (value && !value->empty()) {
      k.parse(cfg, *value);
      cfg.explicit_knobs.emplace_back(k.env);
    }
  }
  const int tls_files = !cfg.tls_certificate.empty() + !cfg.tls_key.empty() +
                        !cfg.tls_cafile.empty();
  if (tls_files != 0 && tls_files != 3)
    throw config_error("TROUPE_TLS_CERTIFICATE, TROUPE_TLS_KEY and TROUPE_TLS_CAFILE go "
                       "together: set all three or none");
  return cfg;
}

bool config::is_explicit(const std::string& env) const {
  return std::find(explicit_knobs.begin(), explicit_knobs.end(), env) != explicit_knobs.end();
}

env_lookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name))
      return std::string(v);
    return std::nullopt;
  };
}

std::string describe(const config& cfg) {
  std::string out;
  for (const auto& k : knobs()) {
    if (!out.empty())
      out += ' ';
    out += k.env;
    out += '=';
    out += k.print(cfg);
  }
  return out;
}

} // namespace troupe::workers
