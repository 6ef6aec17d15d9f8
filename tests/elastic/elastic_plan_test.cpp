#include "elastic/elastic_plan.hpp"

#include <gtest/gtest.h>

using namespace troupe::elastic;

TEST(elastic_plan, round_trips_plans_and_notices) {
  membership_plan plan{{3, "127.0.0.2"}, {0, "::1"}, {12, "node-a"}};
  EXPECT_EQ(decode_plan(encode_plan(plan)), plan);
  EXPECT_TRUE(decode_plan("").empty());
  EXPECT_THROW(decode_plan("3\n"), std::invalid_argument);
  EXPECT_THROW(decode_plan("x host\n"), std::invalid_argument);
  EXPECT_THROW(decode_plan("1 host extra\n"), std::invalid_argument);
  auto n = decode_notice(encode_notice({7, host_change::mixed}));
  ASSERT_TRUE(n);
  EXPECT_EQ(n->epoch, 7);
  EXPECT_EQ(n->change, host_change::mixed);
  EXPECT_FALSE(decode_notice("7 grown"));
  EXPECT_FALSE(decode_notice(""));
}

TEST(elastic_plan, round_trips_arrivals) {
  EXPECT_EQ(encode_arrival({false, {}}), "0");
  EXPECT_EQ(encode_arrival({true, {2, 5}}), "1 2,5");
  auto a = decode_arrival("1 2,5");
  EXPECT_TRUE(a.veteran);
  EXPECT_EQ(a.lost, (std::vector<int>{2, 5}));
  EXPECT_FALSE(decode_arrival("x").veteran);
  EXPECT_TRUE(decode_arrival("1 2,z").lost.empty());
  EXPECT_TRUE(decode_arrival("1 2,z").veteran);
}

TEST(elastic_plan, round_trips_host_states) {
  EXPECT_EQ(host_states_key("J"), "J/hosts");
  EXPECT_EQ(encode_host_states({3, 1, 2}), "3 1 2");
  EXPECT_EQ(decode_host_states("3 1 2"), (host_states{3, 1, 2}));
  EXPECT_FALSE(decode_host_states("3 1"));
  EXPECT_FALSE(decode_host_states("3 1 2 4"));
  EXPECT_FALSE(decode_host_states("3 -1 2"));
  EXPECT_FALSE(decode_host_states(""));
}
