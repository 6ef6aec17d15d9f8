#include "workers/runtime.hpp"

#include <functional>
#include <numeric>
#include <optional>

#include <unistd.h>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <caf/io/all.hpp>

#include "actors/atoms.hpp"
#include "backends/registry.hpp"
#include "elastic/store.hpp"
#include "metrics/endpoint.hpp"
#include "metrics/rank_metrics.hpp"
#include "workers/process_set_registry.hpp"
#include "workers/supervisor.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;
using clock = std::chrono::steady_clock;

caf::actor_system_config make_caf_config(const config& cfg) {
  caf::actor_system_config c;
  c.load<caf::io::middleman>();
  c.set("scheduler.max-threads", static_cast<size_t>(cfg.scheduler_threads));
  // CAF's default idle loop sleeps 50 us between polls, adding ~100 us to
  // every hop from a foreign thread or the network (see caf-0.17 notes).
  c.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
  // Heartbeats make a frozen peer (SIGSTOP, hung host) look like a lost one.
  const auto timeout = std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(cfg.heartbeat_timeout_seconds));
  c.set("middleman.heartbeat-interval", caf::timespan{timeout / 5});
  c.set("middleman.connection-timeout", timeout);
  return c;
}

spdlog::level::level_enum log_level(const std::string& name) {
  return name == "warning" ? spdlog::level::warn : spdlog::level::from_str(name);
}

std::pair<std::string, uint16_t> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    throw elastic::store_error("malformed endpoint address '" + address + "'");
  return {address.substr(0, colon),
          static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

// Identity handed down by mpirun instead of troupe-run.
void adopt(identity& id, const backends::external_launch& launch) {
  static_cast<backends::rank_layout&>(id) = launch.layout;
  char host[256] = {};
  if (id.hostname == "127.0.0.1" && id.cross_size > 1 && gethostname(host, sizeof host) == 0)
    id.hostname = host;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ",") + n;
  return out;
}

} // namespace

struct runtime::impl {
  identity id;
  config cfg;
  // Metrics belong to this runtime instance: a later init() starts from zero.
  std::shared_ptr<metrics::rank_metrics> metrics;
  caf::actor_system_config caf_cfg;
  caf::actor_system system;
  caf::actor supervisor;
  std::unique_ptr<process_set_registry> sets;
  // Last member: stops (and frees its port) first.
  std::unique_ptr<metrics::endpoint> metrics_server;

  impl(identity i, config c)
    : id(std::move(i)), cfg(std::move(c)),
      metrics(std::make_shared<metrics::rank_metrics>(
        metrics::rank_position{id.rank, id.size, id.local_rank},
        joined(backends::built_cpu_backends()))),
      caf_cfg(make_caf_config(cfg)), system(caf_cfg) {
  }

  // Off unless TROUPE_METRICS_PORT is set; this rank serves on
  // port + 1 + local rank (the launcher has the port itself).
  status serve_metrics() {
    if (cfg.metrics_port == 0)
      return {};
    const int port = cfg.metrics_port + 1 + id.local_rank;
    if (port > 65535)
      return {status_code::invalid_argument,
              "metrics port " + std::to_string(port) +
                " (TROUPE_METRICS_PORT + 1 + local rank) is out of range"};
    try {
      metrics_server = std::make_unique<metrics::endpoint>(
        cfg.metrics_address, static_cast<uint16_t>(port), metrics->registry());
    } catch (const metrics::endpoint_error& e) {
      return {status_code::invalid_argument,
              std::string(e.what()) + " (TROUPE_METRICS_PORT + 1 + local rank)"};
    }
    return {};
  }

  std::string key(const std::string& what, int rank) const {
    return id.job_id + "/" + what + "/" + std::to_string(rank);
  }

  // Publishes this rank's endpoint, connects to every lower rank and
  // introduces itself; higher ranks connect to us and do the same.
  // `exchange` makes our address known and returns a way to look up a
  // peer's (through the store, or an MPI allgather under mpirun).
  using address_book = std::function<std::string(int peer)>;
  status connect_peers(const std::function<address_book(const std::string&)>& exchange,
                       clock::time_point deadline) {
    auto port = system.middleman().publish(supervisor, 0, nullptr, true);
    if (!port)
      return {status_code::internal,
              "cannot publish this rank's endpoint: " + system.render(port.error())};
    const auto address = id.hostname + ":" + std::to_string(*port);
    auto address_of = exchange(address);
    for (int peer = 0; peer < id.rank; ++peer) {
      auto peer_address = address_of(peer);
      auto [host, peer_port] = split_address(peer_address);
      auto remote = system.middleman().remote_actor(host, peer_port);
      if (!remote)
        return {status_code::peer_lost, "cannot connect to rank " + std::to_string(peer) +
                                          " at " + peer_address + ": " +
                                          system.render(remote.error())};
      caf::anon_send(*remote, hello_atom::value, static_cast<int32_t>(id.rank), supervisor,
                     address);
      caf::anon_send(supervisor, hello_atom::value, static_cast<int32_t>(peer), *remote,
                     peer_address);
    }
    status result{status_code::timeout,
                  "not every rank connected before the start timeout (TROUPE_START_TIMEOUT)"};
    caf::scoped_actor self{system};
    self->request(supervisor, deadline - clock::now(), peers_atom::value)
      .receive([&](bool) { result = {}; },
               [&](caf::error& err) { result = {status_code::timeout, result.message() +
                                                                      ": " + system.render(err)}; });
    return result;
  }

