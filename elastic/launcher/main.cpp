// troupe-run: starts the ranks of one job on this machine with a rendezvous
// store, forwards their output tagged by rank, and ends them together.

#include "elastic/launcher/cpu_binding.hpp"
#include "elastic/launcher/elastic_driver.hpp"
#include "elastic/launcher/host_plan.hpp"
#include "elastic/launcher/job_supervisor.hpp"
#include "elastic/launcher/mpirun.hpp"
#include "elastic/launcher/output_files.hpp"
#include "elastic/launcher/options.hpp"
#include "elastic/launcher/output_sink.hpp"
#include "elastic/launcher/signals.hpp"
#include "elastic/launcher/worker_env.hpp"
#include "elastic/launcher/worker_process.hpp"
#include "elastic/job_secret.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/embedded_store.hpp"
#include "elastic/launcher_beacon.hpp"
#include "elastic/store_endpoint.hpp"
#include "backends/registry.hpp"
#include "ipc/process_alive.hpp"
#include "ipc/shm_segment.hpp"
#include "metrics/elastic_metrics.hpp"
#include "metrics/endpoint.hpp"
#include "metrics/launcher_metrics.hpp"
#include "workers/listen_address.hpp"
#include "workers/config.hpp"
#include "workers/descriptor_limit.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

extern char** environ;

namespace launcher = troupe::elastic::launcher;

namespace {

constexpr int usage_error = 2;
constexpr int start_failure = 127; // the shell's "command not found"

std::string own_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return {};
  return name;
}

std::vector<launcher::host_spec>
read_hosts(const launcher::launch_options& opts) {
  if (!opts.hostfile.empty()) {
    std::ifstream in{opts.hostfile};
    if (!in)
      throw launcher::plan_error("cannot read hostfile " + opts.hostfile);
    return launcher::parse_hostfile(in, opts.hostfile);
  }
  if (!opts.hosts.empty())
    return launcher::parse_host_list(opts.hosts);
  return {{"localhost", opts.elastic.max_np.value_or(opts.np)}};
}

std::vector<launcher::rank_slot>
plan_static_job(const launcher::launch_options& opts) {
  auto ranks = launcher::plan_ranks(read_hosts(opts), opts.np);
  launcher::number_local_ranks_on_this_machine(ranks, own_hostname());
  return ranks;
}

std::string current_directory() {
  std::string dir(4096, '\0');
  if (::getcwd(dir.data(), dir.size()) == nullptr)
    throw std::runtime_error("cannot read the current directory: " +
                             std::string(std::strerror(errno)));
  dir.resize(std::strlen(dir.c_str()));
  return dir;
}

// The launcher reads the same knobs as its workers: flags first, then the
// environment.
troupe::workers::config launcher_config(const launcher::launch_options& opts) {
  auto env = troupe::workers::process_env();
  return troupe::workers::config_from_env(
    [&opts, env](const char* name) -> std::optional<std::string> {
      for (const auto& [knob, value] : opts.knobs)
        if (knob == name)
          return value;
      return env(name);
    });
}

std::string built_backends() {
  std::string out;
  for (const auto& b : troupe::backends::built_cpu_backends())
    out += (out.empty() ? "" : ",") + b;
  return out;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
    std::chrono::duration<double>(s));
}

// Where the embedded store listens: on --network-interface's address, the
// one workers on other hosts use to reach this machine; else on loopback.
std::string store_address(const troupe::workers::config& cfg) {
  return cfg.network_interface.empty() ? "127.0.0.1"
                                       : troupe::workers::interface_address(cfg.network_interface);
}

// The store serves every rank's connections for the job's life: its
// default bound on connections would refuse the ranks of a job past ~340.
// An elastic job without --max-np has no bound: at least its -np ranks,
// and as many as troupe-run can hold open.
troupe::elastic::store_limits store_limits_for(std::optional<int> max_ranks, int np) {
  troupe::elastic::store_limits limits;
  const int ranks = std::max(max_ranks.value_or(np), 0);
  troupe::workers::raise_descriptor_limit(ranks);
  size_t wanted =
    troupe::elastic::store_connections_per_rank * static_cast<size_t>(ranks) + 64;
  if (rlimit open{}; !max_ranks && getrlimit(RLIMIT_NOFILE, &open) == 0 &&
                     open.rlim_cur != RLIM_INFINITY && open.rlim_cur > 128)
    wanted = std::max(wanted, static_cast<size_t>(open.rlim_cur) - 64);
  limits.max_connections = std::max(limits.max_connections, wanted);
  return limits;
}

// The job's rendezvous store: served here (the default), or an etcd that
// --rendezvous names, where troupe-run keeps a key alive for the ranks'
// launcher watch.
struct rendezvous {
  troupe::elastic::store_endpoint endpoint;
  std::unique_ptr<troupe::elastic::store_server> server;
  std::unique_ptr<troupe::elastic::launcher_beacon> beacon;
};

