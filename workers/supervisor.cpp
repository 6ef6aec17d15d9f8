#include "workers/supervisor.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/protocols.hpp"
#include "control/control_links.hpp"
#include "metrics/rank_metrics.hpp"
#include "workers/process_set_group.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;

// How long a leaving rank waits for peers to acknowledge its goodbye.
constexpr auto bye_timeout = std::chrono::seconds(1);
// How long a peer's clean goodbye (a shutdown or a reset) waits before
// failing what is pending.
constexpr auto bye_grace = std::chrono::milliseconds(250);

struct supervisor_state {
  supervisor_args args;
  // This rank's control connections (the runtime's plan, from `peers`).
  control::control_links links;
  // Endpoint per neighbour in `links` (every rank in a mesh); self at own
  // rank.
  std::vector<peer_actor> peers;
  std::vector<std::string> peer_addresses;
  std::vector<bool> left;
  // Lost, or shut down for good: not part of the next membership epoch.
  std::vector<bool> gone;
  // The supervisors of this rank's subtree in a control tree, held for the
  // epoch: CAF learnt the routes to them from these handles (see
  // relay_route). And those that came before this rank's own links.
  std::vector<caf::actor> routes;
  struct early_route {
    int32_t rank;
    caf::actor supervisor;
    caf::typed_response_promise<bool> promise;
  };
  std::vector<early_route> early_routes;
  bool route_confirmed = false;
  int known_peers = 0;
  int expected_peers = -1;  // neighbours in `links`; -1 before `peers`
  std::optional<caf::typed_response_promise<bool>> peers_waiter;
  std::map<uint32_t, process_set_group> groups;  // by set id; this rank's sets
  // Starts waiting for their backend's rendezvous, answered when this
  // supervisor leaves first (the registry would wait out its deadline).
  std::map<uint32_t, caf::typed_response_promise<status, set_entrance>> starting;
  std::optional<status> broken;
  static constexpr const char* name = "troupe.supervisor";
};

using supervisor_self = supervisor_actor::stateful_pointer<supervisor_state>;

// Bootstrap steps (routes, a set's backend rendezvous) are bounded by the
// start timeout.
std::chrono::milliseconds deadline(const supervisor_state& st) {
  return std::chrono::milliseconds(
    static_cast<int64_t>(st.args.cfg.start_timeout_seconds * 1000));
}

// start_timeline() / stop_timeline() need the timeline machinery.
const status no_dynamic_timeline{
  status_code::invalid_argument,
  "Set TROUPE_TIMELINE=DYNAMIC (or HOROVOD_TIMELINE=DYNAMIC) to enable dynamic timeline usage."};

caf::result<status> start_timeline(supervisor_self self, const std::string& path,
                                   bool mark_cycles) {
  auto& st = self->state;
  if (!st.args.timeline)
    return no_dynamic_timeline;
  auto rp = self->make_response_promise<status>();
  self->request(st.args.timeline, std::chrono::seconds(10), tl_start_atom::value, path)
    .then(
      [=](status& opened) mutable {
        if (opened.ok())
          for (const auto& [id, g] : self->state.groups)
            self->send(g.negotiator, tracing_atom::value, true, mark_cycles);
        rp.deliver(std::move(opened));
      },
      [=](caf::error& err) mutable {
        rp.deliver(status{status_code::internal,
                          "timeline did not start: " + self->system().render(err)});
      });
  return rp;
}

status stop_timeline(supervisor_self self) {
  auto& st = self->state;
  if (!st.args.timeline)
    return no_dynamic_timeline;
  for (const auto& [id, g] : st.groups)
    self->send(g.negotiator, tracing_atom::value, false, false);
  caf::anon_send(st.args.timeline, tl_stop_atom::value);
  return {};
}

// Tells set `g`'s negotiator that the set broke (`why`), after `delay`. A
// lost peer can hold a work in a library call until the library's timeout;
// the negotiator interrupts its backends for that, but may itself be the
// thread in that call (a small work it runs itself, backend_ref::run_here),
// so an immediate loss interrupts them from here too.
void abort_group(supervisor_self self, const process_set_group& g, const status& why,
                 std::chrono::milliseconds delay) {
  if (delay.count() > 0) {
    self->delayed_send(g.negotiator, delay, abort_atom::value, why);
    return;
  }
  self->send(g.negotiator, abort_atom::value, why);
  if (why.code() == status_code::peer_lost)
    for (const auto& [kind, backend] : g.backends)
      backend.interrupt();
}