  // Starts the global set; `negotiator` receives its negotiator.
  status start_group(clock::time_point deadline, caf::actor& negotiator) {
    status result;
    caf::scoped_actor self{system};
    std::vector<int> everyone(static_cast<size_t>(id.size));
    std::iota(everyone.begin(), everyone.end(), 0);
    self
      ->request(supervisor, deadline - clock::now(), start_atom::value, uint32_t{0}, everyone,
                uint64_t{0})
      .receive(
        [&](status& s, caf::actor& neg) {
          result = std::move(s);
          negotiator = std::move(neg);
        },
        [&](caf::error& err) {
          result = {status_code::timeout,
                    "the global process set did not start: " + system.render(err)};
        });
    return result;
  }

  void stop() {
    if (!supervisor)
      return;
    caf::scoped_actor self{system};
    self->request(supervisor, std::chrono::seconds(5), shutdown_atom::value)
      .receive([](bool) {}, [](caf::error&) {});
    self->send_exit(supervisor, caf::exit_reason::user_shutdown);
    sets.reset();
    supervisor = nullptr;
  }
};

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}

runtime::~runtime() {
  impl_->stop();
}

std::unique_ptr<runtime> runtime::start(status& result, int generation) {
  identity id;
  config cfg;
  try {
    auto env = process_env();
    id = identity_from_env(env);
    cfg = config_from_env(env);
    // Every key in the store (endpoints, Gloo rendezvous) is under job_id.
    if (generation > 0)
      id.job_id += "/restart" + std::to_string(generation);
  } catch (const config_error& e) {
    result = {status_code::invalid_argument, e.what()};
    return nullptr;
  }
  // Diagnostics go to stderr, never into the program's stdout.
  auto logger = std::make_shared<spdlog::logger>(
    "troupe", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(log_level(cfg.log_level));
  spdlog::set_default_logger(std::move(logger));
  spdlog::info("troupe rank {}/{} starting: {}", id.rank, id.size, describe(cfg));
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                         std::chrono::duration<double>(cfg.start_timeout_seconds));
  std::optional<backends::external_launch> launch;
  try {
    if (!id.has_store() && (launch = backends::detect_external_launch()))
      adopt(id, *launch);
  } catch (const std::exception& e) {
    result = {status_code::backend, std::string("MPI bootstrap failed: ") + e.what()};
    return nullptr;
  }
  auto p = std::make_unique<impl>(id, cfg);
  std::unique_ptr<runtime> rt{new runtime(std::move(p))};
  auto& m = *rt->impl_;
  if (result = m.serve_metrics(); !result.ok())
    return nullptr;
  try {
    supervisor_args args{id, cfg, nullptr, m.metrics};
    if (id.has_store())
      args.store = std::make_shared<elastic::store_client>(
        id.store_host, id.store_port,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
    auto store = args.store;
    m.supervisor = spawn_supervisor(m.system, std::move(args));
    if (store)
      result = m.connect_peers(
        [&](const std::string& address) -> impl::address_book {
          store->set(m.key("endpoint", id.rank), address);
          return [&m, store, deadline](int peer) {
            return store->wait_get(m.key("endpoint", peer),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - clock::now()));
          };
        },
        deadline);
    else if (launch && id.size > 1)
      result = m.connect_peers(
        [&](const std::string& address) -> impl::address_book {
          auto all = launch->allgather(address);
          return [all](int peer) { return all.at(static_cast<size_t>(peer)); };
        },
        deadline);
    caf::actor global_negotiator;
    if (result.ok())
      result = m.start_group(deadline, global_negotiator);
    if (result.ok())
      m.sets = std::make_unique<process_set_registry>(m.system, m.supervisor,
                                                      std::move(global_negotiator), m.id, m.cfg);
  } catch (const std::exception& e) {
    result = {status_code::peer_lost, std::string("bootstrap failed: ") + e.what()};
  }
  if (!result.ok())
    return nullptr;  // the destructor stops what was started
  return rt;
}

const identity& runtime::id() const {
  return impl_->id;
}

const config& runtime::cfg() const {
  return impl_->cfg;
}

void runtime::submit(actors::entry_batch batch) {
  auto negotiator = impl_->sets->negotiator(static_cast<int32_t>(batch.front()->process_set_id));
  if (!negotiator) {
    for (auto& e : batch)
      e->handle->complete({status_code::invalid_argument,
                           "Process set does not exist or has not been registered."});
    return;
  }
  caf::anon_send(negotiator, submit_atom::value, std::move(batch));
}

const std::vector<int>* runtime::process_set_ranks(int32_t id) const {
  return impl_->sets->ranks(id);
}

status runtime::add_process_set(const std::vector<int>& ranks, int32_t& id) {
  return impl_->sets->add(ranks, id);
}

status runtime::remove_process_set(int32_t id) {
  return impl_->sets->remove(id);
}

namespace {

template <class... Ts>
status ask_supervisor(caf::actor_system& system, const caf::actor& supervisor, Ts&&... xs) {
  status result;
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
  return ask_supervisor(impl_->system, impl_->supervisor, tl_start_atom::value, path,
                        mark_cycles);
}

status runtime::stop_timeline() {
  return ask_supervisor(impl_->system, impl_->supervisor, tl_stop_atom::value);
}

} // namespace troupe::workers
