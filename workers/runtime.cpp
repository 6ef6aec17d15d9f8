#include "workers/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cctype>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <unistd.h>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <caf/io/all.hpp>

#include "actors/protocols.hpp"
#include "actors/timeline.hpp"
#include "backends/registry.hpp"
#include "control/control_links.hpp"
#include "elastic/elastic_plan.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/store.hpp"
#include "elastic/store_endpoint.hpp"
#include "elastic/store_exchange.hpp"
#include "metrics/endpoint.hpp"
#include "metrics/host_state_metrics.hpp"
#include "metrics/rank_metrics.hpp"
#include "workers/control_dialer.hpp"
#include "workers/control_plane.hpp"
#include "workers/descriptor_limit.hpp"
#include "workers/directory.hpp"
#include "workers/elastic_join.hpp"
#include "workers/listen_address.hpp"
#include "workers/launcher_watch.hpp"
#include "workers/membership.hpp"
#include "workers/process_set_registry.hpp"
#include "workers/supervisor.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;
using clock = std::chrono::steady_clock;

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// Under mpirun, what a rank that failed to start puts in the endpoint
// allgather, before why (a published endpoint never starts so).
constexpr const char* start_failed_mark = "!start-failed: ";

// Bootstrap and reset are bounded by TROUPE_START_TIMEOUT from now.
clock::time_point start_deadline(const config& cfg) {
  return clock::now() + seconds(cfg.start_timeout_seconds);
}

caf::actor_system_config make_caf_config(const config& cfg, const control_plane& plane) {
  caf::actor_system_config c;
  plane.configure(c);
  c.set("scheduler.max-threads", static_cast<size_t>(cfg.scheduler_threads));
  // CAF's default idle loop sleeps 50 us between polls, adding ~100 us to
  // every hop from a foreign thread or the network (see caf-0.17 notes).
  c.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
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

// The timeline row of membership changes (RESET_<REASON> spans).
const std::string membership_row = "membership";

std::string upper(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ",") + n;
  return out;
}

} // namespace

// One membership epoch of this rank: who it is, and the actors that serve
// it. A reset replaces it whole.
struct epoch_run {
  int64_t epoch = 0;
  std::shared_ptr<const identity> id;
  // Null for a job of one.
  std::shared_ptr<const control_dialer> dialer;
  supervisor_actor supervisor;
  process_set_registry_actor registry;
};

struct runtime::impl {
  identity base;  // as started: epoch 0's identity and job prefix
  config cfg;
  control_plane plane;
  // Metrics belong to this runtime instance: a later init() starts from zero.
  std::shared_ptr<metrics::rank_metrics> metrics;
  // Elastic jobs: troupe-run's hosts by state, as last read from the store.
  std::unique_ptr<metrics::host_state_metrics> host_states;
  caf::actor_system_config caf_cfg;
  caf::actor_system system;
  // Null for a job of one, or under mpirun. Two connections: backend
  // rendezvous can hold its client for up to the Gloo timeout waiting for a
  // peer, and a reset's epoch and membership calls must not queue behind it.
  std::shared_ptr<elastic::store_client> store;
  std::shared_ptr<elastic::store_client> rendezvous_store;
  // Under troupe-run: ends this process when troupe-run dies.
  std::unique_ptr<launcher_watch> watch;
  std::optional<backends::external_launch> launch;
  std::shared_ptr<process_set_snapshots> sets = std::make_shared<process_set_snapshots>();
  // Opens and makes this rank's control-plane connections (TLS or plain).
  caf::io::middleman_actor connections;
  // Published once: peers find each epoch's supervisor through it.
  caf::actor directory;
  // The trace writer, one per runtime so that a reset neither truncates
  // the file nor hands it to another process; null without TROUPE_TIMELINE.
  caf::actor timeline;
  uint16_t directory_port = 0;
  // The current epoch. The mutex is held only to read or swap it, never
  // across a wait; `change_mtx` serialises reset() and stop().
  mutable std::mutex run_mtx;
  epoch_run run;
  std::mutex change_mtx;
  bool stopped = false;
  std::vector<int> last_alive;  // previous ranks seen alive at the last reset
  // Elastic jobs: whether this process has served in an epoch (it holds
  // state a newcomer needs), and whether the current epoch has newcomers.
  bool veteran = false;
  // Read without change_mtx: asking must not wait out a reset in progress.
  std::atomic<bool> newcomers{false};
  // Whether the epoch left last had lost a peer, or a peer had left it.
  bool peer_gone = false;
  // Last member: stops (and frees its port) first.
  std::unique_ptr<metrics::endpoint> metrics_server;

