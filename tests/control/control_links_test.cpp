// Which control connections each rank holds (control_links), and what a
// rank publishes so that every rank plans the same ones.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "control/control_links.hpp"
#include "control/control_tree.hpp"

namespace troupe::control {
namespace {

std::vector<int32_t> same_fanout(int32_t n, int32_t fanout) {
  return std::vector<int32_t>(static_cast<size_t>(n), fanout);
}

// `n` ranks on hosts of `per_host` contiguous ranks.
std::vector<std::string> hosts_of(int32_t n, int32_t per_host) {
  std::vector<std::string> out;
  for (int32_t r = 0; r < n; ++r)
    out.push_back("host" + std::to_string(r / per_host));
  return out;
}

TEST(control_links, a_small_job_is_a_full_mesh_dialled_nearest_lower_rank_first) {
  const auto links = control_links::plan(same_fanout(5, 16), hosts_of(5, 5));
  EXPECT_TRUE(links.mesh());
  EXPECT_EQ(links.dials(3), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_TRUE(links.dials(0).empty());
  EXPECT_EQ(links.neighbours(3), (std::vector<int32_t>{0, 1, 2, 4}));
  EXPECT_TRUE(links.set_contacts(3, {0, 3, 4}).empty());  // already connected
}

TEST(control_links, ranks_that_name_different_fanouts_fall_back_to_the_mesh) {
  auto fanouts = same_fanout(40, 2);
  fanouts[0] = 0;
  EXPECT_TRUE(control_links::plan(fanouts, hosts_of(40, 8)).mesh());
  fanouts[0] = 2;
  fanouts[39] = 3;
  EXPECT_TRUE(control_links::plan(fanouts, hosts_of(40, 8)).mesh());
  EXPECT_FALSE(control_links::plan(same_fanout(40, 2), hosts_of(40, 8)).mesh());
}

// The links are the global set's control tree, so the coordinator's tree
// messages go between neighbours only.
TEST(control_links, a_large_job_holds_the_global_sets_control_tree) {
  for (int32_t per_host : {1, 8, 4096}) {
    const int32_t n = 4096, fanout = 16;
    const auto hosts = hosts_of(n, per_host);
    const auto links = control_links::plan(same_fanout(n, fanout), hosts);
    ASSERT_FALSE(links.mesh());
    const auto starts = host_starts(hosts);
    std::vector<int> degree(static_cast<size_t>(n), 0);
    for (int32_t r = 0; r < n; ++r) {
      const auto node = control_tree_node(r, n, fanout, starts);
      EXPECT_EQ(links.parents()[static_cast<size_t>(r)], node.parent) << r;
      EXPECT_EQ(links.dials(r), node.parent < 0 ? std::vector<int32_t>{}
                                                : std::vector<int32_t>{node.parent});
      if (node.parent >= 0) {
        ++degree[static_cast<size_t>(r)];
        ++degree[static_cast<size_t>(node.parent)];
      }
    }
    // O(1) in N: a parent and at most `fanout` children of each kind
    // (host mates, other hosts' leaders).
    const int most = *std::max_element(degree.begin(), degree.end());
    EXPECT_LE(most, 2 * fanout + 1) << "hosts of " << per_host;
    EXPECT_EQ(links.neighbours(1).size(), static_cast<size_t>(degree[1]));
    std::printf("4,096 ranks, fanout 16, hosts of %d: at most %d control connections per rank "
                "(a mesh: 4,095)\n",
                per_host, most);
  }
}

TEST(control_links, a_lost_rank_cuts_off_the_ranks_behind_it) {
  // 7 ranks, fanout 2, one host: 0 -> {1, 4}, 1 -> {2, 3}, 4 -> {5, 6}.
  const auto links = control_links::plan(same_fanout(7, 2), hosts_of(7, 7));
  ASSERT_EQ(links.parents(), (std::vector<int32_t>{-1, 0, 1, 1, 0, 4, 4}));
  std::vector<bool> gone(7, false);
  EXPECT_TRUE(links.connected(2, 6, gone));
  gone[4] = true;
  EXPECT_FALSE(links.connected(5, 6, gone));  // siblings under the lost node
  EXPECT_FALSE(links.connected(2, 5, gone));
  EXPECT_FALSE(links.connected(4, 0, gone));  // the lost rank itself
  EXPECT_TRUE(links.connected(2, 3, gone));
  EXPECT_TRUE(links.connected(3, 0, gone));
  gone[4] = false;
  gone[0] = true;  // the root: its children's subtrees apart
  EXPECT_FALSE(links.connected(3, 5, gone));
  EXPECT_TRUE(links.connected(5, 6, gone));
  EXPECT_TRUE(links.connected(2, 1, gone));
  // A mesh loses only the rank itself.
  const control_links mesh{7};
  EXPECT_TRUE(mesh.connected(3, 5, gone));
  EXPECT_FALSE(mesh.connected(0, 5, gone));
}

TEST(control_links, a_member_of_another_set_connects_to_its_coordinator_and_set_parent) {
  // 15 ranks, fanout 2: 0 -> {1, 8}, 1 -> {2, 5}, 8 -> {9, 12}, ...
  const auto links = control_links::plan(same_fanout(15, 2), hosts_of(15, 15));
  // A star of 3 ({2, 13, 14}): each member to the coordinator, rank 2.
  EXPECT_EQ(links.set_contacts(13, {2, 13, 14}), (std::vector<int32_t>{2}));
  EXPECT_TRUE(links.set_contacts(2, {2, 13, 14}).empty());
  EXPECT_TRUE(links.set_contacts(7, {2, 13, 14}).empty());  // not a member
  // Every rank but 0 (coordinator 1, a tree of fanout 2 over 14 ranks):
  // set rank s's parent, as the set's coordinator will place it.
  std::vector<int> members(14);
  std::iota(members.begin(), members.end(), 1);
  for (int32_t s = 1; s < 14; ++s) {
    const auto node = control_tree_node(s, 14, 2, host_starts(hosts_of(14, 14)));
    const int32_t rank = members[static_cast<size_t>(s)];
    const int32_t parent = members[static_cast<size_t>(node.parent)];
    const auto contacts = links.set_contacts(rank, members);
    for (int32_t needed : {1, parent})
      EXPECT_TRUE(needed == rank || links.linked(rank, needed) ||
                  std::find(contacts.begin(), contacts.end(), needed) != contacts.end())
        << "rank " << rank << " needs " << needed;
    EXPECT_LE(contacts.size(), 2u);
  }
}

TEST(control_links, an_endpoint_round_trips_and_a_malformed_one_is_refused) {
  const published_endpoint e{"10.0.0.7:4242", 16, "node-7"};
  const auto back = published_endpoint::decode(e.encode());
  EXPECT_EQ(back.address, "10.0.0.7:4242");
  EXPECT_EQ(back.host(), "10.0.0.7");
  EXPECT_EQ(back.port(), 4242);
  EXPECT_EQ(back.fanout, 16);
  EXPECT_EQ(back.hostname, "node-7");
  EXPECT_EQ(published_endpoint::decode("[::1]:80 links=0 on=h").host(), "[::1]");
  for (const char* bad : {"", "10.0.0.7", "10.0.0.7: links=2 on=h", "h:70000 links=2 on=h",
                          "h:1x links=2 on=h", "h:1 links=two on=h", "h:1 on=h", "h:1 links=2"})
    EXPECT_THROW(published_endpoint::decode(bad), std::exception) << bad;
}

} // namespace
} // namespace troupe::control
