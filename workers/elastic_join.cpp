#include "workers/elastic_join.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "elastic/membership_epoch.hpp"
#include "elastic/store.hpp"
#include "workers/membership.hpp"

namespace troupe::workers {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds first_pause{10};
constexpr std::chrono::milliseconds longest_pause{1000};
// How often await_seat looks at its `stop` while it waits.
constexpr std::chrono::milliseconds stop_poll{250};

} // namespace

status await_seat(elastic::store_client& store, const std::string& job, int64_t worker_id,
                  int64_t first, const elastic::arrival& me, clock::time_point deadline,
                  elastic_seat& seat, const std::atomic<bool>* stop) {
  const auto stopped = [&] { return stop && stop->load(); };
  // Waits are cut into stop_poll pieces where a stop may end them.
  const auto until = [&](clock::time_point t) {
    return stop ? std::min(t, clock::now() + stop_poll) : t;
  };
  int64_t target = first;
  for (;;) {
    // `me.lost` are ranks of epoch first - 1: at a later epoch's barrier
    // they would name other workers.
    store.set(elastic::arrive_key(job, target, worker_id),
              elastic::encode_arrival(target == first ? me : elastic::arrival{me.veteran, {}}));
    auto newest = elastic::epoch(store, job);
    // The plan counts only once the epoch names it: troupe-run writes the
    // plan first (once), and an epoch it never names (troupe-run stopped
    // between the two writes) is never joined. So with the plan's key
    // there and the epoch still below it, read the epoch again (10 ms
    // doubling to 1 s).
    for (auto pause = first_pause; newest < target;
         pause = std::min(2 * pause, longest_pause)) {
      if (stopped())
        return {status_code::shut_down,
                fmt::format("shutdown() was called while this worker waited for troupe-run's "
                            "membership plan for epoch {}",
                            target)};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until(deadline) - clock::now());
      if (left.count() <= 0 || !store.wait({elastic::plan_key(job, target)}, left)) {
        if (clock::now() < deadline)
          continue;  // a piece of the wait ended, not the wait
        return {status_code::timeout,
                fmt::format("troupe-run published no membership plan for epoch {} in time "
                            "(TROUPE_ELASTIC_TIMEOUT + TROUPE_RESET_TIMEOUT)",
                            target)};
      }
      newest = elastic::epoch(store, job);
      if (newest < target)
        std::this_thread::sleep_for(
          std::min<clock::duration>(pause, until(deadline) - clock::now()));
    }
    if (newest > target) {
      // Later plans supersede this one: arrive there too.
      target = newest;
      continue;
    }
    auto text = store.get(elastic::plan_key(job, target));
    if (!text)
      return {status_code::internal,
              fmt::format("the store holds epoch {} but no plan for it", target)};
    seat.epoch = target;
    try {
      seat.plan = elastic::decode_plan(*text);
    } catch (const std::invalid_argument& e) {
      return {status_code::internal, e.what()};
    }
    auto mine = std::find_if(seat.plan.begin(), seat.plan.end(),
                             [worker_id](const auto& m) { return m.worker_id == worker_id; });
    seat.removed = mine == seat.plan.end();
    if (!seat.removed) {
      std::vector<std::string> hosts;
      for (const auto& m : seat.plan)
        hosts.push_back(m.host);
      seat.layout = layout_of(hosts, static_cast<size_t>(mine - seat.plan.begin()));
    }
    return {};
  }
}

bool has_newcomers(elastic::store_client& store, const std::string& job,
                   const elastic_seat& seat) {
  auto arrived = store.list_values(elastic::arrive_prefix(job, seat.epoch));
  return std::any_of(seat.plan.begin(), seat.plan.end(), [&](const auto& m) {
    auto it = arrived.find(elastic::arrive_key(job, seat.epoch, m.worker_id));
    return it == arrived.end() || !elastic::decode_arrival(it->second).veteran;
  });
}

} // namespace troupe::workers
