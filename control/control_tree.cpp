#include "control/control_tree.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe::control {

namespace {

// [first, end) in at most `fanout` blocks, the first (size % blocks) of
// them one longer; returns each block's start.
std::vector<int32_t> blocks(int32_t first, int32_t end, int32_t fanout) {
  const int32_t size = end - first;
  const int32_t count = std::min(size, fanout);
  std::vector<int32_t> out;
  if (count <= 0)
    return out;
  const int32_t len = size / count, longer = size % count;
  for (int32_t b = 0, at = first; b < count; ++b) {
    out.push_back(at);
    at += len + (b < longer ? 1 : 0);
  }
  return out;
}

// A node of the tree while descending: its ranks, and for a node that
// leads whole hosts, which ones ([host, host_end); -1: a node among one
// host's ranks).
struct span {
  int32_t rank, end;
  int32_t host = -1, host_end = -1;
};

// The children of `s`. A host's first rank leads its host: its host mates
// form blocks under it, and so do the leaders of the hosts after it in its
// range. Within one host, the ranks after a node form blocks under it.
std::vector<span> children_of(const span& s, const std::vector<int32_t>& starts,
                              int32_t fanout) {
  std::vector<span> out;
  const int32_t mates_end = s.host < 0 ? s.end : starts[static_cast<size_t>(s.host) + 1];
  const auto mates = blocks(s.rank + 1, mates_end, fanout);
  for (size_t i = 0; i < mates.size(); ++i)
    out.push_back({mates[i], i + 1 < mates.size() ? mates[i + 1] : mates_end});
  if (s.host >= 0) {
    const auto hosts = blocks(s.host + 1, s.host_end, fanout);
    for (size_t i = 0; i < hosts.size(); ++i) {
      const int32_t h_end = i + 1 < hosts.size() ? hosts[i + 1] : s.host_end;
      out.push_back({starts[static_cast<size_t>(hosts[i])], starts[static_cast<size_t>(h_end)],
                     hosts[i], h_end});
    }
  }
  return out;
}

} // namespace

std::vector<int32_t> host_starts(const std::vector<std::string>& hosts) {
  std::vector<int32_t> starts;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (r > 0 && hosts[r] == hosts[r - 1])
      continue;
    // A host seen before, apart from its other ranks: no contiguous ranges.
    if (std::find(hosts.begin(), hosts.begin() + static_cast<long>(r), hosts[r]) !=
        hosts.begin() + static_cast<long>(r))
      return {};
    starts.push_back(static_cast<int32_t>(r));
  }
  return starts;
}

tree_node control_tree_node(int32_t rank, int32_t set_size, int32_t fanout,
                            const std::vector<int32_t>& starts_in) {
  if (rank < 0 || rank >= set_size)
    throw std::invalid_argument("control_tree_node: rank outside the set");
  const bool star = !tree_possible(set_size, fanout);
  if (star)
    fanout = std::max(set_size - 1, 1);
  // One host when the layout is unknown, or for a star.
  std::vector<int32_t> starts =
    star || starts_in.empty() || starts_in.front() != 0 ? std::vector<int32_t>{0} : starts_in;
  starts.push_back(set_size);
  span at{0, set_size, 0, static_cast<int32_t>(starts.size()) - 1};
  int32_t parent = -1;
  auto kids = children_of(at, starts, fanout);
  while (at.rank != rank) {
    // Descend into the child whose range holds `rank`.
    const auto pos = std::upper_bound(kids.begin(), kids.end(), rank,
                                      [](int32_t r, const span& s) { return r < s.rank; });
    parent = at.rank;
    at = *std::prev(pos);
    kids = children_of(at, starts, fanout);
  }
  tree_node node{at.rank, at.end, parent, {}};
  for (const auto& k : kids)
    node.children.push_back(k.rank);
  return node;
}

} // namespace troupe::control
