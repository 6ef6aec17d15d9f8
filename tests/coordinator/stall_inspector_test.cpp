#include "coordinator/stall_inspector.hpp"

#include <gtest/gtest.h>

namespace troupe::coordinator {
namespace {

v1::Request request(int rank, const std::string& name) {
  v1::Request r;
  r.set_request_rank(rank);
  r.set_tensor_name(name);
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  return r;
}

TEST(stall_inspector, warns_once_naming_tensor_and_missing_rank) {
  message_table table{3};
  table.add(request(0, "grad.w"));
  table.add(request(2, "grad.w"));
  stall_inspector inspector{{true, 1.0, 0.0}};
  const auto now = message_table::clock::now();
  EXPECT_TRUE(inspector.check(table, now).warning.empty());  // not old enough yet
  auto later = inspector.check(table, now + std::chrono::seconds(2));
  EXPECT_NE(later.warning.find("waiting for remainder of ranks for more than 1 seconds"),
            std::string::npos);
  EXPECT_NE(later.warning.find("Missing ranks:\n1: [grad.w]"), std::string::npos);
  EXPECT_TRUE(later.to_fail.empty());  // no shutdown time
  EXPECT_TRUE(inspector.check(table, now + std::chrono::seconds(3)).warning.empty());
}

TEST(stall_inspector, lists_tensors_past_the_shutdown_time) {
  message_table table{2};
  table.add(request(0, "x"));
  stall_inspector inspector{{true, 1.0, 2.0}};
  const auto now = message_table::clock::now();
  EXPECT_TRUE(inspector.check(table, now + std::chrono::milliseconds(1500)).to_fail.empty());
  auto verdict = inspector.check(table, now + std::chrono::seconds(3));
  ASSERT_EQ(verdict.to_fail.size(), 1u);
  EXPECT_EQ(verdict.to_fail[0].first, "x");
  EXPECT_EQ(verdict.to_fail[0].second, std::vector<int32_t>{1});
  table.abandon("x", v1::ERROR_CODE_TIMEOUT, "stalled");
  auto failed = table.take_failed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(failed[0].error().code(), v1::ERROR_CODE_TIMEOUT);
  EXPECT_EQ(table.pending(), 0u);
}

TEST(stall_inspector, disabled_says_nothing) {
  message_table table{2};
  table.add(request(0, "x"));
  stall_inspector inspector{{false, 1.0, 2.0}};
  auto verdict = inspector.check(table, message_table::clock::now() + std::chrono::hours(1));
  EXPECT_TRUE(verdict.warning.empty());
  EXPECT_TRUE(verdict.to_fail.empty());
}

TEST(stall_inspector, at_most_six_names_per_rank) {
  stall_inspector inspector{{true, 60.0, 0.0}};
  stall_inspector::stalled many;
  for (int i = 0; i < 8; ++i)
    many.push_back({"t" + std::to_string(i), {3}});
  EXPECT_NE(inspector.describe(many).find("3: [t0, t1, t2, t3, t4, t5 ...]"), std::string::npos);
}

} // namespace
} // namespace troupe::coordinator