// `rank` left or was lost: the sets it belongs to (the global one always)
// cannot complete their collectives; sets without it keep running. No
// rank: every set (this rank leaves). Negotiators ignore repeated aborts.
void abort_groups(supervisor_self self, status why, std::optional<int> rank = std::nullopt,
                  std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  auto& st = self->state;
  if (!st.broken || abort_escalates(*st.broken, why)) {
    if (why.code() == status_code::shut_down || why.code() == status_code::reset)
      spdlog::info("troupe rank {}: {}", st.args.id.rank, why.message());
    else
      spdlog::error("troupe rank {}: {}", st.args.id.rank, why.message());
    st.broken = why;
  }
  for (const auto& [id, g] : st.groups)
    if (!rank || std::binary_search(g.members.begin(), g.members.end(), *rank))
      abort_group(self, g, why, delay);
}

std::optional<int> peer_rank(const supervisor_state& st, const caf::actor_addr& who) {
  for (size_t r = 0; r < st.peers.size(); ++r)
    if (st.peers[r] && st.peers[r].address() == who)
      return static_cast<int>(r);
  return std::nullopt;
}

// The neighbour that sent the message being handled; nullopt for one from
// this rank's runtime or registry.
std::optional<int> sending_peer(supervisor_self self) {
  const auto& sender = self->current_sender();
  if (!sender)
    return std::nullopt;
  return peer_rank(self->state, caf::actor_cast<caf::actor_addr>(sender));
}

// With a control tree, the neighbours a message is passed on to: all but
// the one it came from (`from`; nullopt: this rank's own), so it reaches
// every rank once. A mesh needs no relay: the message went to every rank.
std::vector<peer_actor> relay_targets(const supervisor_state& st, std::optional<int> from) {
  std::vector<peer_actor> out;
  if (st.links.mesh())
    return out;
  for (size_t r = 0; r < st.peers.size(); ++r)
    if (static_cast<int>(r) != st.args.id.rank && st.peers[r] && !st.gone[r] && !st.left[r] &&
        (!from || *from != static_cast<int>(r)))
      out.push_back(st.peers[r]);
  return out;
}

template <class... Ts>
void pass_on(supervisor_self self, std::optional<int> from, const Ts&... xs) {
  for (const auto& peer : relay_targets(self->state, from))
    self->send(peer, xs...);
}

// With a control tree, the sets this rank can no longer reach every member
// of (the connections to one went through a rank that is lost or left,
// `rank`) cannot complete either, though `rank` is not among them.
void abort_cut_off(supervisor_self self, int rank, status_code code,
                   std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  auto& st = self->state;
  if (st.links.mesh())
    return;
  std::vector<bool> cut(st.gone.size());
  for (size_t r = 0; r < cut.size(); ++r)
    cut[r] = st.gone[r] || st.left[r];
  for (const auto& [id, g] : st.groups) {
    if (std::binary_search(g.members.begin(), g.members.end(), rank))
      continue;  // aborted for `rank` itself
    // A member gone itself broke the set on its own account.
    for (auto m : g.members)
      if (!cut[static_cast<size_t>(m)] && !st.links.connected(st.args.id.rank, m, cut)) {
        const status why{code, fmt::format("process set {} can no longer reach rank {}: the "
                                           "control connections to it went through rank {}, "
                                           "which {}",
                                           id, m, rank,
                                           code == status_code::peer_lost ? "was lost"
                                                                          : "has shut down")};
        if (code == status_code::peer_lost)
          spdlog::error("troupe rank {}: {}", st.args.id.rank, why.message());
        else
          spdlog::info("troupe rank {}: {}", st.args.id.rank, why.message());
        abort_group(self, g, why, delay);
        break;
      }
  }
}

// Rank `rank` was lost (`why`, as its neighbour that saw it said): every
// set it belongs to breaks, and so do the sets cut off with it.
void lose(supervisor_self self, int rank, const std::string& why, std::optional<int> from) {
  auto& st = self->state;
  st.gone[static_cast<size_t>(rank)] = true;
  pass_on(self, from, lost_atom::value, static_cast<int32_t>(rank), why);
  abort_groups(self, {status_code::peer_lost, why}, rank);
  abort_cut_off(self, rank, status_code::peer_lost);
}

