#include "elastic/launcher/machine_slots.hpp"

#include <gtest/gtest.h>

namespace troupe::elastic::launcher {
namespace {

// A worker keeps its index while its process runs, whatever its local rank
// becomes: a newcomer never gets a survivor's index (and metrics port).
TEST(machine_slots, a_newcomer_takes_the_lowest_index_no_live_worker_holds) {
  machine_slots slots;
  EXPECT_EQ(slots.claim(0, ""), 0);
  EXPECT_EQ(slots.claim(1, ""), 1);
  EXPECT_EQ(slots.claim(2, ""), 2);
  slots.release(0);                 // worker 0 ended; 1 and 2 keep 1 and 2
  EXPECT_EQ(slots.claim(3, ""), 0);
  EXPECT_EQ(slots.claim(4, ""), 3);
}

TEST(machine_slots, machines_count_apart) {
  machine_slots slots;
  EXPECT_EQ(slots.claim(0, ""), 0);
  EXPECT_EQ(slots.claim(1, "10.0.0.2"), 0);
  EXPECT_EQ(slots.claim(2, "10.0.0.2"), 1);
  EXPECT_EQ(slots.claim(3, ""), 1);
  slots.release(1);
  EXPECT_EQ(slots.claim(4, "10.0.0.2"), 0);
}

} // namespace
} // namespace troupe::elastic::launcher
