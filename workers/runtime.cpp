#include "workers/runtime_impl.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>

#include <unistd.h>

#include <caf/thread_hook.hpp>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/timeline.hpp"
#include "backends/thread_affinity.hpp"
#include "elastic/elastic_plan.hpp"
#include "elastic/store_endpoint.hpp"
#include "workers/descriptor_limit.hpp"
#include "workers/directory.hpp"
#include "workers/elastic_join.hpp"
#include "workers/listen_address.hpp"
#include "workers/slow_stop_alarm.hpp"

namespace troupe::workers {

using namespace troupe::actors;
using namespace runtime_steps;

namespace {

// Runs every thread CAF starts on the rank's runtime CPU (identity::
// runtime_cpu): its scheduler's, whose negotiator and coordinator then stop
// chasing the caller across CPUs (2 ranks on 2 CPUs, Gloo mode, a 4-byte
// allreduce: 79-145 -> 46 us; docs/benchmarks.md run (22)), and the
// threads they start (the control channel's reader). A backend's thread
// returns to the process's CPUs when it connects (backend_actor_options).
class runtime_cpu_hook : public caf::thread_hook {
public:
  explicit runtime_cpu_hook(int cpu) : cpu_(cpu) {
  }
  void init(caf::actor_system&) override {
  }
  void thread_started() override {
    if (auto why = backends::pin_current_thread(cpu_); !why.empty())
      spdlog::warn("TROUPE_RUNTIME_CPU: a runtime thread runs unpinned: {}", why);
  }
  void thread_terminates() override {
  }

private:
  int cpu_;
};

caf::actor_system_config make_caf_config(const identity& id, const config& cfg,
                                         const control_plane& plane) {
  caf::actor_system_config c;
  plane.configure(c);
  if (id.runtime_cpu >= 0)
    c.add_thread_hook<runtime_cpu_hook>(id.runtime_cpu);
  // No more threads than CPUs the runtime may use unless asked: on a rank
  // bound to one CPU a second one only takes turns with the threads a
  // collective needs (2 bound ranks, a 4-byte allreduce: 40.8 -> 34.2 us
  // with one; docs/benchmarks.md run (18)).
  const int cpus = id.runtime_cpu >= 0 ? 1 : backends::usable_cpus();
  const bool one_cpu = cpus < 2;
  const int threads = cfg.is_explicit("TROUPE_SCHEDULER_THREADS")
                        ? cfg.scheduler_threads
                        : std::min(cfg.scheduler_threads, cpus);
  c.set("scheduler.max-threads", static_cast<size_t>(threads));
  // CAF's default idle loop sleeps 50 us between polls, adding ~100 us to
  // every hop from a foreign thread or the network (see caf-0.17 notes).
  c.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
  // Where MPI yields its core while it waits (the user's
  // OMPI_MCA_mpi_yield_when_idle=1, or mpirun oversubscribing), the
  // scheduler's threads must not take it by polling on: after their 100
  // fast polls they sleep until woken (docs/benchmarks.md run (14)). Nor
  // on a process bound to one CPU: whatever a polling thread waits for
  // needs that CPU (2 bound ranks, a 4-byte allreduce: 34 -> 22 us without
  // the polls; docs/benchmarks.md run (18)).
  if (backends::mpi_yielding() || one_cpu)
    c.set("work-stealing.moderate-poll-attempts", size_t{0});
  // An idle worker wakes every relaxed-sleep-duration (10 ms) to steal from
  // the others; a lone worker has none, and an enqueue wakes it anyway.
  // Those 100 wake-ups a second were a third of an idle bound rank's CPU
  // (docs/benchmarks.md run (26)).
  if (threads == 1)
    c.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  // Heartbeats make a frozen peer (SIGSTOP, hung host) look like a lost one.
  const auto timeout = std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(cfg.heartbeat_timeout_seconds));
  c.set("middleman.heartbeat-interval", caf::timespan{timeout / 5});
  c.set("middleman.connection-timeout", timeout);
  // Handles that cross ranks: a peer's supervisor at bootstrap (found in
  // its directory), a set's coordinator and members once per process set
  // (see supervisor.cpp).
  c.add_message_type<coordinator_actor>("troupe.coordinator_actor");
  c.add_message_type<member_actor>("troupe.member_actor");
  c.add_message_type<std::vector<int32_t>>("troupe.int32_vector");  // a control-tree node's children
  c.add_message_type<peer_actor>("troupe.peer_actor");
  c.add_message_type<supervisor_actor>("troupe.supervisor_actor");
  return c;
}

spdlog::level::level_enum log_level(const std::string& name) {
  return name == "warning" ? spdlog::level::warn : spdlog::level::from_str(name);
}

// Identity handed down by mpirun instead of troupe-run.
void adopt(identity& id, const backends::external_launch& launch) {
  static_cast<backends::rank_layout&>(id) = launch.layout;
  id.machine_local_rank = id.local_rank;  // MPI's local ranks are per machine
  char host[256] = {};
  if (id.hostname == "127.0.0.1" && id.cross_size > 1 && gethostname(host, sizeof host) == 0)
    id.hostname = host;
}

// "trace.json" -> "trace.<n>.json": every process writes its own view.
std::string timeline_path(const std::string& path, int64_t n) {
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + "." + std::to_string(n) + ext;
  return path + "." + std::to_string(n);
}

// Under mpirun, `why` in the endpoint allgather in place of this rank's
// endpoint: the peers waiting there (MPI's collectives have no deadline)
// fail naming it instead of waiting for ever.
void tell_start_failed(const backends::external_launch& launch, const status& why) {
  try {
    launch.allgather(start_failed_mark + why.message());
  } catch (const std::exception& e) {
    spdlog::error("troupe rank {}: could not tell the other ranks that it failed to start: {}",
                  launch.layout.rank, e.what());
  }
}

// Under a plain mpirun, a rank whose configuration does not parse takes
// part in what comes before the endpoint allgather as its peers do (MPI's
// own start, the secret), then tells them why it failed.
void fail_mpi_start(const env_lookup& env, const status& why) {
  if (env("TROUPE_STORE_ADDR"))  // troupe-run's store: every wait has a deadline
    return;
  std::optional<backends::external_launch> launch;
  try {
    launch = backends::detect_external_launch(false);
    if (!launch || launch->layout.size < 2)
      return;
    identity id;
    adopt(id, *launch);
    // The peers' job_secret(): the key they were given (its text, as this
    // rank cannot tell it parsed there), else rank 0's draw.
    config peers;
    peers.secret_key =
      env("TROUPE_SECRET_KEY").value_or(env("HOROVOD_SECRET_KEY").value_or(""));
    job_secret(env, peers, id, launch);
  } catch (const std::exception& e) {
    spdlog::error("troupe: could not take part in MPI's start to say that this rank failed: {}",
                  e.what());
    return;
  }
  tell_start_failed(*launch, why);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ",") + n;
  return out;
}

} // namespace

