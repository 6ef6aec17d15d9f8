#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe::control {

/// One node of a process set's control tree. Set rank 0 (the
/// coordinator's) is the root; every node's subtree is a contiguous range of
/// set ranks starting at the node itself, so an aggregate over a subtree is
/// named by two numbers. Ranks are placed host by host, so a subtree of a
/// few ranks is mostly one host's.
struct tree_node {
  int32_t rank = 0;
  int32_t end = 1;       // the subtree is [rank, end)
  int32_t parent = -1;   // -1: the root
  // First ranks of the children's subtrees, ascending: child i covers
  // [children[i], children[i + 1]), the last one up to `end`.
  std::vector<int32_t> children;

  /// The end of child i's subtree.
  int32_t child_end(size_t i) const {
    return i + 1 < children.size() ? children[i + 1] : end;
  }
};

/// Whether a set of `set_size` may get a tree with `fanout` (else it is a
/// star). When it may, the coordinator places every member but its own,
/// and members send no list before they are placed: one sent before would
/// bypass the inner node over its sender, whose round of that tensor could
/// then never see it.
inline bool tree_possible(int32_t set_size, int32_t fanout) {
  return fanout > 0 && fanout < set_size - 1;
}

/// `rank`'s node in the tree of a set of `set_size` where every node has
/// at most `fanout` children of each kind, in equal blocks (depth
/// log_fanout). With `host_starts` (the first set rank of each host,
/// ascending from 0: hosts hold contiguous ranks) the tree follows the
/// hosts: a host's first rank leads it, its host mates are under it, and
/// the leaders of other hosts are under leaders, so each host sends one
/// aggregate over the network. Without (or with one host), the ranks after
/// a node are split into blocks under it. fanout 0 or at least
/// set_size - 1: a star, every member a child of the root.
tree_node control_tree_node(int32_t rank, int32_t set_size, int32_t fanout,
                            const std::vector<int32_t>& host_starts = {});

/// Where each host's ranks start, given every set rank's host; empty when
/// some host's ranks are not contiguous (the tree then ignores hosts).
std::vector<int32_t> host_starts(const std::vector<std::string>& hosts);

} // namespace troupe::control
