#include "elastic/launcher/seat_assignment.hpp"

#include <gtest/gtest.h>

using namespace troupe::elastic;
using namespace troupe::elastic::launcher;

TEST(seat_assignment, first_plan_fills_hosts_in_order_up_to_max_np) {
  auto plan = assign_seats({{"a", 2}, {"b", 2}}, {}, 3);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (plan_member{new_seat, "a"}));
  EXPECT_EQ(plan[1], (plan_member{new_seat, "a"}));
  EXPECT_EQ(plan[2], (plan_member{new_seat, "b"}));
}

TEST(seat_assignment, survivors_keep_order_and_rank_zero_stays_with_them) {
  // Host "a" came back (older, no survivor): its new seats go after the
  // survivors' hosts, so rank 0 is still a survivor.
  membership_plan survivors{{5, "b"}, {7, "c"}, {6, "b"}};
  auto plan = assign_seats({{"a", 1}, {"b", 2}, {"c", 1}}, survivors, 100);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0], (plan_member{5, "b"}));
  EXPECT_EQ(plan[1], (plan_member{6, "b"}));
  EXPECT_EQ(plan[2], (plan_member{7, "c"}));
  EXPECT_EQ(plan[3], (plan_member{new_seat, "a"}));
}

TEST(seat_assignment, shrunk_and_vanished_hosts_drop_their_last_members) {
  membership_plan current{{0, "a"}, {1, "a"}, {2, "b"}};
  auto plan = assign_seats({{"a", 1}}, current, 100);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (plan_member{0, "a"}));
  EXPECT_EQ(compare_plans(current, plan), host_change::removed);
  EXPECT_EQ(compare_plans(current, assign_seats({{"a", 2}, {"b", 1}, {"c", 1}}, current, 100)),
            host_change::added);
  EXPECT_EQ(compare_plans(current, assign_seats({{"a", 2}, {"c", 1}}, current, 100)),
            host_change::mixed);
  EXPECT_EQ(compare_plans(current, assign_seats({{"a", 2}, {"b", 1}, {"c", 1}}, current, 3)),
            host_change::none);  // no room above --max-np
}

TEST(seat_assignment, identity_of_each_seat) {
  auto slots = slots_of({{0, "a"}, {1, "a"}, {2, "b"}});
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_EQ(slots[1].local_rank, 1);
  EXPECT_EQ(slots[1].local_size, 2);
  EXPECT_EQ(slots[2].host, "b");
  EXPECT_EQ(slots[2].local_rank, 0);
  EXPECT_EQ(slots[2].cross_rank, 1);
}