constexpr std::chrono::seconds store_connect_timeout{10};

rendezvous open_rendezvous(const troupe::workers::config& cfg, const std::string& secret,
                           const std::string& job_id, std::optional<int> max_ranks, int np) {
  rendezvous r;
  if (cfg.rendezvous) {
    r.endpoint = *cfg.rendezvous;
    r.beacon = std::make_unique<troupe::elastic::launcher_beacon>(
      troupe::elastic::connect_store(r.endpoint, secret, store_connect_timeout), job_id);
    return r;
  }
  r.endpoint.host = store_address(cfg);
  r.server = std::make_unique<troupe::elastic::store_server>(r.endpoint.host, 0, secret,
                                                             store_limits_for(max_ranks, np));
  r.endpoint.port = r.server->port();
  return r;
}

// Elastic mode: the driver plans every membership epoch (elastic_driver.hpp).
int run_elastic(const launcher::launch_options& opts, const troupe::workers::config& cfg,
                launcher::job_supervisor& supervisor, troupe::metrics::launcher_metrics& counts,
                launcher::line_forwarder::sink out, launcher::line_forwarder::sink err,
                std::vector<std::string> parent, const std::string& secret, int secret_fd) {
  const auto& el = opts.elastic;
  const auto job_id = launcher::random_job_id();
  const auto store =
    open_rendezvous(cfg, secret, job_id,
                    el.max_np ? std::optional<int>(std::max(opts.np, *el.max_np)) : std::nullopt,
                    opts.np);
  const auto client = troupe::elastic::connect_store(store.endpoint, secret, store_connect_timeout);
  launcher::elastic_driver::settings s;
  s.np = opts.np;
  s.min_np = el.min_np.value_or(opts.np);
  s.max_np = el.max_np.value_or(std::numeric_limits<int>::max());
  s.reset_limit = el.reset_limit;
  s.elastic_timeout = seconds(cfg.elastic_timeout_seconds);
  s.reset_timeout = seconds(cfg.reset_timeout_seconds);
  s.store_outage_limit = seconds(cfg.start_timeout_seconds);
  if (el.discovery_script.empty())
    s.fixed_hosts = read_hosts(opts);
  s.spawn_command = el.spawn_command;
  s.ssh = opts.ssh;
  s.cwd = current_directory();
  s.secret = secret;
  s.command = opts.command;
  s.output_dir = opts.output_dir;
  s.prefix_timestamp = opts.prefix_timestamp;
  s.job.store = store.endpoint;
  s.job.job_id = job_id;
  s.job.knobs = opts.knobs;
  s.job.secret_fd = secret_fd;
  s.job.nccl_host_id_per_rank = launcher::gives_nccl_host_ids(cfg.nccl_host_id_per_rank, parent);
  s.own_hostname = own_hostname();
  std::unique_ptr<launcher::discovery_poller> poller;
  if (!el.discovery_script.empty())
    poller = std::make_unique<launcher::discovery_poller>(launcher::discovery_poller::options{
      el.discovery_script, el.slots_per_host, parent,
      std::chrono::duration_cast<std::chrono::milliseconds>(
        seconds(el.discovery_timeout_seconds)),
      std::chrono::milliseconds(1000)});
  s.parent_env = std::move(parent);
  std::optional<launcher::cooldown_range> cooldown;
  if (el.cooldown)
    cooldown = launcher::cooldown_range{el.cooldown->first, el.cooldown->second};
  launcher::elastic_driver driver{std::move(s), std::move(poller), cooldown, supervisor,
                                  *client, err, std::move(out), err};
  troupe::metrics::elastic_metrics elastic_counts{*counts.registry()};
  launcher::elastic_driver::observer seen;
  seen.spawned = [&counts] { counts.workers_started(); };
  seen.published = [&elastic_counts](int64_t epoch, int members) {
    elastic_counts.epoch(epoch, members);
  };
  seen.barrier_opened = [&elastic_counts](const std::string& reason) {
    elastic_counts.reset(reason);
  };
  seen.barrier_closed = [&elastic_counts](std::chrono::steady_clock::duration d) {
    elastic_counts.barrier_seconds(std::chrono::duration<double>(d).count());
  };
  seen.hosts = [&elastic_counts](const launcher::host_registry::counts& c) {
    elastic_counts.hosts(c.active, c.blacklisted, c.cooling_down);
  };
  driver.observe(std::move(seen));
  supervisor.observe_exits([&counts](bool failed) { counts.workers_exited(failed); });
  supervisor.set_policy(driver.policy());
  return supervisor.run();
}

std::vector<std::string> parent_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    env.emplace_back(*e);
  return env;
}