void on_down(supervisor_self self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (const auto& [id, g] : st.groups)
    if (g.owns(dm.source)) {
      abort_groups(self, {status_code::internal,
                          fmt::format("an actor of process set {} stopped: {}", id,
                                      self->system().render(dm.reason))});
      return;
    }
  auto r = peer_rank(st, dm.source);
  if (!r || st.left[static_cast<size_t>(*r)] || st.gone[static_cast<size_t>(*r)])
    return;
  lose(self, *r,
       fmt::format("rank {} ({}) was lost: {} (seen by rank {}). Collectives involving it "
                   "cannot complete.",
                   *r, st.peer_addresses[static_cast<size_t>(*r)],
                   self->system().render(dm.reason), st.args.id.rank),
       *r);
}

// A loss that a neighbour passed on (control tree).
void on_lost(supervisor_self self, int32_t rank, const std::string& why) {
  auto& st = self->state;
  if (rank < 0 || static_cast<size_t>(rank) >= st.gone.size() || rank == st.args.id.rank ||
      st.gone[static_cast<size_t>(rank)] || st.left[static_cast<size_t>(rank)])
    return;
  lose(self, rank, why, sending_peer(self));
}

// Answers the runtime's (peers) once every neighbour said hello and the
// root has this rank's route (see relay_route).
void answer_peers(supervisor_self self) {
  auto& st = self->state;
  if (st.peers_waiter && st.route_confirmed && st.known_peers == st.expected_peers) {
    st.peers_waiter->deliver(true);
    st.peers_waiter.reset();
  }
}

void on_hello(supervisor_self self, int32_t rank, const peer_actor& endpoint,
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
  ++st.known_peers;
  answer_peers(self);
}

// CAF relays a message between ranks that share no connection along the
// tree, but a node learns a route only from an actor handle it receives:
// had the handle come from one side of the tree, the node would route that
// way. The global set's coordinator (the root) sends to every member, so
// every rank passes its own supervisor up to the root once its neighbours
// are known, and each ancestor then routes to it through the right child.
// `done` runs once the root has it, so every ancestor has learnt the route
// before this rank can introduce itself to any coordinator. Messages the
// other way follow the coordinator's handle, which comes down the tree
// (announce_coordinator). Other sets connect their members directly (see
// process_set_registry.cpp).
void relay_route(supervisor_self self, int32_t rank, caf::actor supervisor,
                 std::function<void(bool)> done) {
  auto& st = self->state;
  const auto parent =
    st.links.mesh() ? -1 : st.links.parents()[static_cast<size_t>(st.args.id.rank)];
  if (rank != st.args.id.rank)
    st.routes.push_back(supervisor);
  if (parent < 0) {
    done(true);
    return;
  }
  const auto& up = st.peers[static_cast<size_t>(parent)];
  if (!up) {
    done(false);
    return;
  }
  self->request(up, deadline(st), route_atom::value, rank, std::move(supervisor))
    .then([done](bool ok) { done(ok); }, [done](caf::error&) { done(false); });
}

caf::result<bool> on_route(supervisor_self self, int32_t rank, caf::actor supervisor) {
  auto& st = self->state;
  auto rp = self->make_response_promise<bool>();
  if (st.expected_peers < 0)  // a child's, before this rank's own links
    st.early_routes.push_back({rank, std::move(supervisor), rp});
  else
    relay_route(self, rank, std::move(supervisor), [rp](bool ok) mutable { rp.deliver(ok); });
  return rp;
}

