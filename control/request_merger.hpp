#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::control {

/// A round an inner node held for the whole hold and then sent up as it
/// came: its tensor ("cache id N" where the node cannot name it) and the
/// ranks of its subtree that had not asked for it by then.
struct late_round {
  std::string tensor;
  std::vector<std::pair<int32_t, int32_t>> missing;  // [first, end) each
};

/// `ranges` ([first, end) ranges of set ranks, in any order, disjoint)
/// sorted, with adjacent ones joined: what goes up when a held round is
/// released, one message per joined range.
std::vector<std::pair<int32_t, int32_t>>
joined_ranges(std::vector<std::pair<int32_t, int32_t>> ranges);

/// The parts of [first, end) that `covered` (as for joined_ranges) leaves
/// out.
std::vector<std::pair<int32_t, int32_t>>
missing_ranges(int32_t first, int32_t end, std::vector<std::pair<int32_t, int32_t>> covered);

/// What an inner node of the control tree does with its subtree's FULL
/// requests (a tensor not cached, or the cache off): equal requests for a
/// tensor (every field but the rank and the device ordinal, `same_collective`:
/// each rank's GPU is its own; the merged request carries the first one's)
/// are held until every rank of the subtree sent one, then go up as ONE
/// request for the range [node, subtree end) (Request.hit_ranks_end). The
/// coordinator checks it once and holds it once for the range, so an
/// uncached step costs it O(fanout) requests per tensor instead of O(N).
///
/// A round of a tensor whose requests differ (a mismatch, an allgather's
/// first dimensions), that some ranks name by cache id, or that waits past
/// `hold` (a stalled rank) goes up as it came, and so does a request with
/// a deadline (the coordinator times it from the first request it sees): what is held goes up as
/// per-range requests at once, and the rest of that round follows as it
/// arrives, so the coordinator decides errors and stalls, naming ranks, as
/// in a star. The node tracks which ranks of the subtree a round has seen
/// (full requests and hits that went up as they came): a round ends when
/// it has seen them all, when one of them asks again (a rank never asks
/// twice in one round, so that is the next round), or when the coordinator
/// answers the tensor. The answer is what ends a round that can never see
/// every rank here: ranks placed in the tree after they sent it went
/// straight to the coordinator. Without it the node's own next request
/// would complete that stale round, and every later round would wait for
/// the hold.
/// Pure logic, no actors; hit_aggregator owns one.
class request_merger {
public:
  using clock = std::chrono::steady_clock;

  request_merger(int32_t first, int32_t end, clock::duration hold);

  /// A full request (not a JOIN) from ranks [request_rank, hit_ranks_end
  /// or request_rank + 1) of the subtree: held, or appended to `up`.
  void add(const v1::Request& req, clock::time_point now, v1::RequestList& up);

  /// A cache hit for tensor `name` arrived (nullptr: a tensor the node
  /// cannot name, so it may be any): a held round of it cannot complete,
  /// so it goes up as it comes from now on.
  void arrived(const std::string* name, v1::RequestList& up);

  /// Hits of ranks [first, end) for tensor `name` went up as they came:
  /// the round has seen them.
  void hits(const std::string& name, int32_t first, int32_t end, v1::RequestList& up);

  /// Hits the node could not name were sent up with a request for `name`
  /// pending: its round goes up as it comes.
  void mixed(const std::string& name, v1::RequestList& up);

  /// The coordinator answered `name` (the node sees every response list
  /// before its subtree can ask for the tensor again): its round is over.
  /// Requests still held were not waited for (an error): they go up.
  void answered(const std::string& name, v1::RequestList& up);

  /// Sends every held request up (a JOIN: no round completes while a rank
  /// of the subtree has joined).
  void release_all(v1::RequestList& up);

  /// Whether `name` has a round in progress here.
  bool has(const std::string& name) const;

  /// Sends up the requests held past `hold` by `now`.
  void release_due(clock::time_point now, v1::RequestList& up);

  /// When release_due() will have held requests to send.
  std::optional<clock::time_point> next_deadline() const;

  /// A JOIN round ended: rounds that went up as they came while ranks had
  /// joined (and so never saw every rank) are over.
  void forget_rounds() {
    rounds_.clear();
  }

  size_t held() const {
    return held_count_;
  }
  /// No round in progress (the steady state when everything is cached).
  bool idle() const {
    return rounds_.empty();
  }

  /// Requests sent up since the last call: merged for the whole subtree,
  /// and as they came; and rounds sent up by the hold.
  struct sent_counts {
    uint64_t merged = 0;
    uint64_t passed = 0;
    uint64_t expired = 0;
  };
  sent_counts take_counts() {
    return std::exchange(counts_, {});
  }
  /// The first round the hold sent up since the last call.
  std::optional<late_round> take_late() {
    return std::exchange(late_, std::nullopt);
  }

private:
  // One tensor's current round in this subtree.
  struct round {
    // While held: the request every held range sent (its rank cleared).
    // nullopt: the round goes up as it comes.
    std::optional<v1::Request> request;
    std::vector<std::pair<int32_t, int32_t>> ranges;  // held, [first, end) each
    std::vector<bool> seen;                           // by rank - first_
    int32_t seen_count = 0;
    clock::time_point since;  // held since
  };
  using rounds = std::unordered_map<std::string, round>;

  // The round ranks [first, end) of `name` belong to, and whether it is
  // new: the current one, unless it goes up as it comes and has seen one
  // of them already.
  std::pair<rounds::iterator, bool> round_of(const std::string& name, int32_t first,
                                             int32_t end);
  // Whether the round has seen a rank of [first, end).
  bool seen(const round& r, int32_t first, int32_t end) const;
  // Makes room for a new round: rounds going up as they come are forgotten
  // past max_rounds (only their merging is lost).
  void bound();
  // Sends the held ranges up (adjacent ones as one); the rest of the round
  // goes up as it comes.
  void release(rounds::iterator it, v1::RequestList& up);
  // Sends one request up as it came.
  void pass(const v1::Request& req, v1::RequestList& up);
  // Sends `req` up for [first, end).
  void send(const v1::Request& req, int32_t first, int32_t end, v1::RequestList& up);
  // Records ranks [first, end) in the round (held ones as a range); once
  // the whole subtree was seen, sends a held round up as one request and
  // forgets the round.
  void count(rounds::iterator it, int32_t first, int32_t end, v1::RequestList& up);

  int32_t first_;
  int32_t end_;
  clock::duration hold_;
  rounds rounds_;
  // Held rounds in the order they were held (entries whose round has gone
  // or was released are skipped).
  std::deque<std::pair<clock::time_point, std::string>> order_;
  size_t held_count_ = 0;
  static constexpr size_t max_rounds = 4096;
  sent_counts counts_;
  std::optional<late_round> late_;
};

} // namespace troupe::control
