#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/cached_tensor.hpp"
#include "proto/op_properties.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// The coordinator's bookkeeping for one process set: which member asked for
/// which tensor, and which tensors every member has asked for (ready), in the
/// order they became ready. Pure logic, no actors, so it is unit-tested alone.
class message_table {
public:
  using clock = std::chrono::steady_clock;

  /// The tensor name every rank's join() request uses (Horovod's).
  static constexpr const char* join_name = join_tensor_name;

  explicit message_table(int32_t set_size);

  /// Records one member's request (a JOIN marks the member joined), or the
  /// same request from every set rank in [request_rank, hit_ranks_end) when
  /// a control-tree node merged its subtree's equal requests: checked once
  /// and held once for the range. Returns an error text for a request that
  /// can only come from a broken peer: ranks out of range or a rank asking
  /// twice for one name (recorded nothing), or one that fails check_request
  /// (the tensor fails on every member that asked).
  std::optional<std::string> add(const v1::Request& request);

  /// Records that set ranks [first, end) named `tensor` by its cache id
  /// (one member, or a control-tree node's aggregate of its subtree). Its
  /// requests were checked when it entered the cache: a hit is counted, not
  /// checked or copied, and when every member named the same cached tensor
  /// its response needs no agreement check. Errors as add(); a rank that
  /// had already asked records nothing of the range.
  std::optional<std::string> add_hits(int32_t first, int32_t end,
                                      const cached_tensor_ptr& tensor);
  std::optional<std::string> add_hit(int32_t rank, const cached_tensor_ptr& tensor) {
    return add_hits(rank, rank + 1, tensor);
  }

  /// Names that every member has requested, oldest first.
  bool has_ready() const {
    return !ready_.empty();
  }

  using requests = coordinator::requests;

  /// What the members sent for a tensor: the cached tensor every one of
  /// them named by id, or else their requests (empty slots: joined ranks).
  struct sent {
    cached_tensor_ptr cached;
    requests by_rank;
  };

  /// Removes the oldest ready tensor and returns its response: the
  /// collective to run, or an ERROR response naming what the members
  /// disagreed about. What they sent goes to `out`, and the name of the
  /// group it was submitted in (empty: none) to `group`, when given.
  v1::Response pop_ready(sent* out = nullptr, std::string* group = nullptr);

  /// Tensors some but not all members requested.
  size_t pending() const;
  /// Their names, in no particular order.
  std::vector<std::string> pending_names() const;

  /// Fails a pending tensor on the ranks that submitted it (the stall
  /// inspector's shutdown, a missed deadline): an ERROR response goes to
  /// failed(). A grouped tensor takes its whole group with it, since the
  /// group can no longer run whole. The ranks that never asked still owe a
  /// request for it; when one arrives, it fails at once with the same error
  /// instead of waiting for ranks that have given up. No-op for a name
  /// that is not pending.
  void abandon(const std::string& name, v1::ErrorCode code, const std::string& why);

  /// ERROR responses decided outside readiness (abandon, a late request
  /// for an abandoned tensor), oldest first; the coordinator sends them
  /// with its next response list.
  /// Some member has joined (until every member has).
  bool any_joined() const {
    return joined_count_ > 0;
  }

  bool has_failed() const {
    return !failed_.empty();
  }
  std::vector<v1::Response> take_failed();

  /// Earliest deadline (Request.deadline_ms) of a pending tensor.
  std::optional<clock::time_point> next_deadline() const;

  /// Abandons every pending tensor whose deadline has passed by `now`,
  /// naming the ranks that did not ask for it in time; returns the errors.
  std::vector<std::string> expire(clock::time_point now);

  /// For each pending tensor requested before `older_than`, the set ranks
  /// that have not requested it yet. A grouped tensor that is ready but
  /// waits for the rest of its group is listed too, with the ranks its
  /// group still waits for.
  std::vector<std::pair<std::string, std::vector<int32_t>>>
  missing_ranks(clock::time_point older_than) const;

private:
  struct entry {
    // Requests by set rank (empty slots: not asked, or joined); not even
    // sized while every member that asked named the same `cached` tensor.
    requests by_rank;
    cached_tensor_ptr cached;
    std::vector<bool> asked;  // by set rank
    int32_t asked_count = 0;
    bool released = false;
    clock::time_point first_seen;
    std::optional<clock::time_point> deadline;
    std::string group;  // empty when not grouped
  };

  // An abandoned tensor: its error, and which ranks still owe a request.
  struct tombstone {
    v1::Response error;
    std::vector<bool> owed;
  };

  // The entry of `name`, created from the first request for it.
  entry& open(const std::string& name, const v1::Request& first);
  // Calls record(from, to) for each run of [first, end) that owes no
  // failed round of `name` (those ranks get its error instead).
  template <class Record>
  std::optional<std::string> for_each_run(const std::string& name, int32_t first, int32_t end,
                                          Record record);
  // add and add_hits for ranks that owe no failed round of the tensor.
  std::optional<std::string> record_requests(int32_t first, int32_t end,
                                             const request_ptr& request);
  std::optional<std::string> record_hits(int32_t first, int32_t end,
                                         const cached_tensor_ptr& tensor);
  // Records that ranks [first, end) asked; an error (and nothing recorded)
  // if one had already.
  std::optional<std::string> mark_asked(const std::string& name, entry& e, int32_t first,
                                        int32_t end);
  // Turns an entry of cache hits into requests, one per rank that asked.
  void materialize(entry& e) const;
  // The request every member's must agree with (the first one).
  const v1::Request& representative(const entry& e) const;

  // Every rank that has not joined asked for it.
  bool is_ready(const entry& e) const;
  // Set ranks that have neither asked for it nor joined.
  std::vector<int32_t> missing(const entry& e) const;

  // Marks a tensor as ready, or holds it until the rest of its group is
  // ready too.
  void release(const std::string& name, entry& e);

  // A rank joined: it contributes zeros to allreduces from now on; when the
  // last rank joins, a JOIN response is ready.
  std::optional<std::string> join(int32_t rank);

  // Drops one entry, queues its error, remembers who still owes it.
  void fail_entry(const std::string& name, v1::ErrorCode code, const std::string& why);

  // Fails a request that breaks check_request (only a broken or hostile
  // peer sends one: the API checks first) and whatever the other members
  // asked under its name (`request` came from set ranks [its rank, end));
  // returns the error, for the log.
  std::string reject(const v1::Request& request, const std::string& err, int32_t end);

  // Answers `rank`'s request for an abandoned tensor; false if it is not
  // one.
  bool answer_late(const std::string& name, int32_t rank);

  int32_t set_size_;
  std::unordered_map<std::string, entry> entries_;
  // Entries with a deadline: next_deadline() scans only when there are any.
  size_t with_deadline_ = 0;
  std::deque<std::string> ready_;
  // Ready members of groups that are not complete yet, by group name.
  std::unordered_map<std::string, std::vector<std::string>> waiting_groups_;
  std::vector<bool> joined_;
  int32_t joined_count_ = 0;
  int32_t last_joined_ = -1;
  std::vector<v1::Response> failed_;
  // Bounded: a rank that died owes its requests forever.
  std::unordered_map<std::string, tombstone> tombstones_;
  std::deque<std::string> tombstone_order_;
};

/// Checks that all members' requests agree and builds the response.
/// Exposed for tests; message_table::pop_ready uses it.
v1::Response make_response(const std::string& name, const requests& by_rank);

/// The response to requests known to agree (make_response without checks).
v1::Response agreed_response(const std::string& name, const requests& by_rank);

} // namespace troupe::coordinator
