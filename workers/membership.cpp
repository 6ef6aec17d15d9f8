#include "workers/membership.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "elastic/store.hpp"

namespace troupe::workers {

namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds until(clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                  std::chrono::milliseconds(1));
}

// Sorts as the rank it names: "member/00000002".
std::string member_key(const std::string& prefix, int rank) {
  return fmt::format("{}member/{:08d}", prefix, rank);
}

} // namespace

backends::rank_layout layout_of(const std::vector<std::string>& hosts, size_t me) {
  backends::rank_layout out;
  out.rank = static_cast<int>(me);
  out.size = static_cast<int>(hosts.size());
  std::vector<std::string> order;  // hosts by first appearance
  out.local_rank = 0;
  out.local_size = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (std::find(order.begin(), order.end(), hosts[i]) == order.end())
      order.push_back(hosts[i]);
    if (hosts[i] == hosts[me]) {
      ++out.local_size;
      if (i < me)
        ++out.local_rank;
    }
  }
  out.cross_size = static_cast<int>(order.size());
  out.cross_rank =
    static_cast<int>(std::find(order.begin(), order.end(), hosts[me]) - order.begin());
  return out;
}

status join_epoch(elastic::store_client& store, const epoch_join& join,
                  clock::time_point deadline, backends::rank_layout& layout) {
  const auto prefix = fmt::format("{}/members{}/", join.job, join.epoch);
  const auto size_key = prefix + "size";
  if (join.advanced)
    store.set(size_key, std::to_string(join.alive.size()));
  const auto expected = std::stoul(store.wait_get(size_key, until(deadline)));
  store.set(member_key(prefix, join.previous_rank), join.hostname);
  std::map<std::string, std::string> members;
  // Bounded by the deadline; members register within milliseconds of each
  // other, so a short poll costs little.
  while ((members = store.list_values(prefix + "member/")).size() < expected &&
         clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (members.size() < expected) {
    std::string missing;
    for (auto r : join.alive)
      if (!members.count(member_key(prefix, r)))
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    return {status_code::timeout,
            fmt::format("reset to membership epoch {}: {} of {} ranks joined before the start "
                        "timeout (TROUPE_START_TIMEOUT); previous rank(s) [{}] did not call "
                        "reset()",
                        join.epoch, members.size(), expected, missing)};
  }
  std::vector<std::string> hosts;
  size_t me = members.size();
  for (const auto& [key, host] : members) {
    if (key == member_key(prefix, join.previous_rank))
      me = hosts.size();
    hosts.push_back(host);
  }
  if (members.size() > expected || me == members.size())
    return {status_code::invalid_argument,
            fmt::format("reset to membership epoch {}: {} ranks joined but the epoch has {}; "
                        "rank {} of the previous epoch is not part of it",
                        join.epoch, members.size(), expected, join.previous_rank)};
  layout = layout_of(hosts, me);
  return {};
}

} // namespace troupe::workers
