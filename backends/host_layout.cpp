#include "backends/host_layout.hpp"

#include <map>

namespace troupe::backends {

host_layout layout_of(const std::vector<std::string>& host_of_rank, int rank) {
  std::map<std::string, int> index;
  host_layout l;
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    auto [it, fresh] = index.emplace(host_of_rank[r], static_cast<int>(l.rank_at.size()));
    if (fresh)
      l.rank_at.emplace_back();
    auto& ranks = l.rank_at[static_cast<size_t>(it->second)];
    if (r == rank) {
      l.host = it->second;
      l.member = static_cast<int>(ranks.size());
    }
    ranks.push_back(r);
  }
  l.hosts = static_cast<int>(l.rank_at.size());
  if (!l.rank_at.empty())
    l.members = static_cast<int>(l.rank_at[static_cast<size_t>(l.host)].size());
  for (const auto& ranks : l.rank_at)
    l.uniform = l.uniform && static_cast<int>(ranks.size()) == l.members;
  return l;
}

bool has_two_levels(const host_layout& l) {
  return l.uniform && l.hosts > 1 && l.members > 1;
}

hierarchical_split split_for_hierarchy(size_t count, size_t element_size, int members) {
  // Element sizes are 1, 2, 4 or 8: a whole number of them fills 16 bytes.
  const size_t unit = element_size < 16 ? 16 / element_size : 1;
  const auto m = static_cast<size_t>(members > 0 ? members : 1);
  hierarchical_split s;
  s.per_member = count / m / unit * unit;
  s.tail = count - s.per_member * m;
  return s;
}

std::vector<block_move> allgather_placement(const host_layout& l, size_t block) {
  std::vector<block_move> moves;
  size_t from = 0;
  for (int m = 0; m < l.members; ++m)
    for (int h = 0; h < l.hosts; ++h, from += block)
      moves.push_back({from, static_cast<size_t>(l.rank_at[static_cast<size_t>(h)]
                                                          [static_cast<size_t>(m)]) *
                               block});
  return moves;
}

} // namespace troupe::backends
