#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/control_tree.hpp"
#include "control/request_merger.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::control {

/// What an inner node of the control tree does with the RequestLists of its
/// subtree (its own member's and its children's aggregates) before they go
/// up: cache hits are held until every rank of the subtree named the same
/// tensor, then go up as ONE hit for the whole range, so in the steady
/// state (everything cached) the coordinator receives one message per
/// child of the root per step instead of one per rank. Pure logic, no
/// actors.
///
/// Nothing is held for ever, so nothing the coordinator must see is hidden
/// from it: a full request (a miss, changed parameters, a join) takes the
/// held hits of the same tensor up with it (of every tensor for a join,
/// and those whose tensor the node cannot name), as per-range hits, and
/// the rest of that round of the tensor follows as it arrives; a hit held
/// longer than `hold` goes up the same way (a stalled rank: the
/// coordinator's stall inspector then names the missing ranks). Full
/// requests themselves are merged by a request_merger when the whole
/// subtree sent equal ones, and go up as they came otherwise (a join at
/// once). Every hit and request reaches the coordinator exactly once,
/// merged or not; which way only changes how many messages carry it.
///
/// Hits are keyed by (cache id, the list that last named it): every member
/// that applied that list means the same tensor by it. Members a list
/// behind may mean another tensor by the same id; their key differs, so
/// they are never merged (at worst they wait for the hold).
class hit_aggregator {
public:
  using clock = std::chrono::steady_clock;

  /// The tensor a cache id meant as of the list that named it, as this
  /// node's member knows it (null: it does not know), valid for the call.
  using name_lookup = std::function<const std::string*(uint32_t id, uint64_t list)>;

  hit_aggregator(tree_node node, clock::duration hold, name_lookup name_of = nullptr);

  /// A RequestList from the node's own member or one of its children.
  void add(const v1::RequestList& list, clock::time_point now);

  /// What goes up now, if anything: one RequestList from this node's
  /// subtree. Hits held past `hold` by `now` are included.
  std::optional<v1::RequestList> take(clock::time_point now);

  /// When take() will have held hits to send without new input.
  std::optional<clock::time_point> next_deadline() const;

  /// A response list reached this node (before its subtree, which cannot
  /// ask for its tensors again before it): the merger's rounds of its
  /// tensors are over. True when that sent held requests up (take() has
  /// them).
  bool answered(const v1::ResponseList& list);

  /// A JOIN round ended on this rank: hits are aggregated again (while a
  /// rank of the subtree has joined, it sends no hits, so none complete).
  void join_ended() {
    joined_ = false;
    merger_.forget_rounds();
  }

  /// Tensors held: by cache id, and in full (request_merger).
  size_t held() const {
    return held_.size() + merger_.held();
  }
  /// The end of the node's subtree, [its rank, end).
  int32_t subtree_end() const {
    return node_.end;
  }
  /// Hits sent up since the last call: for the whole subtree, and as
  /// they came (one per hit or range).
  struct sent_counts {
    uint64_t aggregated = 0;
    uint64_t passed = 0;
    uint64_t expired = 0;  // held keys the hold sent up
  };
  sent_counts take_counts() {
    return std::exchange(counts_, {});
  }
  /// The first round of hits, else of full requests, that the hold sent
  /// up since the last call.
  std::optional<late_round> take_late();
  /// Full requests sent up since the last call (request_merger).
  request_merger::sent_counts take_request_counts() {
    return merger_.take_counts();
  }

private:
  using key = std::pair<uint32_t, uint64_t>;  // cache id, list that named it
  struct pending {
    std::vector<std::pair<int32_t, int32_t>> ranges;  // [first, end) each
    int32_t count = 0;
    uint64_t progress = UINT64_MAX;  // least lists_applied of the senders
    clock::time_point since;
    std::optional<std::string> name;  // nullopt: unknown here
  };

  // The child whose subtree holds `rank` (0: this node's own member).
  size_t sender_slot(int32_t rank) const;
  // Forgets a held key (after sending what it held).
  void forget(std::map<key, pending>::iterator it);
  // Sends a hit of [first, end) for key `k` up.
  void send_hit(const key& k, int32_t first, int32_t end);
  // Sends one hit up as it came (with the key's list and its range end).
  void pass_up(const v1::Request& req, const key& k, int32_t end);
  // Sends a held tensor's ranges up one by one; the rest of its round
  // follows as it arrives (and the merger counts its ranks).
  void release(const key& k, pending& p);
  void hit(const v1::Request& req, uint64_t lists_applied, clock::time_point now);
  uint64_t progress() const;

  tree_node node_;
  clock::duration hold_;
  name_lookup name_of_;
  request_merger merger_;
  // What goes up at the next take().
  v1::RequestList out_;
  std::map<key, pending> held_;
  // Held keys in the order they were first held, for the hold (entries
  // whose key has gone, or was held again later, are skipped), and the
  // held hits' progress: take() and progress() need not scan held_.
  std::deque<std::pair<clock::time_point, key>> order_;
  std::multiset<uint64_t> held_progress_;
  // Per id, the list of the round whose hits go up as they come.
  std::unordered_map<uint32_t, uint64_t> direct_;
  // Per tensor name, the latest state a member of the subtree had applied
  // when it sent the tensor in full: hits naming a list up to it belong to
  // a round that rank will not hit. Bounded; forgetting only delays.
  static constexpr size_t max_missed = 4096;
  std::unordered_map<std::string, uint64_t> missed_;
  // Lists applied, as last reported: this node's member, then each child.
  std::vector<uint64_t> applied_;
  bool joined_ = false;
  sent_counts counts_;
  std::optional<late_round> late_;
};

} // namespace troupe::control