// The runtime planned this rank's control connections (`parents`: the
// tree's, empty for a mesh): answers once every neighbour said hello.
caf::result<bool> await_peers(supervisor_self self, std::vector<int32_t> parents) {
  auto& st = self->state;
  try {
    st.links = control::control_links::from_parents(st.args.id.size, std::move(parents));
  } catch (const std::exception& e) {
    return caf::make_error(caf::sec::invalid_argument, e.what());
  }
  st.expected_peers = static_cast<int>(st.links.neighbours(st.args.id.rank).size());
  st.peers_waiter = self->make_response_promise<bool>();
  auto result = *st.peers_waiter;
  // The runtime dialled the parent before asking: its hello came first.
  relay_route(self, st.args.id.rank, caf::actor_cast<caf::actor>(self), [self](bool ok) {
    if (!ok)
      spdlog::warn("troupe rank {}: the root of the control tree did not confirm its route to "
                   "this rank; the global set's coordinator may not reach it",
                   self->state.args.id.rank);
    self->state.route_confirmed = true;
    answer_peers(self);
  });
  for (auto& early : std::exchange(st.early_routes, {}))
    relay_route(self, early.rank, std::move(early.supervisor),
                [rp = early.promise](bool ok) mutable { rp.deliver(ok); });
  answer_peers(self);
  return result;
}

// The coordinator's rank has connected set `set`, so every member's group
// exists: tell each member's supervisor the coordinator's handle, once
// (through this rank's own supervisor, which passes it along a control
// tree to every rank). From then on negotiators and coordinator talk
// directly (CAF routes their messages along the tree's connections).
void announce_coordinator(supervisor_self self, const process_set_group& g, uint32_t set) {
  auto& st = self->state;
  if (!st.links.mesh()) {
    self->send(self, coordinator_atom::value, st.args.epoch, set, g.serial, g.coordinator,
               g.control_channel);
    return;
  }
  for (auto r : g.members)
    self->send(st.peers[static_cast<size_t>(r)], coordinator_atom::value, st.args.epoch, set,
               g.serial, g.coordinator, g.control_channel);
}

// Passes a set's coordinator on to this rank's negotiator (and, with a
// control tree, to the other neighbours). The set may have been removed
// (or removed and its id reused) a moment ago: a late announcement is
// dropped.
void on_coordinator(supervisor_self self, int64_t epoch, uint32_t set, uint64_t serial,
                    const coordinator_actor& coordinator, const std::string& channel) {
  auto& st = self->state;
  if (!same_epoch(st.args.epoch, epoch, "supervisor", set))
    return;
  st.args.metrics->supervisor_mailbox_depth(self->mailbox().size());
  pass_on(self, sending_peer(self), coordinator_atom::value, epoch, set, serial, coordinator,
          channel);
  auto it = st.groups.find(set);
  // Along a tree, every rank hears of every set.
  if (it == st.groups.end() && !st.links.mesh())
    return;
  if (it == st.groups.end() || it->second.serial != serial) {
    spdlog::warn("troupe rank {}: dropped the coordinator of process set {} (registration {}), "
                 "which does not run here",
                 st.args.id.rank, set, serial);
    return;
  }
  self->send(it->second.negotiator, coordinator_atom::value, coordinator, channel);
}

// Starts this rank's part of process set `set_id` (global ranks `members`)
// and answers once its backend has connected to the other members. The
// rendezvous blocks, so it runs in the detached backend actor while this
// actor keeps serving messages.
caf::result<status, set_entrance> start_group(supervisor_self self, uint32_t set_id,
                                             std::vector<int> members, uint64_t serial) {
  auto& st = self->state;
  if (st.groups.count(set_id))
    return {status{status_code::invalid_argument,
                   fmt::format("process set {} is already running here", set_id)},
            set_entrance{}};
  group_spec spec;
  spec.set_id = set_id;
  spec.members = std::move(members);
  spec.serial = serial;
  spec.epoch = st.args.epoch;
  spec.id = &st.args.id;
  spec.cfg = &st.args.cfg;
  spec.store = st.args.store;
  spec.metrics = st.args.metrics;
  spec.timeline = st.args.timeline;
  if (set_id == 0)
    spec.application = st.args.application;
  process_set_group g;
  try {
    g = spawn_group(self->system(), spec);
  } catch (const std::exception& e) {
    return {status{status_code::backend, e.what()}, set_entrance{}};
  }
  for (const auto& child : g.children())
    self->monitor(child);
  if (st.broken)
    self->send(g.negotiator, abort_atom::value, *st.broken);
  st.groups.emplace(set_id, g);
  auto rp = self->make_response_promise<status, set_entrance>();
  st.starting.insert_or_assign(set_id, rp);
  // Answers the start unless leave() already did.
  auto answer = [=](status s, set_entrance entrance) {
    auto pending = self->state.starting.extract(set_id);
    if (!pending.empty())
      pending.mapped().deliver(std::move(s), std::move(entrance));
  };
  self->request(g.backends.at(device_kind::cpu).actor, deadline(st), connect_atom::value)
    .then(
      [=](status& connected) {
        if (connected.ok() && g.coordinator)
          announce_coordinator(self, g, set_id);
        answer(std::move(connected), set_entrance{g.negotiator, g.inbox});
      },
      [=](caf::error& err) {
        answer(status{status_code::timeout,
                      "backend rendezvous did not complete: " + self->system().render(err)},
               set_entrance{});
      });
  return rp;
}

