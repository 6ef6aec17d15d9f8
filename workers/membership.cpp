#include "workers/membership.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "elastic/store.hpp"

namespace troupe::workers {

namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds until(clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                  std::chrono::milliseconds(1));
}

std::string member_key(const std::string& prefix, int rank) {
  return fmt::format("{}member/{}", prefix, rank);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    auto comma = text.find(',', at);
    if (comma == std::string::npos)
      comma = text.size();
    out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
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
  const auto expected_key = prefix + "expected";
  if (join.advanced)
    store.set(expected_key, fmt::format("{}", fmt::join(join.alive, ",")));
  std::vector<int> expected;
  for (const auto& r : split(store.wait_get(expected_key, until(deadline))))
    expected.push_back(std::stoi(r));
  const auto mine = std::find(expected.begin(), expected.end(), join.previous_rank);
  if (mine == expected.end())
    return {status_code::invalid_argument,
            fmt::format("reset to membership epoch {}: rank {} of the previous epoch is not "
                        "part of it (the rank that started the reset saw ranks [{}])",
                        join.epoch, join.previous_rank, fmt::join(expected, ", "))};
  store.set(member_key(prefix, join.previous_rank), join.hostname);
  std::vector<std::string> keys;
  for (auto r : expected)
    keys.push_back(member_key(prefix, r));
  if (!store.wait(keys, until(deadline))) {
    std::vector<int> missing;
    for (auto r : expected)
      if (!store.get(member_key(prefix, r)))
        missing.push_back(r);
    return {status_code::timeout,
            fmt::format("reset to membership epoch {}: previous rank(s) [{}] did not call "
                        "reset() within the start timeout (TROUPE_START_TIMEOUT)",
                        join.epoch, fmt::join(missing, ", "))};
  }
  std::vector<std::string> hosts;
  for (const auto& key : keys)
    hosts.push_back(store.get(key).value_or(""));
  layout = layout_of(hosts, static_cast<size_t>(mine - expected.begin()));
  return {};
}

} // namespace troupe::workers