  impl(identity i, config c, control_plane p)
    : base(std::move(i)), cfg(std::move(c)), plane(std::move(p)),
      metrics(std::make_shared<metrics::rank_metrics>(
        metrics::rank_position{base.rank, base.size, base.local_rank},
        joined(backends::built_cpu_backends()))),
      caf_cfg(make_caf_config(cfg, plane)), system(caf_cfg),
      connections(plane.start(system)) {
  }

  epoch_run current() const {
    std::lock_guard<std::mutex> guard{run_mtx};
    return run;
  }

  // `path` for this process: by rank as started, or in an elastic job by
  // worker id (ranks are reused by other processes after a reset).
  std::string own_timeline_path(const std::string& path) const {
    return timeline_path(path, base.elastic ? base.worker_id : base.rank);
  }

  // DYNAMIC: the writer exists but writes only between start_timeline()
  // and stop_timeline().
  void start_timeline_writer() {
    if (!cfg.timeline.empty())
      timeline = spawn_timeline(system, cfg.timeline == dynamic_timeline
                                          ? std::string()
                                          : own_timeline_path(cfg.timeline));
  }

  void mark(const std::string& name) {
    if (timeline)
      caf::anon_send(timeline, timeline_atom::value, name, timeline_now_us());
  }

  // What troupe-run announced for `epoch` (elastic jobs), none otherwise.
  // Also refreshes the hosts by state: a host changes state with an
  // announcement or a reset, except a cooldown that ends without changing
  // the seats.
  host_update announced(int64_t epoch) const {
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

  // troupe-run's hosts by state into this rank's metrics; throws
  // store_error.
  void read_host_states() const {
    const auto text = store->get(elastic::host_states_key(base.job_id));
    if (const auto states = text ? elastic::decode_host_states(*text) : std::nullopt)
      host_states->set(states->active, states->blacklisted, states->cooling_down);
  }

  // Off unless TROUPE_METRICS_PORT is set; this rank serves on
  // port + 1 + its index on this machine (the launcher has the port itself),
  // so ranks of two troupe-run "hosts" on one machine never collide.
  status serve_metrics() {
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

  // Publishes the directory (once per runtime), on the listen address only.
  status publish_directory() {
    directory = spawn_directory(system);
    auto port = control_plane::publish(connections, directory, base.listen_host);
    if (!port)
      return {status_code::internal,
              "cannot publish this rank's endpoint: " + system.render(port.error())};
    directory_port = *port;
    spdlog::info("troupe rank {}: control plane ({}) listening on {}:{}", base.rank,
                 plane.encrypted() ? "TLS" : "plain TCP", base.listen_host, directory_port);
    return {};
  }

  // Connects to the supervisors of `next`'s epoch that this rank dials
  // (control::control_links: every lower rank in a small job, the parent
  // in the global set's control tree in a large one; found through that
  // rank's directory) and introduces this one; the others dial us. The
  // directories' addresses go through the store (keys under the epoch's
  // job prefix) or, under mpirun, an MPI allgather, each with the control
  // fanout its rank was given, so every rank plans the same links.
  status connect_peers(epoch_run& next, const identity& id, clock::time_point deadline) {
    caf::anon_send(directory, enter_atom::value, next.epoch, next.supervisor);
    if (id.size == 1)
      return {};
    const control::published_endpoint own{id.listen_host + ":" + std::to_string(directory_port),
                                          cfg.control_fanout, id.hostname};
    auto key = [&id](int rank) { return id.job_id + "/endpoint/" + std::to_string(rank); };
    std::vector<std::string> all;
    if (store) {
      // First writer wins: a second process claiming this rank cannot
      // redirect the peers.
      auto claim = store->compare_set(key(id.rank), std::nullopt, own.encode());
      if (!claim.swapped)
        return {status_code::invalid_argument,
                "rank " + std::to_string(id.rank) + "'s endpoint is already registered as " +
                  claim.current.value_or("?") + ": two processes started as rank " +
                  std::to_string(id.rank) + " of job " + id.job_id};
      // Then one listing of every endpoint once all ranks published
      // theirs, not one wait per peer (O(N^2) through the store's thread).
      all = elastic::gather_published(
        *store, id.job_id + "/endpoint/", id.job_id + "/endpoints-published/", id.size,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
    } else {
      all = launch->allgather(own.encode());
    }
    std::vector<control::published_endpoint> endpoints;
    std::vector<int32_t> fanouts;
    std::vector<std::string> hosts;
    for (const auto& text : all) {
      if (text.rfind(start_failed_mark, 0) == 0)
        return {status_code::peer_lost,
                "rank " + std::to_string(endpoints.size()) + " could not start: " +
                  text.substr(std::strlen(start_failed_mark))};
      try {
        endpoints.push_back(control::published_endpoint::decode(text));
      } catch (const std::exception& e) {
        return {status_code::invalid_argument,
                "rank " + std::to_string(endpoints.size()) + " published a malformed endpoint: " +
                  e.what()};
      }
      fanouts.push_back(endpoints.back().fanout);
      hosts.push_back(endpoints.back().hostname);
    }
    const auto links = control::control_links::plan(fanouts, hosts);
    const auto differs = std::find_if(fanouts.begin(), fanouts.end(),
                                      [&](int32_t f) { return f != fanouts.front(); });
    if (differs != fanouts.end() && (id.rank == 0 || cfg.control_fanout != fanouts.front()))
      spdlog::warn("troupe rank {}: TROUPE_CONTROL_FANOUT is {} on rank 0 but {} on rank {}: "
                   "every rank connects to every other (a full mesh of control connections)",
                   id.rank, fanouts.front(), *differs, differs - fanouts.begin());
    next.dialer = std::make_shared<const control_dialer>(system, connections, id.rank,
                                                         std::move(endpoints), links);
    // Mesh: nearest lower rank first. Had every rank started with rank 0,
    // rank 0's one network thread would take N - 1 handshakes at once (48
    // ranks on this 2-core host: every one timed out, and the retries piled
    // up).
    for (int peer : links.dials(id.rank)) {
      const auto& peer_address = next.dialer->endpoint(peer).address;
      // After the first epoch this is the middleman's cached handle.
      caf::actor remote;
      if (auto dialled = next.dialer->dial(peer, deadline, remote); !dialled.ok())
        return dialled;
      supervisor_actor supervisor;
      status found;
      caf::scoped_actor self{system};
      self->request(remote, deadline - clock::now(), lookup_atom::value, next.epoch)
        .receive([&](supervisor_actor& a) { supervisor = std::move(a); },
                 [&](caf::error& err) {
                   found = {status_code::timeout,
                            "rank " + std::to_string(peer) + " at " + peer_address +
                              " did not enter membership epoch " + std::to_string(next.epoch) +
                              " before the start timeout: " + system.render(err)};
                 });
      if (!found.ok())
        return found;
      if (!supervisor)
        return {status_code::reset, "rank " + std::to_string(peer) + " at " + peer_address +
                                      " has moved past membership epoch " +
                                      std::to_string(next.epoch)};
      caf::anon_send(supervisor, hello_atom::value, static_cast<int32_t>(id.rank),
                     peer_actor{next.supervisor}, own.address);
      caf::anon_send(next.supervisor, hello_atom::value, static_cast<int32_t>(peer),
                     peer_actor{supervisor}, peer_address);
    }
    status result{status_code::timeout,
                  "not every neighbour in the control connections said hello before the start "
                  "timeout (TROUPE_START_TIMEOUT)"};
    caf::scoped_actor self{system};
    self->request(next.supervisor, deadline - clock::now(), peers_atom::value, links.parents())
      .receive([&](bool) {
                 result = {};
                 const auto held = links.neighbours(id.rank).size();
                 metrics->control_links(held);
                 spdlog::info("troupe rank {}: {} control connection(s) ({})", id.rank, held,
                              links.mesh() ? "a full mesh"
                                           : "the control tree of fanout " +
                                               std::to_string(fanouts.front()));
               },
               [&](caf::error& err) { result = {status_code::timeout, result.message() +
                                                                      ": " + system.render(err)}; });
    return result;
  }

  // Starts the global set; `negotiator` receives its negotiator.
  status start_group(const epoch_run& next, const identity& id, clock::time_point deadline,
                     negotiator_actor& negotiator) {
    status result;
    caf::scoped_actor self{system};
    std::vector<int> everyone(static_cast<size_t>(id.size));
    std::iota(everyone.begin(), everyone.end(), 0);
    self
      ->request(next.supervisor, deadline - clock::now(), start_atom::value, uint32_t{0},
                everyone, uint64_t{0})
      .receive(
        [&](status& s, negotiator_actor& neg) {
          result = std::move(s);
          negotiator = std::move(neg);
        },
        [&](caf::error& err) {
          result = {status_code::timeout,
                    "the global process set did not start: " + system.render(err)};
        });
    return result;
  }

  // Brings up epoch `epoch` as `id`: supervisor, peers, the global set,
  // the process-set registry. What started is kept even on failure, so
  // stop() and reset() can take it down.
  status bootstrap(int64_t epoch, const identity& id, clock::time_point deadline) {
    const auto began = clock::now();
    epoch_run next;
    next.epoch = epoch;
    next.id = std::make_shared<const identity>(id);
    next.supervisor =
      spawn_supervisor(system,
                       supervisor_args{id, cfg, rendezvous_store, metrics, epoch, timeline});
    status result;
    try {
      result = connect_peers(next, id, deadline);
      negotiator_actor global_negotiator;
      if (result.ok())
        result = start_group(next, id, deadline, global_negotiator);
      if (result.ok()) {
        auto first = std::make_shared<process_set_snapshot>(id.size, id.rank);
        first->epoch = epoch;
        first->negotiators.emplace(0, std::move(global_negotiator));
        sets->store(std::move(first));
        next.registry =
          spawn_process_set_registry(system, next.supervisor, id, cfg, sets, next.dialer);
        metrics->position({id.rank, id.size, id.local_rank}, epoch);
        metrics->resets().rendezvous(std::chrono::duration<double>(clock::now() - began).count());
        mark("MEMBERSHIP_EPOCH_" + std::to_string(epoch));
      }
    } catch (const std::exception& e) {
      result = {status_code::peer_lost, std::string("bootstrap failed: ") + e.what()};
    }
    std::lock_guard<std::mutex> guard{run_mtx};
    run = std::move(next);
    return result;
  }

  // Elastic jobs: takes the seat troupe-run's newest plan (epoch >= `first`)
  // gives this process and brings that epoch up. When a member fails while
  // the epoch starts, the driver plans the next one and the bootstrap
  // cannot complete: this process then moves on to that plan.
  status enter_planned(int64_t first, std::vector<int> lost = {}) {
    const auto plan_deadline =
      clock::now() + seconds(cfg.elastic_timeout_seconds + cfg.reset_timeout_seconds);
    for (;;) {
      elastic_seat seat;
      auto found = await_seat(*store, base.job_id, base.worker_id, first, {veteran, lost},
                              plan_deadline, seat);
      if (!found.ok())
        return found;
      if (seat.removed)
        return {status_code::removed,
                "troupe-run's membership epoch " + std::to_string(seat.epoch) +
                  " has no place for worker " + std::to_string(base.worker_id) + " on " +
                  base.hostname + " (its host left the job or the job is at --max-np)"};
      identity id = base;
      static_cast<backends::rank_layout&>(id) = seat.layout;
      id.job_id = base.job_id + "/epoch" + std::to_string(seat.epoch);
      auto started = bootstrap(seat.epoch, id, start_deadline(cfg));
      if (started.ok()) {
        newcomers = has_newcomers(*store, base.job_id, seat);
        veteran = true;
        read_host_states();
        return started;
      }
      if (elastic::epoch(*store, base.job_id) <= seat.epoch)
        return started;
      leave_epoch(seat.epoch + 1);
      first = seat.epoch + 1;
      lost.clear();
    }
  }

  // Takes the current epoch's actors down: (shutdown) tells the peers and
  // waits for them; (reset) answers which previous ranks can join the next
  // epoch.
  std::vector<int> leave_epoch(std::optional<int64_t> next_epoch) {
    auto old = current();
    std::vector<int> alive;
    if (!old.supervisor)
      return alive;
    caf::scoped_actor self{system};
    if (next_epoch) {
      self->request(old.supervisor, std::chrono::seconds(5), reset_atom::value, *next_epoch)
        .receive([&](std::vector<int>& ranks) { alive = std::move(ranks); },
                 [](caf::error&) {});
      peer_gone = old.id && static_cast<int>(alive.size()) < old.id->size;
    } else
      self->request(old.supervisor, std::chrono::seconds(5), shutdown_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
    self->send_exit(old.supervisor, caf::exit_reason::user_shutdown);
    if (old.registry)
      self->send_exit(old.registry, caf::exit_reason::user_shutdown);
    std::lock_guard<std::mutex> guard{run_mtx};
    run.supervisor = supervisor_actor{};
    run.registry = process_set_registry_actor{};
    return alive;
  }

  // While no epoch serves (a reset in progress or failed), every
  // collective and process-set call fails at once with `why`.
  void unavailable(status why) {
    auto none = std::make_shared<process_set_snapshot>(0, 0);
    none->unavailable = std::move(why);
    sets->store(std::move(none));
  }

  status reset() {
    std::lock_guard<std::mutex> serial{change_mtx};
    if (stopped)
      return {status_code::shut_down, "Troupe has been shut down on this rank."};
    const auto old = current();
    if (!store && base.size > 1)
      return {status_code::invalid_argument,
              "reset() needs troupe-run's rendezvous store; under mpirun the membership "
              "belongs to MPI."};
    const auto began = clock::now();
    const auto began_us = timeline_now_us();
    const bool hosts_changed = announced(old.epoch) != host_update::none;
    auto result = base.elastic ? reset_elastic(old.epoch) : reset_numbered(old);
    record_reset(hosts_changed, result, began, began_us);
    return result;
  }

  // Counts the reset that began at `began` and returned `result`, and puts
  // it on the timeline's membership row.
  void record_reset(bool hosts_changed, const status& result, clock::time_point began,
                    int64_t began_us) {
    using metrics::reset_reason;
    using metrics::reset_outcome;
    const auto why = peer_gone       ? reset_reason::peer_lost
                     : hosts_changed ? reset_reason::hosts_updated
                                     : reset_reason::requested;
    const auto how = result.ok()                              ? reset_outcome::ok
                     : result.code() == status_code::removed ? reset_outcome::removed
                                                             : reset_outcome::failed;
    metrics->resets().reset(why, how,
                            std::chrono::duration<double>(clock::now() - began).count());
    if (!timeline)
      return;
    const auto span = "RESET_" + upper(metrics::reset_reason_name(why));
    caf::anon_send(timeline, timeline_atom::value, membership_row, std::string("B"), span,
                   began_us);
    caf::anon_send(timeline, timeline_atom::value, membership_row, std::string("E"), span,
                   timeline_now_us());
    if (how != reset_outcome::ok)
      mark(how == reset_outcome::removed ? "REMOVED" : "RESET_FAILED");
  }

  // A job without troupe-run's elastic driver: the next epoch is this one's
  // successor, its members the ranks still alive.
  status reset_numbered(const epoch_run& old) {
    const auto deadline = start_deadline(cfg);
    try {
      elastic::epoch_advance next{true, old.epoch + 1};
      if (store)
        next = elastic::advance_epoch(*store, base.job_id, old.epoch);
      unavailable({status_code::reset, "Troupe is resetting to membership epoch " +
                                         std::to_string(next.epoch) + "; retry after reset()."});
      auto alive = leave_epoch(next.epoch);
      // After a failed reset no supervisor is left to ask: the ranks seen
      // alive then are still the best knowledge.
      if (alive.empty())
        alive = last_alive;
      last_alive = alive;
      if (next.epoch != old.epoch + 1)
        return failed_reset(
          {status_code::reset, "this process is at membership epoch " +
                                 std::to_string(old.epoch) + " but the job is at " +
                                 std::to_string(next.epoch - 1) + ": it missed a reset"},
          next.epoch);
      identity id = *old.id;
      if (store) {
        backends::rank_layout layout;
        auto joined = join_epoch(*store,
                                 {base.job_id, next.epoch, next.advanced, alive, old.id->rank,
                                  old.id->hostname},
                                 deadline, layout);
        if (!joined.ok())
          return failed_reset(joined, next.epoch);
        static_cast<backends::rank_layout&>(id) = layout;
      }
      id.job_id = base.job_id + "/epoch" + std::to_string(next.epoch);
      auto started = bootstrap(next.epoch, id, deadline);
      return started.ok() ? started : failed_reset(started, next.epoch);
    } catch (const std::exception& e) {
      return failed_reset({status_code::peer_lost, e.what()}, current().epoch + 1);
    }
  }

  status reset_elastic(int64_t old_epoch) {
    unavailable({status_code::reset, "Troupe is resetting to troupe-run's next membership "
                                     "epoch; retry after reset()."});
    try {
      // The peers this rank lost tell troupe-run whom not to wait for.
      const auto alive = leave_epoch(old_epoch + 1);
      std::vector<int> lost;
      const auto old = current().id;
      for (int r = 0; old && !alive.empty() && r < old->size; ++r)
        if (!std::binary_search(alive.begin(), alive.end(), r))
          lost.push_back(r);
      auto s = enter_planned(old_epoch + 1, std::move(lost));
      if (s.ok() || s.code() != status_code::removed)
        return s.ok() ? s : failed_reset(s, current().epoch);
      unavailable(s);
      return s;
    } catch (const std::exception& e) {
      return failed_reset({status_code::peer_lost, e.what()}, current().epoch);
    }
  }

  // A failed reset leaves no epoch serving. It counts as epoch `failed`, so
  // the next reset() advances past it to fresh store keys.
  status failed_reset(const status& why, int64_t failed) {
    status s{status_code::reset, "reset() failed: " + why.message() + ". Call reset() again."};
    leave_epoch(std::nullopt);
    unavailable(s);
    std::lock_guard<std::mutex> guard{run_mtx};
    run.epoch = failed;
    return s;
  }

  // Why no call can be served now (a reset in progress or failed); ok
  // otherwise.
  status unavailable_now() const {
    auto now = sets->load();
    return now ? now->unavailable : status{};
  }

  // Once: the supervisor's goodbye fails what is pending, which returns a
  // registry call in progress; then the registry may exit.
  void stop() {
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
};

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}

runtime::~runtime() {
  impl_->stop();
}

void runtime::stop() {
  impl_->stop();
}

std::unique_ptr<runtime> runtime::start(status& result, int generation) {
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
    if (!id.has_store() && (launch = backends::detect_external_launch(cfg.mpi_threads_disable)))
      adopt(id, *launch);
  } catch (const std::exception& e) {
    result = {status_code::backend, std::string("MPI bootstrap failed: ") + e.what()};
    return nullptr;
  }
  std::string secret;
  std::optional<control_plane> plane;
  try {
    // First: under mpirun every rank takes part in sharing the secret.
    secret = job_secret(env, cfg, id, launch);
  } catch (const std::exception& e) {  // unreadable descriptor
    result = {status_code::invalid_argument, e.what()};
    return nullptr;
  }
  // From here on, under mpirun, the peers wait for this rank in the
  // endpoint allgather (connect_peers): a rank that fails before it still
  // takes part, saying why, so that they fail naming it instead of
  // waiting for ever.
  const auto fail_start = [&](status why) {
    if (launch && !id.has_store() && id.size > 1) {
      try {
        launch->allgather(start_failed_mark + why.message());
      } catch (const std::exception& e) {
        spdlog::error("troupe rank {}: could not tell the other ranks that it failed to start: "
                      "{}",
                      id.rank, e.what());
      }
    }
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
  const auto id = static_cast<int32_t>(batch.front()->process_set_id);
  const auto negotiator = where.snapshot ? where.snapshot->negotiator(id) : negotiator_actor{};
  if (!negotiator) {
    // A member whose part of the set did not start.
    for (auto& e : batch)
      e->handle->complete({status_code::invalid_argument,
                           "Process set does not exist or has not been registered."});
    return;
  }
  submit_batch(negotiator, std::move(batch));
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
