#include "elastic/launcher/seat_assignment.hpp"

#include <algorithm>

namespace troupe::elastic::launcher {

membership_plan assign_seats(const std::vector<host_spec>& usable,
                             const membership_plan& survivors, int max_np) {
  std::vector<membership_plan> per_host(usable.size());
  int seats = 0;
  for (size_t h = 0; h < usable.size(); ++h)
    for (const auto& m : survivors)
      if (m.host == usable[h].name && static_cast<int>(per_host[h].size()) < usable[h].slots &&
          seats < max_np) {
        per_host[h].push_back(m);
        ++seats;
      }
  for (size_t h = 0; h < usable.size(); ++h)
    while (static_cast<int>(per_host[h].size()) < usable[h].slots && seats < max_np) {
      per_host[h].push_back({new_seat, usable[h].name});
      ++seats;
    }
  // Hosts with survivors first, each group in age order.
  std::vector<size_t> order(usable.size());
  for (size_t h = 0; h < order.size(); ++h)
    order[h] = h;
  auto has_survivor = [&per_host](size_t h) {
    return !per_host[h].empty() && per_host[h].front().worker_id != new_seat;
  };
  std::stable_partition(order.begin(), order.end(), has_survivor);
  membership_plan plan;
  for (auto h : order)
    plan.insert(plan.end(), per_host[h].begin(), per_host[h].end());
  return plan;
}

host_change compare_plans(const membership_plan& current, const membership_plan& next) {
  bool added = std::any_of(next.begin(), next.end(),
                           [](const auto& m) { return m.worker_id == new_seat; });
  bool removed = std::any_of(current.begin(), current.end(), [&next](const auto& m) {
    return std::find(next.begin(), next.end(), m) == next.end();
  });
  return static_cast<host_change>((added ? 1 : 0) | (removed ? 2 : 0));
}

std::vector<rank_slot> slots_of(const membership_plan& plan) {
  std::vector<host_spec> hosts;
  for (const auto& m : plan) {
    if (hosts.empty() || hosts.back().name != m.host)
      hosts.push_back({m.host, 0});
    ++hosts.back().slots;
  }
  return plan_ranks(hosts, static_cast<int>(plan.size()));
}

} // namespace troupe::elastic::launcher
