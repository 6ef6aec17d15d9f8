#include "workers/supervisor.hpp"

#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/atoms.hpp"
#include "actors/negotiator.hpp"
#include "actors/timeline.hpp"
#include "backends/backend_actor.hpp"
#include "backends/registry.hpp"
#include "coordinator/coordinator_actor.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;

constexpr uint32_t global_set = 0;
// How long a leaving rank waits for peers to acknowledge its goodbye.
constexpr auto bye_timeout = std::chrono::seconds(1);

struct process_set_group {
  caf::actor negotiator;
  caf::actor coordinator;  // only on the set's lowest rank
  caf::actor backend;
};

struct supervisor_state {
  supervisor_args args;
  std::vector<caf::actor> peers;  // endpoint per rank; self at own rank
  std::vector<std::string> peer_addresses;
  std::vector<bool> left;
  int known_peers = 0;
  std::optional<caf::typed_response_promise<bool>> peers_waiter;
  process_set_group group;
  caf::actor timeline;  // this rank's trace writer; null without TROUPE_TIMELINE
  std::optional<status> broken;
  static constexpr const char* name = "troupe.supervisor";
};

using supervisor_actor = caf::stateful_actor<supervisor_state>;

// "trace.json" -> "trace.<rank>.json": every rank writes its own view.
std::string timeline_path(const std::string& path, int rank) {
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + "." + std::to_string(rank) + ext;
  return path + "." + std::to_string(rank);
}

// start_timeline() / stop_timeline() need the timeline machinery.
const status no_dynamic_timeline{
  status_code::invalid_argument,
  "Set TROUPE_TIMELINE=DYNAMIC (or HOROVOD_TIMELINE=DYNAMIC) to enable dynamic timeline usage."};

caf::result<status> start_timeline(supervisor_actor* self, const std::string& path,
                                   bool mark_cycles) {
  auto& st = self->state;
  if (!st.timeline)
    return no_dynamic_timeline;
  auto rp = self->make_response_promise<status>();
  self->request(st.timeline, std::chrono::seconds(10), tl_start_atom::value,
                timeline_path(path, st.args.id.rank))
    .then(
      [=](status& opened) mutable {
        if (opened.ok() && self->state.group.negotiator)
          self->send(self->state.group.negotiator, tracing_atom::value, true, mark_cycles);
        rp.deliver(std::move(opened));
      },
      [=](caf::error& err) mutable {
        rp.deliver(status{status_code::internal,
                          "timeline did not start: " + self->system().render(err)});
      });
  return rp;
}

status stop_timeline(supervisor_actor* self) {
  auto& st = self->state;
  if (!st.timeline)
    return no_dynamic_timeline;
  if (st.group.negotiator)
    self->send(st.group.negotiator, tracing_atom::value, false, false);
  self->send(st.timeline, tl_stop_atom::value);
  return {};
}

// The global set cannot make progress any more: fail what is pending and
// everything submitted from now on.
void abort_groups(supervisor_actor* self, status why) {
  auto& st = self->state;
  if (st.broken && !abort_escalates(*st.broken, why))
    return;
  if (why.code() == status_code::shut_down)
    spdlog::info("troupe rank {}: {}", st.args.id.rank, why.message());
  else
    spdlog::error("troupe rank {}: {}", st.args.id.rank, why.message());
  st.broken = why;
  if (st.group.negotiator)
    self->send(st.group.negotiator, abort_atom::value, why);
}

std::optional<int> peer_rank(const supervisor_state& st, const caf::actor_addr& who) {
  for (size_t r = 0; r < st.peers.size(); ++r)
    if (st.peers[r] && st.peers[r].address() == who)
      return static_cast<int>(r);
  return std::nullopt;
}

void on_down(supervisor_actor* self, const caf::down_msg& dm) {
  auto& st = self->state;
  const auto& g = st.group;
  if (dm.source == g.negotiator.address() || dm.source == g.coordinator.address() ||
      dm.source == g.backend.address()) {
    abort_groups(self, {status_code::internal,
                        "an actor of the global process set stopped: " +
                          self->system().render(dm.reason)});
    return;
  }
  auto r = peer_rank(st, dm.source);
  if (!r || st.left[static_cast<size_t>(*r)])
    return;
  abort_groups(self, {status_code::peer_lost,
                      fmt::format("rank {} ({}) was lost: {}. Collectives involving it "
                                  "cannot complete.",
                                  *r, st.peer_addresses[static_cast<size_t>(*r)],
                                  self->system().render(dm.reason))});
}