runtime::impl::impl(identity i, config c, control_plane p)
  : base(std::move(i)), cfg(std::move(c)), plane(std::move(p)),
    metrics(std::make_shared<metrics::rank_metrics>(
      metrics::rank_position{base.rank, base.size, base.local_rank},
      joined(backends::built_cpu_backends()))),
    caf_cfg(make_caf_config(base, cfg, plane)), system(caf_cfg),
    connections(plane.start(system)) {
}

epoch_run runtime::impl::current() const {
  std::lock_guard<std::mutex> guard{run_mtx};
  return run;
}

std::string runtime::impl::own_timeline_path(const std::string& path) const {
  return timeline_path(path, base.elastic ? base.worker_id : base.rank);
}

void runtime::impl::start_timeline_writer() {
  if (!cfg.timeline.empty())
    timeline = spawn_timeline(system, cfg.timeline == dynamic_timeline
                                        ? std::string()
                                        : own_timeline_path(cfg.timeline));
}

void runtime::impl::mark(const std::string& name) {
  if (timeline)
    caf::anon_send(timeline, timeline_atom::value, name, timeline_now_us());
}

host_update runtime::impl::announced(int64_t epoch) const {
  if (!base.elastic || !store)
    return host_update::none;
  std::optional<std::string> text;
  try {
    text = store->get(elastic::notice_key(base.job_id));
    read_host_states();
  } catch (const elastic::store_error& e) {
    // The launcher is gone: the job is ending, which the next collective reports.
    spdlog::warn("troupe: cannot read host updates: {}", e.what());
  }
  const auto notice = text ? elastic::decode_notice(*text) : std::nullopt;
  if (!notice || notice->epoch != epoch)
    return host_update::none;
  return static_cast<host_update>(notice->change);
}

void runtime::impl::read_host_states() const {
  const auto text = store->get(elastic::host_states_key(base.job_id));
  if (const auto states = text ? elastic::decode_host_states(*text) : std::nullopt)
    host_states->set(states->active, states->blacklisted, states->cooling_down);
}

