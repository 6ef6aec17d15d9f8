#include "control/control_tree.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe::control {

namespace {

// The children of the node covering [first, end): the ranks after it in at
// most `fanout` blocks, the first (size % blocks) of them one rank longer.
std::vector<int32_t> child_starts(int32_t first, int32_t end, int32_t fanout) {
  const int32_t rest = end - first - 1;
  const int32_t blocks = std::min(rest, fanout);
  std::vector<int32_t> out;
  if (blocks <= 0)
    return out;
  const int32_t size = rest / blocks, longer = rest % blocks;
  int32_t at = first + 1;
  for (int32_t b = 0; b < blocks; ++b) {
    out.push_back(at);
    at += size + (b < longer ? 1 : 0);
  }
  return out;
}

} // namespace

tree_node control_tree_node(int32_t rank, int32_t set_size, int32_t fanout) {
  if (rank < 0 || rank >= set_size)
    throw std::invalid_argument("control_tree_node: rank outside the set");
  if (fanout <= 0 || fanout >= set_size - 1)
    fanout = std::max(set_size - 1, 1);
  tree_node node{0, set_size, -1, child_starts(0, set_size, fanout)};
  while (node.rank != rank) {
    // Descend into the child whose block holds `rank`.
    const auto pos = std::upper_bound(node.children.begin(), node.children.end(), rank);
    const auto i = static_cast<size_t>(pos - node.children.begin()) - 1;
    const int32_t first = node.children[i], end = node.child_end(i);
    node = tree_node{first, end, node.rank, child_starts(first, end, fanout)};
  }
  return node;
}

} // namespace troupe::control