void on_hello(supervisor_actor* self, int32_t rank, const caf::actor& endpoint,
              const std::string& address) {
  auto& st = self->state;
  const auto slot = static_cast<size_t>(rank);
  if (rank < 0 || slot >= st.peers.size() || rank == st.args.id.rank || st.peers[slot]) {
    spdlog::error("troupe rank {}: ignored a hello from rank {} ({})", st.args.id.rank,
                  rank, address);
    return;
  }
  st.peers[slot] = endpoint;
  st.peer_addresses[slot] = address;
  self->monitor(endpoint);
  if (++st.known_peers == st.args.id.size - 1 && st.peers_waiter)
    st.peers_waiter->deliver(true);
}

// Forwards a peer's control message to the actor of its process set.
template <class Atom>
void route(supervisor_actor* self, const caf::actor& dest, const char* what, uint32_t set,
           std::string bytes) {
  if (set != global_set || !dest) {
    spdlog::error("troupe rank {}: dropped a {} for process set {}, which has no {} here",
                  self->state.args.id.rank, what, set,
                  std::is_same_v<Atom, request_atom> ? "coordinator" : "negotiator");
    return;
  }
  self->state.args.metrics->mailbox_depth(metrics::actor_kind::supervisor,
                                          self->mailbox().size());
  self->send(dest, Atom::value, set, std::move(bytes));
}

// Builds the global set's group: the backend rendezvous blocks, so it runs
// in the detached backend actor while this actor keeps serving messages.
caf::result<status, caf::actor> start_group(supervisor_actor* self) {
  auto& st = self->state;
  const auto& id = st.args.id;
  backends::backend_context ctx;
  ctx.rank = id.rank;
  ctx.size = id.size;
  ctx.advertise_host = id.hostname;
  ctx.store = st.args.store;
  ctx.store_prefix = id.job_id + "/set0/gloo/";
  ctx.timeout = std::chrono::milliseconds(
    static_cast<int64_t>(st.args.cfg.gloo_timeout_seconds * 1000));
  std::unique_ptr<backends::backend> impl;
  try {
    impl = backends::make_cpu_backend(ctx, st.args.cfg.cpu_operations);
  } catch (const std::exception& e) {
    return {status{status_code::backend, e.what()}, caf::actor{}};
  }
  auto counted = st.args.metrics->for_backend(impl->name());
  st.group.backend = backends::spawn_backend_actor(self->system(), std::move(impl), id.rank,
                                                   id.size, std::move(counted));
  self->monitor(st.group.backend);
  // Coordinator and negotiator exist before the backend is connected: a
  // faster peer's first request may arrive while our rendezvous is still
  // running, and the backend runs queued work only after (connect).
  if (id.rank == 0) {
    const auto& cfg = st.args.cfg;
    coordinator::coordinator_options options;
    options.stall = {cfg.stall_check, cfg.stall_check_seconds, cfg.stall_shutdown_seconds};
    options.fusion_threshold = cfg.fusion_threshold;
    options.cache_capacity = static_cast<size_t>(cfg.cache_capacity);
    options.cycle_time =
      std::chrono::microseconds(static_cast<int64_t>(cfg.cycle_time_ms * 1000));
    st.group.coordinator =
      coordinator::spawn_coordinator(self->system(), global_set, st.peers, options,
                                     st.args.metrics);
    self->monitor(st.group.coordinator);
  }
  const auto& timeline = st.args.cfg.timeline;
  const bool tracing = !timeline.empty() && timeline != dynamic_timeline;
  st.group.negotiator = spawn_negotiator(
    self->system(), negotiator_args{global_set, id.rank, st.args.metrics, tracing}, st.peers[0],
    st.group.coordinator, st.group.backend, st.timeline);
  self->monitor(st.group.negotiator);
  auto rp = self->make_response_promise<status, caf::actor>();
  const auto deadline = std::chrono::milliseconds(
    static_cast<int64_t>(st.args.cfg.start_timeout_seconds * 1000));
  self->request(st.group.backend, deadline, connect_atom::value)
    .then(
      [=](status& connected) mutable {
        rp.deliver(std::move(connected), self->state.group.negotiator);
      },
      [=](caf::error& err) mutable {
        rp.deliver(status{status_code::timeout,
                          "backend rendezvous did not complete: " +
                            self->system().render(err)},
                   caf::actor{});
      });
  return rp;
}

