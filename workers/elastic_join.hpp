#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "backends/rank_layout.hpp"
#include "elastic/elastic_plan.hpp"
#include "troupe/status.hpp"

namespace troupe::elastic {
class store_client;
}

namespace troupe::workers {

/// Where the elastic driver put this process in a membership epoch.
struct elastic_seat {
  int64_t epoch = 0;
  elastic::membership_plan plan;
  bool removed = false;  // the plan has no seat for this process
  backends::rank_layout layout;
};

/// Joins the driver's newest membership epoch, at least `first`: marks
/// this worker arrived at the reset barrier of each epoch it waits for
/// (with `me`: whether it served before, which ranks of epoch `first` - 1
/// it lost, told at `first` only), waits until
/// troupe-run publishes the plan and the epoch naming it (bounded by
/// `deadline`, naming the epoch when it passes; a plan whose epoch is not
/// written yet does not count) and finds this worker's seat in it. Gives
/// up within 250 ms once `*stop` is set (status_code::shut_down).
status await_seat(elastic::store_client& store, const std::string& job, int64_t worker_id,
                  int64_t first, const elastic::arrival& me,
                  std::chrono::steady_clock::time_point deadline, elastic_seat& seat,
                  const std::atomic<bool>* stop = nullptr);

/// After every member of `seat`'s epoch has connected (each arrived
/// first): whether one of them never served before, so the members must
/// sync state. Every member reads the same keys, so all agree.
bool has_newcomers(elastic::store_client& store, const std::string& job,
                   const elastic_seat& seat);

} // namespace troupe::workers
