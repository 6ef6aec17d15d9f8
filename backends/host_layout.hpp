#pragma once

// A process set's ranks grouped by host, and the arithmetic of the
// hierarchical collectives built on that grouping (no library calls: the
// shared-memory and NCCL backends use it, and it is tested on its own).

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::backends {

/// Where one rank sits among a set's ranks grouped by host.
struct host_layout {
  int host = 0;         // index of this rank's host, in order of first rank
  int hosts = 1;
  int member = 0;       // this rank's index among its host's ranks
  int members = 1;      // ranks on this rank's host
  bool uniform = true;  // every host has `members` ranks
  /// rank_at[h][m]: the set rank of host h's m-th rank (m in rank order).
  std::vector<std::vector<int>> rank_at;
};

/// The layout of `rank` when set rank r runs on host_of_rank[r] (the
/// launcher's host names, TROUPE_HOSTNAME).
host_layout layout_of(const std::vector<std::string>& host_of_rank, int rank);

/// Whether a hierarchical collective has two levels to work on: two or more
/// hosts, each with the same number (two or more) of the set's ranks. Else
/// the flat collective is as good (one host, one rank per host) or the
/// levels do not line up (unequal hosts).
bool has_two_levels(const host_layout& l);

/// How a hierarchical allreduce of `count` elements divides them among a
/// host's `members` ranks: member m reduces elements [m * per_member,
/// (m + 1) * per_member), per_member being a multiple of 16 bytes so every
/// share starts as aligned as the buffer; the last `tail` elements (fewer
/// than members * 16 bytes' worth) are not divided: they go through the
/// set's flat allreduce. No padding, so no scratch memory.
struct hierarchical_split {
  size_t per_member = 0;
  size_t tail = 0;
};
hierarchical_split split_for_hierarchy(size_t count, size_t element_size, int members);

/// One block of a hierarchical allgather to move from scratch to result.
struct block_move {
  size_t from;  // byte offset in the scratch buffer
  size_t to;    // byte offset in the result
};

/// A hierarchical allgather of `block` bytes per rank gathers across hosts
/// first (member m of every host: blocks of hosts 0..H-1), then on the host,
/// so its scratch holds member 0's H blocks, member 1's, ...; the result
/// wants them in set-rank order. Where each block goes (members * hosts
/// moves; requires a uniform layout).
std::vector<block_move> allgather_placement(const host_layout& l, size_t block);

} // namespace troupe::backends
