#include "workers/slow_stop_alarm.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace troupe::workers {
namespace {

using namespace std::chrono_literals;

// A stop that outlasts several periods is reported once per period, with
// the time it has taken so far.
TEST(slow_stop_alarm, warns_every_period_while_the_stop_lasts) {
  std::atomic<int> warnings{0};
  std::atomic<int64_t> last_ms{0};
  {
    slow_stop_alarm alarm(50ms, [&](std::chrono::steady_clock::duration elapsed) {
      ++warnings;
      last_ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
    });
    std::this_thread::sleep_for(290ms);
  }
  EXPECT_GE(warnings.load(), 3);
  EXPECT_LE(warnings.load(), 6);
  EXPECT_GE(last_ms.load(), 150);
}

// A stop that ends in time says nothing, and destroying the alarm does not
// wait out its period.
TEST(slow_stop_alarm, is_silent_when_the_stop_ends_in_time) {
  std::atomic<int> warnings{0};
  const auto start = std::chrono::steady_clock::now();
  {
    slow_stop_alarm alarm(10s, [&](std::chrono::steady_clock::duration) { ++warnings; });
  }
  EXPECT_EQ(warnings.load(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

} // namespace
} // namespace troupe::workers