// Stops this rank's part of a removed set: what is pending there fails.
void stop_group(supervisor_self self, uint32_t set_id) {
  auto& st = self->state;
  auto node = st.groups.extract(set_id);
  if (node.empty())
    return;
  auto& g = node.mapped();
  for (const auto& child : g.children())
    self->demonitor(child);
  self->send(g.negotiator, abort_atom::value,
             status{status_code::shut_down, "Process set has been removed."});
  // The negotiator stops the backend once its running works returned.
  self->send(g.negotiator, shutdown_atom::value);
  if (g.coordinator)
    self->send_exit(g.coordinator, caf::exit_reason::user_shutdown);
}

// A peer left. If it left because it lost another peer, that loss is the
// root cause, and it may reach us before our own heartbeat notices.
void on_bye(supervisor_self self, int32_t rank, status_code cause,
            const std::string& cause_text) {
  auto& st = self->state;
  if (rank < 0 || static_cast<size_t>(rank) >= st.left.size() || rank == st.args.id.rank ||
      st.left[static_cast<size_t>(rank)])
    return;
  st.left[static_cast<size_t>(rank)] = true;
  // Along a tree, to the other neighbours (a request, so each knows whom
  // it came from; the answer is not needed).
  for (const auto& peer : relay_targets(st, sending_peer(self)))
    self->request(peer, bye_timeout, bye_atom::value, rank, static_cast<int32_t>(cause),
                  cause_text)
      .then([](bool) {}, [](caf::error&) {});
  // A rank resets or shuts down once it is done with what it submitted,
  // but its goodbye can overtake the coordinator's response list for a
  // collective it took part in (messages from different ranks are not
  // ordered): such lists get time to arrive before what waits fails.
  // Failed at once, that collective failed here after the leaver had run
  // it (3 ranks, a broadcast then reset() each step, a busy core beside
  // them: 9 of 300 steps on rank 0).
  if (cause == status_code::reset) {
    abort_groups(self,
                 {status_code::reset,
                  fmt::format("rank {} is resetting the job to a new membership epoch; call "
                              "reset() to follow it.",
                              rank)},
                 rank, bye_grace);
    return;
  }
  st.gone[static_cast<size_t>(rank)] = true;
  if (cause == status_code::peer_lost)
    abort_groups(self, {status_code::peer_lost,
                        fmt::format("{} (reported by rank {})", cause_text, rank)});
  else
    abort_groups(self,
                 {status_code::shut_down,
                  fmt::format("rank {} has shut down, so collectives involving it "
                              "can no longer complete.",
                              rank)},
                 rank, bye_grace);
  abort_cut_off(self, rank,
                cause == status_code::peer_lost ? status_code::peer_lost : status_code::shut_down,
                bye_grace);
}

