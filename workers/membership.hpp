#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/rank_layout.hpp"
#include "troupe/status.hpp"

namespace troupe::elastic {
class store_client;
}

namespace troupe::workers {

/// Rank layout of member `me` among `hosts` (each member's host, in rank
/// order): rank by position, local rank among the members on the same
/// host, cross rank by host in order of first appearance.
backends::rank_layout layout_of(const std::vector<std::string>& hosts, size_t me);

/// Who takes part in a membership epoch.
struct epoch_join {
  std::string job;      // the job's store prefix (the epoch counter's)
  int64_t epoch = 0;    // the epoch joined
  bool advanced = false;  // this process moved the job to it
  /// Previous ranks that can take part (lost and shut-down ones are not),
  /// ascending, as this process saw them; the one that advanced the epoch
  /// decides.
  std::vector<int> alive;
  int previous_rank = 0;
  std::string hostname;
};

/// Joins `join.epoch` through the store and returns this process's new
/// layout. The process that advanced the epoch publishes which previous
/// ranks take part (its `alive`); each of them registers its host, and
/// once all have, ranks follow the previous ranks' order. Fails naming the
/// previous ranks that did not join by `deadline`, or when this process is
/// not one of them.
status join_epoch(elastic::store_client& store, const epoch_join& join,
                  std::chrono::steady_clock::time_point deadline,
                  backends::rank_layout& layout);

} // namespace troupe::workers
