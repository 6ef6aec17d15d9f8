#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// The coordinator's bookkeeping for one process set: which member asked for
/// which tensor, and which tensors every member has asked for (ready), in the
/// order they became ready. Pure logic, no actors, so it is unit-tested alone.
class message_table {
public:
  using clock = std::chrono::steady_clock;

  /// The tensor name every rank's join() request uses (Horovod's).
  static constexpr const char* join_name = "join.noname";

  explicit message_table(int32_t set_size);

  /// Records one member's request (a JOIN marks the member joined). Returns an error text (and records
  /// nothing) for a request that can only come from a broken peer: rank out
  /// of range or the same rank asking twice for one name.
  std::optional<std::string> add(const v1::Request& request);

  /// Names that every member has requested, oldest first.
  bool has_ready() const {
    return !ready_.empty();
  }

  using requests = std::vector<std::optional<v1::Request>>;  // by set rank

  /// Removes the oldest ready tensor and returns its response: the
  /// collective to run, or an ERROR response naming what the members
  /// disagreed about. The members' requests go to `by_rank` when given
  /// (empty slots: joined ranks).
  v1::Response pop_ready(requests* by_rank = nullptr);

  /// Tensors some but not all members requested.
  size_t pending() const;

  /// Drops a pending tensor and returns the ERROR response that fails it on
  /// the ranks that submitted it (the stall inspector's shutdown).
  v1::Response abandon(const std::string& name, v1::ErrorCode code, const std::string& why);

  /// For each pending tensor requested before `older_than`, the set ranks
  /// that have not requested it yet.
  std::vector<std::pair<std::string, std::vector<int32_t>>>
  missing_ranks(clock::time_point older_than) const;

private:
  struct entry {
    std::vector<std::optional<v1::Request>> by_rank;  // empty for joined ranks
    int32_t count = 0;
    bool released = false;
    clock::time_point first_seen;
  };

  // Every rank that has not joined asked for it.
  bool is_ready(const entry& e) const;

  // Marks a tensor as ready, or holds it until the rest of its group is
  // ready too.
  void release(const std::string& name, entry& e);

  // A rank joined: it contributes zeros to allreduces from now on; when the
  // last rank joins, a JOIN response is ready.
  std::optional<std::string> join(int32_t rank);

  int32_t set_size_;
  std::unordered_map<std::string, entry> entries_;
  std::deque<std::string> ready_;
  // Ready members of groups that are not complete yet, by group name.
  std::unordered_map<std::string, std::vector<std::string>> waiting_groups_;
  std::vector<bool> joined_;
  int32_t joined_count_ = 0;
  int32_t last_joined_ = -1;
};

/// Checks that all members' requests agree and builds the response.
/// Exposed for tests; message_table::pop_ready uses it.
v1::Response make_response(const std::string& name,
                           const std::vector<std::optional<v1::Request>>& by_rank);

} // namespace troupe::coordinator
