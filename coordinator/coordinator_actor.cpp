#include "coordinator/coordinator_actor.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <google/protobuf/arena.h>
#include <spdlog/spdlog.h>

#include "autotune/step_detector.hpp"
#include "control/shm_channel.hpp"
#include "control/control_tree.hpp"
#include "proto/agreed_response.hpp"
#include "proto/fusion.hpp"
#include "coordinator/message_table.hpp"
#include "coordinator/request_intake.hpp"
#include "coordinator/response_cache.hpp"
#include "metrics/rank_metrics.hpp"
#include "proto/op_properties.hpp"

namespace troupe::coordinator {

namespace {

using namespace troupe::actors;

struct coordinator_state {
  uint32_t set_id = 0;
  int64_t epoch = 0;
  // By set rank; null until the member's (hello).
  std::vector<member_actor> members;
  std::vector<std::string> hosts;  // by set rank, from the hellos
  // The control tree: its fanout, the set ranks the coordinator sends
  // lists to (the tree passes them on to the others), and how many members
  // have yet to confirm their place in it (no list goes out before).
  int32_t tree_fanout = 0;
  std::vector<int32_t> listeners;
  size_t unplaced = 0;
  size_t members_known = 0;
  // The host's control channel (null: none), and which members use it.
  std::shared_ptr<control::channel_host> channel;
  std::vector<bool> on_channel;
  bool channel_retry_scheduled = false;
  // Since when lists have waited for room in the channel (none: they have
  // not).
  std::optional<std::chrono::steady_clock::time_point> channel_blocked_since;
  // The bytes written into the channel's response stream by then.
  uint64_t channel_written = 0;
  // The fast lane as of the last list emitted (docs/architecture.md,
  // "Agreement without the coordinator"), and the cached tensors dropped
  // since, which the next list names.
  bool lane_on = false;
  std::vector<std::string> uncached;
  // The arrival board as the last stall check saw it.
  std::vector<uint64_t> board_seen;
  std::unique_ptr<message_table> table;
  std::unique_ptr<stall_inspector> stalls;
  std::unique_ptr<response_cache> cache;
  int64_t fusion_threshold = 0;
  bool disable_group_fusion = false;
  // Response lists sent but not yet executed on this rank.
  int in_flight = 0;
  uint64_t lists_emitted = 0;
  std::chrono::microseconds cycle_time{0};
  std::chrono::steady_clock::time_point last_emit;
  bool cycle_timer_set = false;
  // When the pending deadline check fires (none scheduled: nullopt), and
  // its token: only the latest scheduled check acts.
  std::optional<message_table::clock::time_point> deadline_timer;
  uint64_t deadline_token = 0;
  // Settings changes received, applied before the next list.
  std::optional<v1::Tuning> tuning;
  // The settings the application has set (troupe::tune): the tuner's
  // changes leave them alone, even one that crossed the application's. The
  // next list names them all when they changed (ResponseList.application).
  v1::Tuning pinned;
  bool pinned_changed = false;
  // What the lists executed here moved since the settings last changed.
  list_stats sample;
  // Settings changes applied so far, and the tuner told of every executed
  // list (null without autotuning, or once it finished), with where steps
  // begin (the list in flight: whether it began one).
  uint64_t generation = 0;
  tuner_actor tuner;
  autotune::step_detector steps;
  bool in_flight_begins_step = false;
  std::shared_ptr<metrics::set_metrics> metrics;
  static constexpr const char* name = "troupe.coordinator";
};

using coordinator_self = coordinator_actor::stateful_pointer<coordinator_state>;

// Applies the waiting settings change as of list `seq` and records it in
// the list, so members switch at the same boundary. A new cache capacity
// empties the cache (members empty theirs before applying the list's ids).
// The application's settings come with the change that set them: every
// member learns them in the list that applies them.
void apply_tuning(coordinator_state& st, v1::ResponseList& list, uint64_t seq) {
  if (!st.tuning)
    return;
  if (std::exchange(st.pinned_changed, false))
    *list.mutable_application() = st.pinned;
  auto& t = *st.tuning;
  if (t.has_fusion_threshold())
    st.fusion_threshold = std::max<int64_t>(t.fusion_threshold(), 0);
  if (t.has_cycle_time_us())
    st.cycle_time = std::chrono::microseconds(std::max<int64_t>(t.cycle_time_us(), 0));
  if (t.has_cache_capacity())
    st.cache->reset(static_cast<size_t>(std::max<int64_t>(t.cache_capacity(), 0)), seq);
  *list.mutable_tuning() = std::move(t);
  st.tuning.reset();
  st.sample = {};
  ++st.generation;
}

// Merges a settings change into the one waiting for the next list.
void merge_tuning(coordinator_state& st, const v1::Tuning& change) {
  if (!st.tuning)
    st.tuning.emplace();
  st.tuning->MergeFrom(change);
}

// Clears from `change` every setting `pinned` holds.
void drop_pinned(v1::Tuning& change, const v1::Tuning& pinned) {
  const auto* reflection = pinned.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(pinned, &fields);
  for (const auto* field : fields)
    reflection->ClearField(&change, field);
}

// Applies an application's change (troupe::tune, or a reset's restore of
// the previous epoch's) at the next list and pins it: the tuner keeps it.
void pin(coordinator_self self, const v1::Tuning& change) {
  auto& st = self->state;
  merge_tuning(st, change);
  st.pinned.MergeFrom(change);
  st.pinned_changed = true;
  if (st.tuner)
    self->send(st.tuner, tune_atom::value, change.SerializeAsString());
}

// With a cycle time, lists go out at most once per cycle: returns false
// (and arranges a wake-up) when the current cycle has not elapsed yet.
bool cycle_elapsed(coordinator_self self) {
  auto& st = self->state;
  if (st.cycle_time.count() == 0)
    return true;
  const auto due = st.last_emit + st.cycle_time;
  const auto now = std::chrono::steady_clock::now();
  if (now >= due)
    return true;
  if (!st.cycle_timer_set) {
    st.cycle_timer_set = true;
    self->delayed_send(self, due - now, cycle_atom::value);
  }
  return false;
}

// A member's reader thread drains the channel whenever it is rung,
// whatever its negotiator is doing: one that has not made room for this
// long is dead or frozen without having closed its end.
constexpr auto channel_reader_deadline = std::chrono::seconds(10);

// Retries shortly what the channel could not take yet (a member reads
// slowly); the lists stay in order in the channel's queue. Past the
// deadline the members holding the room back are dropped from the channel.
void retry_channel_unless(coordinator_self self, bool written) {
  auto& st = self->state;
  if (written) {
    st.channel_blocked_since.reset();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  // Only a member that reads nothing holds the room back for the whole
  // deadline: lists still going out mean every member is reading.
  const auto taken = st.channel->written();
  if (!st.channel_blocked_since || taken != st.channel_written) {
    st.channel_blocked_since = now;
    st.channel_written = taken;
  } else if (now - *st.channel_blocked_since > channel_reader_deadline) {
    const auto dropped = st.channel->drop_slowest();
    spdlog::error("process set {}: set rank(s) {} left the control channel's response lists "
                  "unread for {} s (killed or frozen?); the coordinator no longer waits for "
                  "them there, and what they read next fails",
                  st.set_id, fmt::join(dropped, ", "), channel_reader_deadline.count());
    st.channel_blocked_since = now;
  }
  if (st.channel_retry_scheduled)
    return;
  st.channel_retry_scheduled = true;
  self->delayed_send(self, std::chrono::microseconds(200), flush_atom::value);
}

// Whether members may agree on cached allreduces on the channel's arrival
// board: every member reads the channel (so every one sees the lists and
// the agreed lists in one order), the set is a star, the cache is on, no
// tuner counts lists, and nobody has joined (a joined rank posts nothing).
bool lane_possible(const coordinator_state& st) {
  return st.channel && st.channel->board() &&
         std::all_of(st.on_channel.begin(), st.on_channel.end(), [](bool b) { return b; }) &&
         st.listeners.size() == st.members.size() && st.cache->enabled() && !st.tuner &&
         !st.table->any_joined();
}

// Drops a cached tensor as of the next list, which names it for the
// members (ResponseList.uncached_names).
void uncache(coordinator_state& st, const std::string& name) {
  st.cache->erase(name, st.lists_emitted + 1);
  st.uncached.push_back(name);
}

// Whether members agree on `cached` on the board while the lane is on.
bool on_the_lane(const cached_tensor_ptr& cached) {
  return cached && !cached->by_rank.empty() &&
         agreed_without_coordinator(*cached->by_rank.front());
}

// With the lane on, a cached tensor of the lane's reaches the coordinator
// only when its request changed or its sender's cache lagged; other members
// may have posted it on the board, where it would wait for this member for
// ever. Dropping it from the cache (the next list says so) sends them here
// too.
void uncache_asked(coordinator_state& st, const v1::RequestList& list) {
  for (const auto& req : list.requests()) {
    cached_tensor_ptr cached;
    if (req.cache_id() == 0)
      cached = st.cache->find(req.tensor_name());
    else if (auto seen = st.cache->resolve(req.cache_id(), req.request_rank(),
                                           req.cache_list() > 0 ? req.cache_list()
                                                                : list.lists_applied()))
      cached = st.cache->find(seen->name);
    if (on_the_lane(cached))
      uncache(st, cached->name);
  }
}

// The same at the list that turns the lane on: the members that asked here
// for a cached tensor of the lane's before it wait here for the rest, which
// would post it on the board once the list reaches them, each side waiting
// for the other until the stall check's uncache_waiting_arrivals (two
// checks: 10 s by default, for ever with the stall check off; steps of
// tune_reset_check hung so when the tuner stopped mid-step).
void uncache_pending(coordinator_state& st) {
  for (const auto& name : st.table->pending_names())
    if (auto cached = st.cache->find(name); on_the_lane(cached))
      uncache(st, name);
}

void try_emit(coordinator_self self) {
  auto& st = self->state;
  if (st.in_flight > 0 || st.members_known < st.members.size() || st.unplaced > 0)
    return;
  // Turning the lane off cannot wait (what members posted must come here),
  // turning it on can: it goes with the next list.
  const bool lane = lane_possible(st);
  if ((!st.table->has_ready() && !st.table->has_failed() && !st.tuning &&
       !(st.lane_on && !lane) && st.uncached.empty()) ||
      !cycle_elapsed(self))
    return;
  if (lane && !st.lane_on)
    uncache_pending(st);
  const auto seq = ++st.lists_emitted;
  v1::ResponseList list;
  list.set_process_set_id(st.set_id);
  apply_tuning(st, list, seq);
  if (lane != st.lane_on)
    spdlog::debug("process set {}: fast lane {} as of list {}", st.set_id, lane ? "on" : "off",
                  seq);
  st.lane_on = lane;
  if (lane) {
    list.mutable_fast_lane()->set_on(true);
    // The lane agrees on single calls only: without group fusion, none of
    // them fuse.
    list.mutable_fast_lane()->set_fusion_threshold(
      st.disable_group_fusion ? 0 : st.fusion_threshold);
  }
  for (auto& name : std::exchange(st.uncached, {}))
    list.add_uncached_names(std::move(name));
  for (auto& resp : st.table->take_failed())
    *list.add_responses() = std::move(resp);
  std::vector<v1::Response> ready;
  std::vector<std::string> fusion_groups;  // with group fusion off
  std::unordered_map<std::string, message_table::sent> sent;
  while (st.table->has_ready()) {
    message_table::sent members_sent;
    std::string group;
    ready.push_back(st.table->pop_ready(st.cache->enabled() ? &members_sent : nullptr,
                                        st.disable_group_fusion ? &group : nullptr));
    if (st.disable_group_fusion)
      fusion_groups.push_back(group.empty() ? "tensor " + ready.back().tensor_names(0)
                                            : "group " + group);
    if (st.cache->enabled())
      sent.emplace(ready.back().tensor_names(0), std::move(members_sent));
  }
  for (auto& resp : fuse(std::move(ready), st.fusion_threshold, fusion_groups))
    *list.add_responses() = std::move(resp);
  if (st.cache->enabled())
    record_outcome(list, sent, *st.cache, seq);
  if (st.tuner) {
    for (const auto& resp : list.responses())
      for (const auto& name : resp.tensor_names())
        st.steps.add_name(name);
    st.in_flight_begins_step = st.steps.end_list();
  }
  if (st.cache->take_first_eviction())
    spdlog::warn("A response has been evicted from cache which may indicate reduced "
                 "performance. Better performance may be obtained by disabling caching "
                 "(TROUPE_CACHE_CAPACITY=0) or increasing the cache capacity "
                 "(TROUPE_CACHE_CAPACITY>{}).",
                 st.cache->size());
  auto bytes = list.SerializeAsString();
  for (auto r : st.listeners)
    if (!st.on_channel[static_cast<size_t>(r)])
      self->send(st.members[static_cast<size_t>(r)], response_atom::value, st.epoch, st.set_id,
                 bytes);
  if (st.channel && std::find(st.on_channel.begin(), st.on_channel.end(), true) !=
                      st.on_channel.end())
    retry_channel_unless(self, st.channel->post(std::move(bytes)));
  ++st.in_flight;
  st.last_emit = std::chrono::steady_clock::now();
}

// Wakes the coordinator at the earliest deadline of a pending tensor.
void schedule_deadline_check(coordinator_self self) {
  auto& st = self->state;
  auto next = st.table->next_deadline();
  if (!next || (st.deadline_timer && *st.deadline_timer <= *next))
    return;
  st.deadline_timer = next;
  const auto wait = std::max(*next - message_table::clock::now(),
                             message_table::clock::duration::zero());
  self->delayed_send(self, wait, deadline_atom::value, ++st.deadline_token);
}

void check_deadlines(coordinator_self self, uint64_t token) {
  auto& st = self->state;
  if (token != st.deadline_token)
    return;  // superseded by an earlier deadline's check
  const auto now = message_table::clock::now();
  st.deadline_timer.reset();
  for (const auto& why : st.table->expire(now))
    spdlog::error("coordinator of set {}: {}", st.set_id, why);
  schedule_deadline_check(self);
  try_emit(self);
}

void on_requests(coordinator_self self, const std::string& bytes) {
  auto& st = self->state;
  // One arena per list: parsing hundreds of requests costs one allocation
  // block instead of several allocations per request.
  google::protobuf::Arena arena;
  auto& list = *google::protobuf::Arena::CreateMessage<v1::RequestList>(&arena);
  if (!list.ParseFromString(bytes)) {
    spdlog::error("coordinator of set {}: dropped a malformed request list ({} bytes)",
                  st.set_id, bytes.size());
    return;
  }
  // A restore first: a change in the same list came after it.
  if (list.has_restored()) {
    v1::Tuning unset = list.restored();
    drop_pinned(unset, st.pinned);
    if (unset.ByteSizeLong() > 0)
      pin(self, unset);
  }
  if (list.has_tuning())
    pin(self, list.tuning());
  if (st.lane_on)
    uncache_asked(st, list);
  for (const auto& why : take_requests(list, *st.table, *st.cache))
    spdlog::error("coordinator of set {}: ignored {}", st.set_id, why);
  st.metrics->mailbox_depth(metrics::actor_kind::coordinator, self->mailbox().size());
  schedule_deadline_check(self);
  try_emit(self);
}

// A cached allreduce some members posted on the arrival board and others
// not, unchanged since the last stall check: dropped from the cache, so
// that its posters ask the coordinator, whose stall inspector then names
// the missing ranks (and shuts it down) as for any request. Words of an
// older version of an id are leftovers of members that asked again.
void uncache_waiting_arrivals(coordinator_state& st) {
  auto now = st.channel->board()->snapshot();
  for (size_t i = 0; i < now.size() && i < st.board_seen.size(); ++i) {
    if (static_cast<uint32_t>(now[i]) == 0 || now[i] != st.board_seen[i])
      continue;
    if (auto cached = st.cache->named_in(static_cast<uint32_t>(i + 1),
                                         static_cast<uint32_t>(now[i] >> 32)))
      uncache(st, cached->name);
  }
  st.board_seen = std::move(now);
}

void check_stalls(coordinator_self self) {
  auto& st = self->state;
  if (st.lane_on)
    uncache_waiting_arrivals(st);
  auto verdict = st.stalls->check(*st.table, message_table::clock::now());
  if (!verdict.warning.empty())
    spdlog::warn("{}", verdict.warning);
  st.metrics->stall_check(st.stalls->stalled_count(), !verdict.warning.empty());
  for (const auto& [name, missing] : verdict.to_fail) {
    std::string ranks;
    for (auto r : missing)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    const auto why = fmt::format(
      "Tensor '{}' stalled: ranks [{}] did not submit it within the stall shutdown time "
      "(TROUPE_STALL_SHUTDOWN_TIME_SECONDS). Shutting it down.",
      name, ranks);
    spdlog::error("{}", why);
    st.table->abandon(name, v1::ERROR_CODE_TIMEOUT, why);
  }
  try_emit(self);
  self->delayed_send(self, st.stalls->interval(), stall_atom::value);
}

// Tells every member of a set that may have a control tree its place
// (each waits for it before its first list, control::tree_possible):
// where its lists go (its parent, or the coordinator) and which children
// it passes response lists on to (not those on the control channel: they
// read every list there). Each confirms before the first list goes out,
// so a node never gets a list before it knows its children. A member that
// does not answer in time is left as it is (the set is broken then: the
// supervisor sees the lost rank).
void place_members(coordinator_self self) {
  auto& st = self->state;
  const auto n = static_cast<int32_t>(st.members.size());
  const auto starts = control::host_starts(st.hosts);
  st.listeners = control::control_tree_node(0, n, st.tree_fanout, starts).children;
  st.listeners.insert(st.listeners.begin(), 0);
  if (!control::tree_possible(n, st.tree_fanout))
    return;  // a star: nobody waits for a place
  for (int32_t r = 1; r < n; ++r) {
    auto node = control::control_tree_node(r, n, st.tree_fanout, starts);
    caf::actor parent;
    if (node.parent > 0)
      parent = caf::actor_cast<caf::actor>(st.members[static_cast<size_t>(node.parent)]);
    std::vector<caf::actor> relay;
    for (auto c : node.children)
      if (!st.on_channel[static_cast<size_t>(c)])
        relay.push_back(caf::actor_cast<caf::actor>(st.members[static_cast<size_t>(c)]));
    ++st.unplaced;
    auto placed = [self, n, hosts = starts.size()](bool) {
      auto& st = self->state;
      if (--st.unplaced == 0)
        spdlog::info("process set {}: control tree of fanout {} over {} ranks ({}) in place; "
                     "the coordinator sends lists to {} of them",
                     st.set_id, st.tree_fanout, n,
                     hosts > 0 ? std::to_string(hosts) + " host(s)" : "hosts not contiguous",
                     st.listeners.size());
      try_emit(self);
    };
    self->request(st.members[static_cast<size_t>(r)], std::chrono::seconds(30), tree_atom::value,
                  node.parent, node.end, std::move(node.children), std::move(parent),
                  std::move(relay))
      .then(placed, [self, r, placed](caf::error& err) {
        spdlog::error("coordinator of set {}: set rank {} did not take its place in the "
                      "control tree: {}",
                      self->state.set_id, r, self->system().render(err));
        placed(false);
      });
  }
}

void on_hello(coordinator_self self, int32_t set_rank, member_actor& member, bool on_channel,
              std::string& host) {
  auto& st = self->state;
  if (set_rank < 0 || static_cast<size_t>(set_rank) >= st.members.size() ||
      st.members[static_cast<size_t>(set_rank)]) {
    spdlog::error("coordinator of set {}: ignored a second or invalid introduction of set "
                  "rank {}",
                  st.set_id, set_rank);
    return;
  }
  st.members[static_cast<size_t>(set_rank)] = std::move(member);
  st.hosts[static_cast<size_t>(set_rank)] = std::move(host);
  st.on_channel[static_cast<size_t>(set_rank)] = on_channel && st.channel;
  if (++st.members_known == st.members.size()) {
    // Every member has opened the channel or decided not to: its name can go.
    if (st.channel)
      st.channel->unlink();
    place_members(self);
  }
  try_emit(self);
}

coordinator_actor::behavior_type coordinate(coordinator_self self, uint32_t set_id,
                                            int32_t set_size, coordinator_options options,
                                            std::shared_ptr<metrics::set_metrics> metrics) {
  auto& st = self->state;
  st.metrics = std::move(metrics);
  // The gauge belongs to the set's id and outlives this coordinator (a
  // reset's set 0 reuses it, maybe coordinated elsewhere): nothing stalls
  // here before the first check or after the last.
  st.metrics->stall_check(0, false);
  self->attach_functor([m = st.metrics] { m->stall_check(0, false); });
  st.set_id = set_id;
  st.epoch = options.epoch;
  st.fusion_threshold = options.fusion_threshold;
  st.disable_group_fusion = options.disable_group_fusion;
  st.cycle_time = options.cycle_time;
  st.table = std::make_unique<message_table>(set_size);
  st.stalls = std::make_unique<stall_inspector>(options.stall);
  st.cache = std::make_unique<response_cache>(options.cache_capacity, set_size);
  st.members.resize(static_cast<size_t>(set_size));
  st.on_channel.assign(static_cast<size_t>(set_size), false);
  st.tree_fanout = options.tree_fanout;
  st.hosts.resize(static_cast<size_t>(set_size));
  if (options.control) {
    st.channel = std::move(options.control);
    if (auto* board = st.channel->board())
      st.cache->spare_if([board](uint32_t id) { return board->take_agreed(id); });
    // The reader thread holds the coordinator weakly: the channel belongs
    // to the coordinator's state and goes with it.
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
    const auto epoch = st.epoch;
    st.channel->start([weak, epoch, set_id](std::string bytes) {
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<coordinator_actor>(strong), request_atom::value, epoch,
                       set_id, std::move(bytes));
    });
  }
  if (options.stall.enabled)
    self->delayed_send(self, st.stalls->interval(), stall_atom::value);
  if (options.autotune) {
    st.tuner = spawn_tuner(self->system(), caf::actor_cast<coordinator_actor>(self),
                           std::move(*options.autotune));
    self->monitor(st.tuner);
    self->set_down_handler([=](caf::down_msg& down) {
      if (down.source == self->state.tuner.address())
        self->state.tuner = nullptr;
    });
  }
  return {
    [=](stall_atom) { check_stalls(self); },
    [=](cycle_atom) {
      self->state.cycle_timer_set = false;
      try_emit(self);
    },
    [=](hello_atom, int32_t set_rank, member_actor& member, bool on_channel, std::string& host) {
      on_hello(self, set_rank, member, on_channel, host);
    },
    [=](flush_atom) {
      self->state.channel_retry_scheduled = false;
      retry_channel_unless(self, self->state.channel->flush());
    },
    [=](request_atom, int64_t epoch, uint32_t set, const std::string& bytes) {
      if (same_epoch(self->state.epoch, epoch, "coordinator", set))
        on_requests(self, bytes);
    },
    [=](deadline_atom, uint64_t token) { check_deadlines(self, token); },
    [=](executed_atom, const list_stats& done) {
      auto& st = self->state;
      --st.in_flight;
      st.sample += done;
      if (st.tuner)
        self->send(st.tuner, executed_atom::value, st.generation, st.in_flight_begins_step,
                   done);
      try_emit(self);
    },
    [=](tune_atom, const std::string& bytes) {
      v1::Tuning change;
      if (!change.ParseFromString(bytes)) {
        spdlog::error("coordinator of set {}: dropped a malformed settings change ({} bytes)",
                      self->state.set_id, bytes.size());
        return;
      }
      drop_pinned(change, self->state.pinned);
      merge_tuning(self->state, change);
      try_emit(self);
    },
    [=](stats_atom) { return self->state.sample; },
  };
}

} // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys, uint32_t process_set_id,
                                    int32_t set_size, const coordinator_options& options,
                                    std::shared_ptr<metrics::set_metrics> metrics) {
  return sys.spawn(coordinate, process_set_id, set_size, options, std::move(metrics));
}

} // namespace troupe::coordinator