// A peer left. If it left because it lost another peer, that loss is the
// root cause, and it may reach us before our own heartbeat notices.
void on_bye(supervisor_actor* self, int32_t rank, status_code cause,
            const std::string& cause_text) {
  auto& st = self->state;
  if (rank < 0 || static_cast<size_t>(rank) >= st.left.size())
    return;
  st.left[static_cast<size_t>(rank)] = true;
  if (cause == status_code::peer_lost)
    abort_groups(self, {status_code::peer_lost,
                        fmt::format("{} (reported by rank {})", cause_text, rank)});
  else
    abort_groups(self, {status_code::shut_down,
                        fmt::format("rank {} has shut down, so collectives involving it "
                                    "can no longer complete.",
                                    rank)});
}

caf::result<bool> leave(supervisor_actor* self) {
  auto& st = self->state;
  abort_groups(self, {status_code::shut_down, "Troupe has been shut down on this rank."});
  // Peers learn why we leave: the first cause that broke the set.
  const auto cause = static_cast<int32_t>(st.broken->code());
  const auto cause_text = st.broken->message();
  for (auto* child : {&st.group.negotiator, &st.group.coordinator, &st.group.backend})
    if (*child)
      self->demonitor(*child);
  if (st.group.negotiator)
    self->send(st.group.negotiator, shutdown_atom::value);
  for (auto* child : {&st.group.coordinator, &st.group.backend, &st.timeline})
    if (*child)
      self->send_exit(*child, caf::exit_reason::user_shutdown);
  auto rp = self->make_response_promise<bool>();
  auto outstanding = std::make_shared<int>(0);
  auto finish = [=]() mutable {
    if (--*outstanding == 0) {
      rp.deliver(true);
      self->quit();
    }
  };
  ++*outstanding;  // released below, after every goodbye was sent
  for (size_t r = 0; r < st.peers.size(); ++r) {
    if (static_cast<int>(r) == st.args.id.rank || !st.peers[r] || st.left[r])
      continue;
    self->demonitor(st.peers[r]);
    ++*outstanding;
    self->request(st.peers[r], bye_timeout, bye_atom::value, st.args.id.rank, cause,
                  cause_text)
      .then([=](bool) mutable { finish(); }, [=](caf::error&) mutable { finish(); });
  }
  finish();
  return rp;
}

caf::behavior supervisor(supervisor_actor* self, supervisor_args args) {
  auto& st = self->state;
  const auto n = static_cast<size_t>(args.id.size);
  st.peers.resize(n);
  st.peer_addresses.resize(n);
  st.left.resize(n, false);
  st.peers[static_cast<size_t>(args.id.rank)] = caf::actor_cast<caf::actor>(self);
  st.args = std::move(args);
  // DYNAMIC: the timeline exists but writes only between start_timeline()
  // and stop_timeline().
  const auto& timeline = st.args.cfg.timeline;
  if (!timeline.empty())
    st.timeline = spawn_timeline(self->system(), timeline == dynamic_timeline
                                                   ? std::string()
                                                   : timeline_path(timeline, st.args.id.rank));
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  return {
    [=](hello_atom, int32_t rank, const caf::actor& endpoint, const std::string& address) {
      on_hello(self, rank, endpoint, address);
    },
    [=](peers_atom) -> caf::result<bool> {
      auto& st = self->state;
      if (st.known_peers == st.args.id.size - 1)
        return true;
      st.peers_waiter = self->make_response_promise<bool>();
      return *st.peers_waiter;
    },
    [=](start_atom) { return start_group(self); },
    [=](request_atom, uint32_t set, std::string& bytes) {
      route<request_atom>(self, self->state.group.coordinator, "request", set, std::move(bytes));
    },
    [=](response_atom, uint32_t set, std::string& bytes) {
      route<response_atom>(self, self->state.group.negotiator, "response", set, std::move(bytes));
    },
    [=](bye_atom, int32_t rank, int32_t cause, const std::string& cause_text) {
      on_bye(self, rank, static_cast<status_code>(cause), cause_text);
      return true;
    },
    [=](tl_start_atom, const std::string& path, bool mark_cycles) {
      return start_timeline(self, path, mark_cycles);
    },
    [=](tl_stop_atom) { return stop_timeline(self); },
    [=](shutdown_atom) { return leave(self); },
  };
}

} // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_args args) {
  return sys.spawn(supervisor, std::move(args));
}

} // namespace troupe::workers