status runtime::impl::serve_metrics() {
  if (cfg.metrics_port == 0)
    return {};
  const int port = cfg.metrics_port + 1 + base.machine_local_rank;
  if (port > 65535)
    return {status_code::invalid_argument,
            "metrics port " + std::to_string(port) +
              " (TROUPE_METRICS_PORT + 1 + local rank on this machine) is out of range"};
  try {
    metrics_server = std::make_unique<metrics::endpoint>(
      cfg.metrics_address, static_cast<uint16_t>(port), metrics->registry());
  } catch (const metrics::endpoint_error& e) {
    return {status_code::invalid_argument,
            std::string(e.what()) + " (TROUPE_METRICS_PORT + 1 + local rank on this machine)"};
  }
  return {};
}

status runtime::impl::publish_directory() {
  directory = spawn_directory(system);
  auto port = plane.publish(connections, directory, base.listen_host);
  if (!port)
    return {status_code::internal,
            "cannot publish this rank's endpoint: " + system.render(port.error())};
  directory_port = *port;
  spdlog::info("troupe rank {}: control plane ({}) listening on {}:{}", base.rank,
               plane.encrypted() ? "TLS" : "plain TCP", base.listen_host, directory_port);
  return {};
}

void runtime::impl::unavailable(status why) {
  auto none = std::make_shared<process_set_snapshot>(0, 0);
  none->unavailable = std::move(why);
  sets->store(std::move(none));
}

status runtime::impl::unavailable_now() const {
  auto now = sets->load();
  return now ? now->unavailable : status{};
}

void runtime::impl::stop() {
  stop_requested = true;
  std::lock_guard<std::mutex> serial{change_mtx};
  if (stopped)
    return;
  stopped = true;
  leave_epoch(std::nullopt);
  if (directory) {
    if (directory_port != 0)
      system.middleman().unpublish(directory, directory_port);
    caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
  }
  if (timeline)
    caf::anon_send_exit(timeline, caf::exit_reason::user_shutdown);
  plane.stop(system, connections);
}

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}

runtime::~runtime() {
  impl_->stop();
  slow_stop_alarm alarm{std::chrono::seconds(10), [](auto elapsed) {
    spdlog::error("troupe (pid {0}): the runtime has been stopping for {1} s: its actor system "
                  "still waits for an actor that was never stopped, or for a thread that "
                  "called into Troupe and holds a reference to it. This is a bug in Troupe; "
                  "please report it with every thread's stack (gdb -p {0} -batch -ex 'thread "
                  "apply all bt')",
                  ::getpid(), std::chrono::duration_cast<std::chrono::seconds>(elapsed).count());
  }};
  impl_.reset();
}

void runtime::stop() {
  caller_thread_scope caller;
  impl_->stop();
}