// The CPU troupe-run places `slot`'s rank on (see machine_rank_cpus), or -1.
int rank_cpu(const launcher::rank_placement& placement, const launcher::rank_slot& slot,
             const std::string& self) {
  if (placement.cpus.empty() || !launcher::is_local_host(slot.host, self))
    return -1;
  return placement.cpus.at(static_cast<size_t>(slot.machine_local_rank));
}

// --verbose: what troupe-run is about to start.
std::string launch_summary(const launcher::launch_options& opts,
                           const std::vector<launcher::rank_slot>& ranks,
                           const std::vector<std::string>& mpirun,
                           const launcher::rank_placement& placement) {
  const auto words = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& w : v)
      out += (out.empty() ? "" : " ") + w;
    return out;
  };
  std::string out;
  for (const auto& [env, value] : opts.knobs)
    out += "troupe-run: " + env + "=" + value + "\n";
  if (opts.use_mpirun)
    return out + "troupe-run: " + words(mpirun) + "\n";
  if (opts.is_elastic())
    return out + "troupe-run: elastic job of " + std::to_string(opts.np) +
           " ranks to start with: " + words(opts.command) + "\n";
  const auto self = own_hostname();
  const std::string where =
    placement.whole_process ? ", bound to CPU " : ", runtime threads on CPU ";
  for (const auto& slot : ranks) {
    const int cpu = rank_cpu(placement, slot, self);
    out += "troupe-run: rank " + std::to_string(slot.rank) + " on " + slot.host +
           " (local rank " + std::to_string(slot.local_rank) + " of " +
           std::to_string(slot.local_size) +
           (cpu >= 0 ? where + std::to_string(cpu) : std::string()) +
           "): " + words(opts.command) + "\n";
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  auto parsed = launcher::parse_options(argc, argv);
  if (!parsed.options)
    return parsed.exit_code;
  const auto& opts = *parsed.options;
  std::vector<launcher::rank_slot> ranks;
  launcher::rank_placement placement;  // by machine_local_rank
  std::vector<std::string> mpirun;  // with --mpi
  troupe::workers::config cfg;
  auto parent = parent_environment();
  try {
    cfg = launcher_config(opts);
    // Threads the user places (--thread-affinity) need the process's CPUs:
    // auto leaves the ranks unbound then.
    if (cfg.cpu_binding == "auto" && !cfg.thread_affinity.empty())
      cfg.cpu_binding = "none";
    // mpirun places the ranks itself, on whichever hosts it is given; an
    // elastic job's driver, on whichever hosts are usable (its ranks are
    // not bound: their number on a host changes).
    if (!opts.use_mpirun && !opts.is_elastic()) {
      ranks = plan_static_job(opts);
      placement = launcher::machine_rank_cpus(cfg.cpu_binding, ranks, own_hostname(),
                                              !cfg.shared_memory);
    }
    if (opts.use_mpirun)  // throws when --cpu-binding cannot hold
      mpirun = launcher::mpirun_command(opts, ::geteuid() == 0, cfg.cpu_binding, parent);
  } catch (const std::exception& e) {  // plan_error, config_error, invalid_argument
    std::cerr << "troupe-run: error: " << e.what() << "\n";
    return usage_error;
  }
  if (opts.verbose)
    std::cerr << launch_summary(opts, ranks, mpirun, placement);
  // Written by threads of their own: a reader that stops reading never
  // stops the supervision below. Declared first, so they go last.
  launcher::output_sink out_sink{STDOUT_FILENO};
  launcher::output_sink err_sink{STDERR_FILENO};
  auto to_stdout = [&out_sink](std::string_view s) { out_sink.write(s); };
  auto to_stderr = [&err_sink](std::string_view s) { err_sink.write(s); };
  try {
    // Signals first: the store's and civetweb's threads must inherit the
    // blocked mask.
    troupe::elastic::net::unique_fd signal_fd{launcher::open_signal_fd()};
    launcher::job_supervisor::limits limits;
    if (opts.timeout_seconds)
      limits.timeout = std::chrono::milliseconds(
        static_cast<long long>(*opts.timeout_seconds * 1000));
    launcher::job_supervisor supervisor{signal_fd.get(), limits, to_stderr};
    troupe::metrics::launcher_metrics counts{opts.np, built_backends()};
    std::unique_ptr<troupe::metrics::endpoint> metrics_server;
    if (cfg.metrics_port != 0)
      metrics_server = std::make_unique<troupe::metrics::endpoint>(
        cfg.metrics_address, static_cast<uint16_t>(cfg.metrics_port), counts.registry());
    if (cfg.nccl_host_id_per_rank && !launcher::gives_nccl_host_ids(true, parent))
      to_stderr("troupe-run: NCCL_HOSTID is set, so every rank keeps it "
                "(--nccl-host-id-per-rank gives none)\n");
    // The job's secret authenticates every store request and is the root of
    // the control plane's certificates; the ranks inherit it in a sealed
    // in-memory file, so it is in no command line, environment or disk.
    const auto secret =
      cfg.secret_key.empty() ? troupe::elastic::random_secret() : cfg.secret_key;
    troupe::elastic::net::unique_fd secret_fd{troupe::elastic::secret_descriptor(secret)};
    if (opts.is_elastic())
      return run_elastic(opts, cfg, supervisor, counts, to_stdout, to_stderr, std::move(parent),
                         secret, secret_fd.get());
    if (opts.use_mpirun) {
      // mpirun stands for every rank: its one outcome counts for all.
      supervisor.observe_exits(
        [&counts, np = opts.np](bool failed) { counts.workers_exited(failed, np); });
      // troupe-run stays mpirun's parent to serve its endpoint and to remove
      // the segment names a killed rank left here: it never learns the
      // ranks' pids, so it takes those that appeared meanwhile and whose
      // creator is gone.
      const auto segments_before = troupe::ipc::segment_entries();
      // Ranks on this machine watch troupe-run's process (launcher_watch):
      // mpirun does not always end them when troupe-run dies.
      auto vars = opts.knobs;
      const auto ns = troupe::ipc::pid_namespace();
      const auto started = troupe::ipc::process_start_time(::getpid());
      if (!ns.empty() && started) {
        vars.emplace_back("TROUPE_LAUNCHER_PID", std::to_string(::getpid()));
        vars.emplace_back("TROUPE_LAUNCHER_START", std::to_string(*started));
        vars.emplace_back("TROUPE_LAUNCHER_NS", ns);
      }
      try {
        supervisor.add(launcher::spawn_worker(launcher::mpirun_rank, mpirun,
                                              launcher::merge_environment(parent, vars),
                                              to_stdout, to_stderr));
      } catch (const launcher::spawn_error& e) {
        to_stderr(std::string("troupe-run: ") + e.what() + " (install openmpi-bin)\n");
        return start_failure;
      }
      counts.workers_started(opts.np);
      const int rc = supervisor.run();
      for (const auto& left : troupe::ipc::remove_orphaned_segments(segments_before))
        to_stderr("troupe-run: removed shared-memory segment " + left.name +
                  " that a rank (pid " + std::to_string(left.creator) + ") left behind\n");
      return rc;
    }
    launcher::job_env job;
    job.size = opts.np;
    job.job_id = launcher::random_job_id();
    const auto store = open_rendezvous(cfg, secret, job.job_id, opts.np, opts.np);
    job.store = store.endpoint;
    job.knobs = opts.knobs;
    job.secret_fd = secret_fd.get();
    job.nccl_host_id_per_rank = launcher::gives_nccl_host_ids(cfg.nccl_host_id_per_rank, parent);
    supervisor.observe_exits([&counts](bool failed) { counts.workers_exited(failed); });
    const auto self = own_hostname();
    const auto cwd = current_directory();
    // Every rank's sinks before any rank starts: a file that cannot be
    // written stops the job before it began.
    std::vector<std::pair<launcher::line_forwarder::sink, launcher::line_forwarder::sink>> sinks;
    const launcher::output_files files{opts.output_dir, opts.np, opts.prefix_timestamp};
    for (const auto& slot : ranks)
      sinks.emplace_back(files.tee(slot.rank, "stdout", to_stdout),
                         files.tee(slot.rank, "stderr", to_stderr));
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto& slot = ranks[i];
      auto vars = launcher::rank_variables(slot, job);
      const int cpu = rank_cpu(placement, slot, self);
      if (cpu >= 0)
        vars.emplace_back(placement.whole_process ? "TROUPE_CPU" : "TROUPE_RUNTIME_CPU",
                          std::to_string(cpu));
      auto env = launcher::merge_environment(parent, vars);
      try {
        const auto& [out, err] = sinks[i];
        // Another host: over ssh, which gets troupe-run's environment; the
        // worker's goes on its command line, the secret through its stdin.
        const bool here = launcher::is_local_host(slot.host, self);
        auto worker =
          here ? launcher::spawn_worker(slot.rank, opts.command, env, out, err, {},
                                        placement.whole_process ? cpu : -1)
               : launcher::spawn_worker(
                   slot.rank, launcher::ssh_command(slot.host, opts.ssh, cwd, env, opts.command),
                   parent, out, err, secret);
        worker.on_this_host = here;
        supervisor.add(std::move(worker));
        counts.workers_started();
      } catch (const launcher::spawn_error& e) {
        to_stderr(std::string("troupe-run: ") + e.what() + "\n");
        supervisor.abort(start_failure);
        break;
      }
    }
    return supervisor.run();
  } catch (const std::exception& e) {
    to_stderr(std::string("troupe-run: error: ") + e.what() + "\n");
    return 1;
  }
}
