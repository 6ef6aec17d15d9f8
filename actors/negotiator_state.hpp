#pragma once

// The negotiator's state and the functions its files share (negotiator.cpp,
// negotiator_requests.cpp, negotiator_responses.cpp, fast_lane.cpp). Include
// only from those: CAF headers are expensive.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/backend_actors.hpp"
#include "actors/cache_view.hpp"
#include "actors/negotiator.hpp"
#include "actors/submission_inbox.hpp"
#include "actors/tensor_entry.hpp"
#include "control/hit_aggregator.hpp"
#include "control/shm_channel.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::metrics {
class set_metrics;
}

namespace troupe::actors::negotiation {

struct negotiator_state {
  uint32_t set_id = 0;
  int32_t set_rank = 0;
  int32_t set_size = 1;
  int64_t epoch = 0;
  // Null until the supervisor passes it on: requests wait in the outbox.
  coordinator_actor coordinator;
  coordinator_actor local_coordinator;
  // The set's control channel when the coordinator runs in another process
  // on this host (null: lists go over the network).
  std::unique_ptr<control::channel_member> channel;
  // Its arrival board (the fast lane's); null without a channel or board.
  control::arrival_board* board() const {
    return channel ? channel->board() : nullptr;
  }
  bool channel_retry_scheduled = false;
  // This rank's place in the set's control tree (none: a leaf under the
  // coordinator, as in a star): the parent its lists go to (null: the
  // coordinator), the children it passes response lists on to, and, at an
  // inner node, what it does with its subtree's lists on the way up.
  member_actor parent;
  std::vector<member_actor> children;
  std::optional<control::hit_aggregator> aggregator;
  std::chrono::milliseconds tree_hold{0};
  std::chrono::microseconds channel_poll{0};  // negotiator_args::channel_poll
  // False until the coordinator placed this rank in the control tree (or
  // the wait for it ran out): lists stay in the outbox until then (see
  // control::tree_possible), and the lists of children placed before this
  // rank wait for its place here.
  bool placed = true;
  control::hit_aggregator::clock::time_point place_deadline{};
  std::vector<std::string> early_lists;
  std::string host;
  std::optional<control::hit_aggregator::clock::time_point> hold_timer;
  bool told_aggregated = false;
  bool told_merged = false;
  // Rounds the hold sent up, and the count at which the next line that
  // says so goes out.
  uint64_t late_rounds = 0;
  uint64_t next_late_note = 1;
  backend_actors backends;
  caf::actor timeline;  // null when no timeline can be written
  bool tracing = false;   // a timeline file is open: send it events
  bool mark_cycles = false;
  std::shared_ptr<metrics::set_metrics> metrics;
  // What the API submits; (submit) says it holds something (null: only
  // (submit, batch) messages).
  std::shared_ptr<submission_inbox> inbox;
  // What the last (submit) took from it, emptied after: its buffer goes
  // back to the inbox with the next take (submission_inbox::take).
  std::vector<entry_batch> taken;
  // Every entry from submission until completion, by tensor name.
  std::unordered_map<std::string, tensor_entry_ptr> table;
  std::unordered_map<uint64_t, collective_work_ptr> in_flight;
  // negotiator_args::runs_small_works; the works run here (launch) whose
  // (executed) the list that launched them handles once it launched all
  // (ran_here_done), and whether that is under way.
  bool runs_small_works = false;
  struct ran_inline {
    uint64_t id;
    ran_here outcome;
  };
  std::vector<ran_inline> ran_here_results;
  bool handling_ran_here = false;
  // Which tensors the coordinator has cached, under which ids.
  cache_view cache;
  // The fast lane (docs/architecture.md, "Agreement without the
  // coordinator"), as of the last list applied: whether cached allreduces
  // are agreed on the channel's arrival board, and the fusion threshold
  // for the agreed lists this rank writes.
  bool lane_on = false;
  int64_t lane_fusion = 0;
  // Entries whose arrival this rank posted on the board, by cache id, with
  // the id's version posted: they wait for an agreed list, or go again once
  // a list changes their id. (By id: an agreed list names ids, and one id
  // names one tensor at a time; repost_changed drops a post as soon as a
  // list gives its id to another.)
  struct posted_arrival {
    uint64_t list = 0;
    tensor_entry_ptr entry;
  };
  std::unordered_map<uint32_t, posted_arrival> posted;
  // Arrivals this rank completed, for the next agreed list it writes: held
  // while its backends run works, as the coordinator holds its next list
  // until its rank has run the last one, so that a step's tensors go as a
  // few fused works instead of one per completion.
  std::vector<std::pair<cache_ref, tensor_entry_ptr>> completed;
  // Response lists the channel's reader thread passed on, and those
  // handled here: while they differ, or the channel holds unread bytes, a
  // list is on its way and the next agreed list waits for it.
  std::shared_ptr<std::atomic<uint64_t>> channel_delivered =
    std::make_shared<std::atomic<uint64_t>>(0);
  uint64_t channel_handled = 0;
  // await_agreed polled and no list came: it does not poll again until an
  // agreed list has been handled here (a rank ahead of its peers would
  // otherwise hold its scheduler thread through a whole burst of
  // submissions, up to 200 us each).
  bool await_spent = false;
  // Accepted but not yet sent to the coordinator (see flush_requests).
  std::vector<tensor_entry_ptr> outbox;
  bool flush_scheduled = false;
  // Works still running per received response list, oldest first, with
  // what the finished ones moved.
  struct list_progress {
    size_t remaining = 0;
    list_stats moved;
    bool agreed = false;  // an agreed list: the coordinator does not count it
  };
  std::deque<list_progress> lists_running;
  // A settings change to send with the next request list, and the previous
  // epoch's application settings (RequestList.restored).
  std::optional<v1::Tuning> tuning;
  std::optional<v1::Tuning> restored;
  // The CPU allreduce chunk tuned at run time (none: the backend's own),
  // in force from the list that set it on, as on every member.
  std::optional<size_t> fusion_chunk_bytes;
  // Where the application's settings the lists name go (null: nowhere).
  std::shared_ptr<application_tuning> application;
  uint64_t next_work_id = 1;
  // join() was called: contribute zeros to allreduces this rank lacks.
  bool joined = false;
  // Every rank joined, but works launched before the JOIN (ids up to
  // last_work) still run here: join() completes after them.
  struct due_join {
    tensor_entry_ptr entry;
    uint64_t last_work = 0;
  };
  std::optional<due_join> join_due;
  // (shutdown) arrived: stop once the backend has returned every work.
  bool stopping = false;
  std::optional<status> broken;
  static constexpr const char* name = "troupe.negotiator";
};

using negotiator_self = negotiator_actor::stateful_pointer<negotiator_state>;

// --- negotiator.cpp: the actor's behavior, its abort and shutdown

// Sends the timeline a span's begin or end ("B" / "E") for `e`.
void trace(negotiator_self self, const tensor_entry& e, const char* phase, v1::OpType op,
           bool negotiation);

// Takes the entry out of the table (unless the name belongs to a newer
// entry already) and completes its handle. By value: the caller's pointer
// may be the table's own, which the erase destroys.
void complete(negotiator_state& st, tensor_entry_ptr e, status s);

// A CYCLE_START marker on the timeline, when cycles are marked.
void mark_cycle(const negotiator_state& st);

// The table's and the mailbox's depths into the set's metrics.
void observe_depths(negotiator_state& st, negotiator_self self);

// One more response list (or agreed list, `agreed`) is done here.
void list_done(negotiator_state& st, negotiator_self self, list_stats moved, bool agreed);

// Stops the backends and this actor once (shutdown) came and no work runs.
void finish_if_stopping(negotiator_self self);

// --- negotiator_requests.cpp: the way up (submissions, request lists, the
// control tree, the control channel)

// Accepts what the API submitted (each batch whole or not at all) and
// sends it up soon.
void on_submit(negotiator_self self, const std::vector<entry_batch>& batches);

// Sends the outbox up now, or after the messages already queued.
void flush_soon(negotiator_self self);

// Retries the channel 200 µs later unless everything was `written`.
void retry_channel_unless(negotiator_self self, bool written);

// Sends the outbox up as one RequestList once the coordinator is known and
// this rank placed (an inner node: with its subtree's lists).
void flush_requests(negotiator_self self);

// A control-tree child's RequestList: goes up with the next flush.
void on_child_list(negotiator_self self, const std::string& bytes);

// Takes this rank's place in the control tree: false when refused.
bool on_placed(negotiator_self self, int32_t parent_rank, int32_t end,
               std::vector<int32_t>& children, caf::actor& parent,
               std::vector<caf::actor>& relay);

// This rank's place is settled: the lists held back for it go on.
void settle_place(negotiator_self self);

// Opens the set's control channel of this name (empty: none).
void open_channel(negotiator_self self, const std::string& name);

// --- negotiator_responses.cpp: the way down (response lists, the works
// they launch, their completion)

// Hands a negotiated work to its backend: true when it went.
bool launch(negotiator_self self, v1::Response resp, const collective_work_ptr& work);

// Runs or fails what a response list says, in its order.
void on_response_list(negotiator_self self, const std::string& bytes);

// A backend returned work `id`: completes its entries.
void on_executed(negotiator_self self, uint64_t id, status& result, const list_stats& moved);

// Handles the works launch() ran here, as their backend's (executed)
// would have been: after the list that launched them is running.
void ran_here_done(negotiator_self self);

// --- fast_lane.cpp: agreement on cached allreduces without the coordinator
// (docs/architecture.md, "Agreement without the coordinator")

enum class arrival {
  slow,     // not on the board: the request goes to the coordinator
  waiting,  // posted: an agreed list or a list changing its id follows
  agreed,   // this rank completed it: it writes the agreed list
};

// Posts this rank's arrival for a cache hit on the channel's board, or says
// that the request goes to the coordinator.
arrival post_arrival(negotiator_state& st, const tensor_entry_ptr& e, cache_ref ref);

// Writes the agreed list this rank owes, when nothing runs here.
void write_agreed(negotiator_self self);

// On a bound rank whose arrivals wait for another member's agreed list:
// polls for it on this thread for a while.
void await_agreed(negotiator_self self);

// A list read from the control channel (passed on by its reader, or taken
// by await_agreed): handled, counted as handled, and the agreed list it may
// have let this rank write, written.
void on_channel_list(negotiator_self self, const std::string& bytes);

// Asks again for what this rank posted under an id the last list changed.
void repost_changed(negotiator_self self);

// Runs an agreed list read from the channel (or written inline).
void on_agreed_list(negotiator_self self, const v1::ResponseList& list);

} // namespace troupe::actors::negotiation