std::unique_ptr<runtime> runtime::start(status& result, int generation) {
  caller_thread_scope caller;
  identity id;
  config cfg;
  std::string launcher_job;  // troupe-run's job id, before a restart's suffix
  const auto env = process_env();
  try {
    cfg = config_from_env(env);
    id = identity_from_env(env, cfg);
    launcher_job = id.job_id;
    // Every key in the store (endpoints, Gloo rendezvous) is under job_id.
    // An elastic job's plans are troupe-run's, under the id it gave.
    if (generation > 0 && !id.elastic)
      id.job_id += "/restart" + std::to_string(generation);
  } catch (const config_error& e) {
    result = {status_code::invalid_argument, e.what()};
    fail_mpi_start(env, result);
    return nullptr;
  }
  // Diagnostics go to stderr, never into the program's stdout.
  auto logger = std::make_shared<spdlog::logger>(
    "troupe", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(log_level(cfg.log_level));
  if (cfg.log_hide_time)
    logger->set_pattern("[%n] [%l] %v");
  spdlog::set_default_logger(std::move(logger));
  spdlog::info("troupe rank {}/{} starting: {}", id.rank, id.size, describe(cfg));
  raise_descriptor_limit(id.size);
  const auto deadline = start_deadline(cfg);
  std::optional<backends::external_launch> launch;
  try {
    if (!id.has_store() && (launch = backends::detect_external_launch(cfg.mpi_threads_disable))) {
      adopt(id, *launch);
      spdlog::info("troupe rank {}: MPI {} its core while it waits for a peer (Open MPI's "
                   "mpi_yield_when_idle)",
                   id.rank, backends::mpi_yielding() ? "yields" : "keeps");
    }
  } catch (const std::exception& e) {
    result = {status_code::backend, std::string("MPI bootstrap failed: ") + e.what()};
    return nullptr;
  }
  std::string secret;
  std::optional<control_plane> plane;
  try {
    // First: under mpirun every rank takes part in sharing the secret.
    secret = job_secret(env, cfg, id, launch);
  } catch (const std::exception& e) {  // unreadable descriptor, keys that differ (mpirun)
    result = {status_code::invalid_argument, e.what()};
    return nullptr;
  }
  // From here on, under mpirun, the peers wait for this rank in the
  // endpoint allgather (connect_peers): a rank that fails before it still
  // takes part, saying why.
  const auto fail_start = [&](status why) {
    if (launch && !id.has_store() && id.size > 1)
      tell_start_failed(*launch, why);
    result = std::move(why);
    return nullptr;
  };
  try {
    id.listen_host = listen_address(id, cfg);
    if (id.cross_size > 1 && id.listen_host.rfind("127.", 0) == 0)
      spdlog::warn("troupe rank {}: listening on {} (host name '{}'), which ranks on other "
                   "hosts cannot reach; set TROUPE_NETWORK_INTERFACE",
                   id.rank, id.listen_host, id.hostname);
    if (secret.empty())
      throw config_error("the rendezvous store needs the job's secret: start the job with "
                         "troupe-run or set TROUPE_SECRET_KEY");
    plane.emplace(cfg, secret);
  } catch (const std::exception& e) {  // config_error, tls_error
    return fail_start({status_code::invalid_argument, e.what()});
  }
  if (!plane->encrypted())
    spdlog::warn("troupe rank {}: TROUPE_INSECURE_CONTROL_PLANE=1: anyone who can reach {} "
                 "can send this rank control messages",
                 id.rank, id.listen_host);
  auto p = std::make_unique<impl>(id, cfg, std::move(*plane));
  std::unique_ptr<runtime> rt{new runtime(std::move(p))};
  auto& m = *rt->impl_;
  m.launch = launch;  // (a copy: fail_start still needs it)
  if (id.elastic)
    m.host_states = std::make_unique<metrics::host_state_metrics>(*m.metrics->registry());
  m.start_timeline_writer();
  if (auto served = m.serve_metrics(); !served.ok())
    return fail_start(std::move(served));
  try {
    if (id.has_store())
      for (auto* client : {&m.store, &m.rendezvous_store})
        *client = elastic::connect_store(
          id.store, secret,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
    if (id.has_store())
      m.watch = std::make_unique<launcher_watch>(
        id.store, launcher_job, secret,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
  } catch (const std::exception& e) {
    result = {status_code::peer_lost, std::string("bootstrap failed: ") + e.what()};
    return nullptr;
  }
  if (!id.has_store() && id.launcher_pid > 0) {
    try {
      m.watch = std::make_unique<launcher_watch>(id.launcher_pid, id.launcher_start);
    } catch (const std::exception& e) {
      spdlog::warn("troupe rank {}: not watching troupe-run: {}", id.rank, e.what());
    }
  }
  if (auto published = m.publish_directory(); !published.ok())
    return fail_start(std::move(published));
  try {
    result = id.elastic ? m.enter_planned(0) : m.bootstrap(0, id, deadline);
  } catch (const std::exception& e) {
    result = {status_code::peer_lost, std::string("bootstrap failed: ") + e.what()};
  }
  if (!result.ok())
    return nullptr;  // the destructor stops what was started
  return rt;
}

std::shared_ptr<const identity> runtime::id() const {
  return impl_->current().id;
}

int64_t runtime::epoch() const {
  return impl_->current().epoch;
}

status runtime::reset() {
  caller_thread_scope caller;
  return impl_->reset();
}

host_update runtime::hosts_updated() const {
  return impl_->announced(epoch());
}

bool runtime::epoch_has_newcomers() const {
  return impl_->newcomers.load();
}

const config& runtime::cfg() const {
  return impl_->cfg;
}

void runtime::submit(actors::entry_batch batch, const set_lookup& where) {
  if (batch.empty())
    return;  // an empty group: nothing to agree on, nothing to wait for
  const auto id = static_cast<int32_t>(batch.front()->process_set_id);
  const auto* entrance = where.snapshot ? where.snapshot->entrance(id) : nullptr;
  if (!entrance) {
    // A member whose part of the set did not start.
    for (auto& e : batch)
      e->handle->complete({status_code::invalid_argument,
                           "Process set does not exist or has not been registered."});
    return;
  }
  submit_batch(*entrance, std::move(batch));
}

runtime::set_lookup runtime::lookup(int32_t id, int global_root) const {
  set_lookup out;
  auto sets = impl_->sets->load();
  if (!sets)
    return out;
  out.unavailable = sets->unavailable;
  if (!out.unavailable.ok())
    return out;
  out.snapshot = sets;
  const auto* ranks = sets->table.ranks(id);
  if (!ranks)
    return out;
  auto index_of = [ranks](int r) {
    auto it = std::lower_bound(ranks->begin(), ranks->end(), r);
    return it == ranks->end() || *it != r ? -1 : static_cast<int>(it - ranks->begin());
  };
  out.known = true;
  out.size = static_cast<int>(ranks->size());
  out.my_index = index_of(sets->rank);
  out.root_index = index_of(global_root);
  return out;
}

std::vector<int> runtime::process_set_ranks(int32_t id) const {
  auto sets = impl_->sets->load();
  const auto* ranks = sets ? sets->table.ranks(id) : nullptr;
  return ranks ? *ranks : std::vector<int>{};
}

namespace {

// Waits for the registry's answer. Its own deadlines (one per collective
// step) come first; this only bounds a registry that stopped answering.
template <class... Ts>
status ask_registry(const runtime& rt, caf::actor_system& system,
                    const process_set_registry_actor& registry,
                    int32_t* id, Ts&&... xs) {
  status result;
  if (!registry)
    return {status_code::reset, "Troupe has no membership epoch serving; call reset()."};
  // Above the registry's worst case: two backstopped internal collectives
  // (2 T + 5 s each) and a set start (T).
  const auto backstop = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(6 * rt.cfg().start_timeout_seconds + 15));
  caller_thread_scope caller;
  caf::scoped_actor self{system};
  self->request(registry, backstop, std::forward<Ts>(xs)...)
    .receive([&](status& s, int32_t set_id) {
               result = std::move(s);
               if (id)
                 *id = set_id;
             },
             [&](caf::error& err) {
               result = {status_code::timeout,
                         "the process-set registry did not answer: " + system.render(err)};
             });
  return result;
}

} // namespace

status runtime::add_process_set(const std::vector<int>& ranks, int32_t& id) {
  if (auto why = impl_->unavailable_now(); !why.ok())
    return why;
  return ask_registry(*this, impl_->system, impl_->current().registry, &id,
                      add_set_atom::value, ranks);
}

status runtime::remove_process_set(int32_t id) {
  if (auto why = impl_->unavailable_now(); !why.ok())
    return why;
  return ask_registry(*this, impl_->system, impl_->current().registry, nullptr,
                      remove_set_atom::value, id);
}

status runtime::tune(int32_t id, const tuning& change) {
  const auto sets = impl_->sets->load();
  if (sets && !sets->unavailable.ok())
    return sets->unavailable;
  const auto negotiator = sets ? sets->negotiator(id) : negotiator_actor{};
  if (!negotiator)
    return {status_code::invalid_argument,
            "tune: this rank is not a member of process set " + std::to_string(id) + "."};
  const double cycle = change.cycle_time_ms.value_or(0);
  if (change.fusion_threshold_bytes.value_or(0) < 0 || !(cycle >= 0 && cycle < 1e9) ||
      change.cache_capacity.value_or(0) < 0 || change.fusion_chunk_bytes.value_or(0) < -1)
    return {status_code::invalid_argument,
            "tune: fusion threshold, cycle time and cache capacity cannot be negative (cycle "
            "time: a finite number of milliseconds), a fusion chunk is -1 (the "
            "configured one) or more."};
  v1::Tuning t;
  if (change.fusion_threshold_bytes)
    t.set_fusion_threshold(*change.fusion_threshold_bytes);
  if (change.cycle_time_ms)
    t.set_cycle_time_us(static_cast<int64_t>(*change.cycle_time_ms * 1000));
  if (change.cache_capacity)
    t.set_cache_capacity(*change.cache_capacity);
  if (change.fusion_chunk_bytes)
    t.set_fusion_chunk_bytes(*change.fusion_chunk_bytes);
  caf::anon_send(negotiator, tune_atom::value, t.SerializeAsString());
  return {};
}

namespace {

template <class... Ts>
status ask_supervisor(caf::actor_system& system, const supervisor_actor& supervisor,
                      Ts&&... xs) {
  status result;
  caller_thread_scope caller;
  caf::scoped_actor self{system};
  self->request(supervisor, std::chrono::seconds(15), std::forward<Ts>(xs)...)
    .receive([&](status& s) { result = std::move(s); },
             [&](caf::error& err) {
               result = {status_code::timeout, "no answer from the runtime: " +
                                                 system.render(err)};
             });
  return result;
}

} // namespace

status runtime::start_timeline(const std::string& path, bool mark_cycles) {
  return ask_supervisor(impl_->system, impl_->current().supervisor, tl_start_atom::value,
                        impl_->own_timeline_path(path), mark_cycles);
}

status runtime::stop_timeline() {
  return ask_supervisor(impl_->system, impl_->current().supervisor, tl_stop_atom::value);
}

} // namespace troupe::workers