// Stops every group and tells the peers why (`why`; for a shutdown, the
// first cause that broke the set). A shutdown waits for the peers'
// acknowledgements, since the process may exit next, except from peers
// already lost; a reset does not: the connections stay, and the peers are
// resetting too. `done` answers the
// caller; then the supervisor stops.
void leave(supervisor_self self, const status& why, std::function<void()> done) {
  auto& st = self->state;
  abort_groups(self, why);
  const bool resetting = why.code() == status_code::reset;
  // A lost peer is the root cause peers should hear of; otherwise why we
  // leave (not a peer's reset that broke the set before).
  const auto& told =
    !resetting && st.broken->code() == status_code::peer_lost ? *st.broken : why;
  const auto cause = static_cast<int32_t>(told.code());
  const auto cause_text = told.message();
  for (auto& [id, rp] : std::exchange(st.starting, {}))
    rp.deliver(status{why.code(), "process set " + std::to_string(id) +
                                    " did not start: " + why.message()},
               set_entrance{});
  std::vector<uint32_t> ids;
  for (const auto& [id, g] : st.groups)
    ids.push_back(id);
  for (auto id : ids)
    stop_group(self, id);
  auto outstanding = std::make_shared<int>(0);
  auto finish = [=]() mutable {
    if (--*outstanding == 0) {
      done();
      self->quit();
    }
  };
  ++*outstanding;  // released below, after every goodbye was sent
  for (size_t r = 0; r < st.peers.size(); ++r) {
    if (static_cast<int>(r) == st.args.id.rank || !st.peers[r] || st.left[r])
      continue;
    self->demonitor(st.peers[r].address());
    // A lost peer (frozen, or its connection broke) is told without waiting
    // for an answer that would only come from a false alarm.
    if (resetting || st.gone[r]) {
      caf::anon_send(st.peers[r], bye_atom::value, st.args.id.rank, cause, cause_text);
      continue;
    }
    ++*outstanding;
    self->request(st.peers[r], bye_timeout, bye_atom::value, st.args.id.rank, cause,
                  cause_text)
      .then([=](bool) mutable { finish(); }, [=](caf::error&) mutable { finish(); });
  }
  finish();
}

supervisor_actor::behavior_type supervise(supervisor_self self, supervisor_args args) {
  auto& st = self->state;
  const auto n = static_cast<size_t>(args.id.size);
  st.peers.resize(n);
  st.peer_addresses.resize(n);
  st.left.resize(n, false);
  st.gone.resize(n, false);
  st.peers[static_cast<size_t>(args.id.rank)] = caf::actor_cast<supervisor_actor>(self);
  st.links = control::control_links{args.id.size};
  st.args = std::move(args);
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  return {
    [=](hello_atom, int32_t rank, const peer_actor& endpoint, const std::string& address) {
      on_hello(self, rank, endpoint, address);
    },
    [=](peers_atom, std::vector<int32_t>& parents) {
      return await_peers(self, std::move(parents));
    },
    [=](start_atom, uint32_t set_id, std::vector<int>& members, uint64_t serial) {
      return start_group(self, set_id, std::move(members), serial);
    },
    [=](stop_atom, uint32_t set_id) -> bool {
      stop_group(self, set_id);
      return true;
    },
    [=](coordinator_atom, int64_t epoch, uint32_t set, uint64_t serial,
        const coordinator_actor& coordinator, const std::string& channel) {
      on_coordinator(self, epoch, set, serial, coordinator, channel);
    },
    [=](bye_atom, int32_t rank, int32_t cause, const std::string& cause_text) -> bool {
      on_bye(self, rank, static_cast<status_code>(cause), cause_text);
      return true;
    },
    [=](lost_atom, int32_t rank, const std::string& why) { on_lost(self, rank, why); },
    [=](route_atom, int32_t rank, caf::actor& supervisor) {
      return on_route(self, rank, std::move(supervisor));
    },
    [=](tl_start_atom, const std::string& path, bool mark_cycles) {
      return start_timeline(self, path, mark_cycles);
    },
    [=](tl_stop_atom) { return stop_timeline(self); },
    [=](shutdown_atom) -> caf::result<bool> {
      auto rp = self->make_response_promise<bool>();
      leave(self, {status_code::shut_down, "Troupe has been shut down on this rank."},
            [rp]() mutable { rp.deliver(true); });
      return rp;
    },
    // Answers with the ranks that can take part in the next epoch (this
    // one, and every peer neither lost nor shut down), then leaves.
    [=](reset_atom, int64_t next_epoch) -> caf::result<std::vector<int>> {
      auto& st = self->state;
      std::vector<int> alive;
      for (size_t r = 0; r < st.gone.size(); ++r)
        if (!st.gone[r])
          alive.push_back(static_cast<int>(r));
      auto rp = self->make_response_promise<std::vector<int>>();
      leave(self,
            {status_code::reset, fmt::format("Troupe is resetting rank {} to membership epoch "
                                             "{}; retry after reset().",
                                             st.args.id.rank, next_epoch)},
            [rp, alive]() mutable { rp.deliver(alive); });
      return rp;
    },
  };
}

} // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_args args) {
  return sys.spawn(supervise, std::move(args));
}

} // namespace troupe::workers
