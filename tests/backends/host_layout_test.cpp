#include "backends/host_layout.hpp"

#include <gtest/gtest.h>

namespace troupe::backends {
namespace {

TEST(host_layout, groups_ranks_by_host_in_order_of_first_rank) {
  // Round-robin placement: hosts a, b, a, b, a, b.
  const std::vector<std::string> hosts{"b", "a", "b", "a", "b", "a"};
  const auto l = layout_of(hosts, 3);
  EXPECT_EQ(l.hosts, 2);
  EXPECT_EQ(l.host, 1);  // "a", first seen at rank 1
  EXPECT_EQ(l.member, 1);
  EXPECT_EQ(l.members, 3);
  EXPECT_TRUE(l.uniform);
  EXPECT_EQ(l.rank_at, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_TRUE(has_two_levels(l));
}

TEST(host_layout, falls_back_to_flat_for_one_host_one_rank_per_host_or_unequal_hosts) {
  EXPECT_FALSE(has_two_levels(layout_of({"a", "a", "a"}, 1)));
  EXPECT_FALSE(has_two_levels(layout_of({"a", "b", "c"}, 2)));
  const auto unequal = layout_of({"a", "a", "a", "b"}, 3);
  EXPECT_FALSE(unequal.uniform);
  EXPECT_EQ(unequal.members, 1);
  EXPECT_FALSE(has_two_levels(unequal));
  EXPECT_FALSE(has_two_levels(layout_of({"a"}, 0)));
}

TEST(host_layout, split_gives_aligned_equal_shares_and_a_short_tail) {
  for (size_t esize : {1, 2, 4, 8})
    for (int members : {2, 3, 4, 8})
      for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{64}, size_t{1000},
                           size_t{1} << 20, (size_t{1} << 20) + 7}) {
        const auto s = split_for_hierarchy(count, esize, members);
        SCOPED_TRACE(testing::Message() << esize << " x " << count << " on " << members);
        EXPECT_EQ(s.per_member * static_cast<size_t>(members) + s.tail, count);
        EXPECT_EQ(s.per_member * esize % 16, 0u);
        EXPECT_LT(s.tail * esize, static_cast<size_t>(members) * 16);
      }
  // 1 MiB of float32 on 4 ranks: no tail.
  const auto even = split_for_hierarchy(size_t{1} << 18, 4, 4);
  EXPECT_EQ(even.per_member, size_t{1} << 16);
  EXPECT_EQ(even.tail, 0u);
  // 10 float64 on 2 ranks: shares of 4 (32 bytes), 2 left over.
  const auto uneven = split_for_hierarchy(10, 8, 2);
  EXPECT_EQ(uneven.per_member, 4u);
  EXPECT_EQ(uneven.tail, 2u);
}

TEST(host_layout, allgather_placement_puts_every_block_at_its_ranks_place) {
  // 2 hosts x 3 ranks, round-robin: scratch holds member 0's blocks of
  // hosts 0 and 1, then member 1's, then member 2's.
  const auto l = layout_of({"b", "a", "b", "a", "b", "a"}, 0);
  const size_t block = 24;
  const auto moves = allgather_placement(l, block);
  ASSERT_EQ(moves.size(), 6u);
  // Member-major (m0,h0) = rank 0, (m0,h1) = rank 1, (m1,h0) = rank 2, ...:
  // round-robin placement needs no reordering.
  for (size_t i = 0; i < moves.size(); ++i) {
    EXPECT_EQ(moves[i].from, i * block);
    EXPECT_EQ(moves[i].to, i * block);
  }
  // Hosts in blocks (ranks 0-1 on a, 2-3 on b): member-major scratch
  // (a0, b0, a1, b1) goes to ranks 0, 2, 1, 3.
  const auto blocked = allgather_placement(layout_of({"a", "a", "b", "b"}, 0), block);
  std::vector<size_t> to;
  for (const auto& m : blocked)
    to.push_back(m.to / block);
  EXPECT_EQ(to, (std::vector<size_t>{0, 2, 1, 3}));
}

} // namespace
} // namespace troupe::backends
