#include "elastic/launcher/host_plan.hpp"

#include <gtest/gtest.h>

#include <sstream>

using namespace troupe::elastic::launcher;

TEST(host_plan, parses_host_lists) {
  auto hosts = parse_host_list("a:2,b:3, c");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "a");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "b");
  EXPECT_EQ(hosts[1].slots, 3);
  EXPECT_EQ(hosts[2].name, "c");
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_THROW(parse_host_list("a:0"), plan_error);
  EXPECT_THROW(parse_host_list("a:x"), plan_error);
  EXPECT_THROW(parse_host_list(":2"), plan_error);
  EXPECT_THROW(parse_host_list(""), plan_error);
}

TEST(host_plan, parses_hostfiles) {
  std::istringstream in{"# workers\n"
                        "node1 slots=4\n"
                        "\n"
                        "node2:2   # two GPUs\n"
                        "  node3\n"};
  auto hosts = parse_hostfile(in, "hosts.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].name, "node2");
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].name, "node3");
  EXPECT_EQ(hosts[2].slots, 1);
}

TEST(host_plan, hostfile_errors_name_file_and_line) {
  std::istringstream in{"node1 slots=2\nnode2 cores=4\n"};
  try {
    parse_hostfile(in, "hosts.txt");
    FAIL() << "accepted 'cores=4'";
  } catch (const plan_error& e) {
    EXPECT_NE(std::string(e.what()).find("hosts.txt:2"), std::string::npos)
      << e.what();
  }
  std::istringstream empty{"# nothing\n\n"};
  EXPECT_THROW(parse_hostfile(empty, "empty.txt"), plan_error);
  std::istringstream bad_slots{"node1 slots=-1\n"};
  EXPECT_THROW(parse_hostfile(bad_slots, "f"), plan_error);
}

TEST(host_plan, assigns_ranks_host_by_host) {
  auto ranks = plan_ranks(parse_host_list("a:2,b:2"), 4);
  ASSERT_EQ(ranks.size(), 4u);
  struct expected {
    const char* host;
    int host_index, local_rank, local_size, cross_rank, cross_size;
  };
  expected want[] = {{"a", 0, 0, 2, 0, 2},
                     {"a", 0, 1, 2, 0, 2},
                     {"b", 1, 0, 2, 1, 2},
                     {"b", 1, 1, 2, 1, 2}};
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(ranks[r].rank, r);
    EXPECT_EQ(ranks[r].host, want[r].host);
    EXPECT_EQ(ranks[r].host_index, want[r].host_index);
    EXPECT_EQ(ranks[r].local_rank, want[r].local_rank);
    EXPECT_EQ(ranks[r].local_size, want[r].local_size);
    EXPECT_EQ(ranks[r].cross_rank, want[r].cross_rank);
    EXPECT_EQ(ranks[r].cross_size, want[r].cross_size);
  }
}

TEST(host_plan, uneven_hosts_give_uneven_cross_sizes) {
  // a:3,b:1 with 4 ranks: local rank 0 exists on both hosts, 1 and 2 only
  // on a.
  auto ranks = plan_ranks(parse_host_list("a:3,b:1"), 4);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[0].cross_size, 2);
  EXPECT_EQ(ranks[1].cross_size, 1);
  EXPECT_EQ(ranks[2].cross_size, 1);
  EXPECT_EQ(ranks[3].host, "b");
  EXPECT_EQ(ranks[3].local_rank, 0);
  EXPECT_EQ(ranks[3].local_size, 1);
  EXPECT_EQ(ranks[3].cross_rank, 1);
  EXPECT_EQ(ranks[3].cross_size, 2);
}

TEST(host_plan, fewer_ranks_than_slots_leave_later_hosts_out) {
  auto ranks = plan_ranks(parse_host_list("a:2,b:2,c:2"), 3);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[2].host, "b");
  EXPECT_EQ(ranks[2].local_size, 1);
  EXPECT_EQ(ranks[0].cross_size, 2);
  EXPECT_EQ(ranks[1].cross_size, 1);
}

TEST(host_plan, too_many_ranks_is_an_error) {
  try {
    plan_ranks(parse_host_list("a:2,b:2"), 5);
    FAIL() << "planned 5 ranks on 4 slots";
  } catch (const plan_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("5"), std::string::npos) << what;
    EXPECT_NE(what.find("4"), std::string::npos) << what;
  }
  EXPECT_THROW(plan_ranks(parse_host_list("a:2"), 0), plan_error);
  EXPECT_THROW(plan_ranks(parse_host_list("a:2,a:2"), 2), plan_error);
}

// Two listed hosts that are both this machine share its ports: their ranks
// are numbered across the machine; a remote host keeps its local ranks.
TEST(host_plan, ranks_of_local_hosts_are_numbered_per_machine) {
  auto ranks = plan_ranks(parse_host_list("localhost:2,127.0.0.2:2,far:2"), 6);
  EXPECT_EQ(ranks[3].machine_local_rank, 1);  // before: the local rank
  number_local_ranks_on_this_machine(ranks, "box");
  const int want[] = {0, 1, 2, 3, 0, 1};
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ(ranks[r].machine_local_rank, want[r]) << "rank " << r;
  EXPECT_EQ(ranks[3].local_rank, 1);  // Horovod's local rank stays per host
}

TEST(host_plan, recognises_local_hosts) {
  EXPECT_TRUE(is_local_host("localhost", "box.example.com"));
  EXPECT_TRUE(is_local_host("127.0.0.1", "box.example.com"));
  EXPECT_TRUE(is_local_host("127.0.1.1", "box.example.com"));
  EXPECT_TRUE(is_local_host("box.example.com", "box.example.com"));
  EXPECT_TRUE(is_local_host("box", "box.example.com"));
  EXPECT_FALSE(is_local_host("other", "box.example.com"));
  EXPECT_FALSE(is_local_host("10.0.0.2", "box.example.com"));
}
