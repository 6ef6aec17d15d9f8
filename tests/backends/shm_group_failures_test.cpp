// What fails a shm_group's wait, and how fast: a member aborted, exited or
// closed its side, a corrupt header, a member that never comes; and that a
// waiting member sleeps. Members are forked children (shm_group_harness.hpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "shm_group_harness.hpp"

namespace troupe::backends {
namespace {

using namespace shm_test;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// Exit statuses of the waiting member 0 of a pair.
constexpr int threw_as_expected = 0;
constexpr int completed = 10;
constexpr int too_slow = 11;
constexpr int other_error = 12;

// Member 0 allreduces while member 1 runs `partner`; 0 when member 0's
// allreduce threw an error containing `expected` within `bound`.
std::vector<int> wait_failing(const char* what, const std::string& expected,
                              std::chrono::milliseconds bound,
                              const std::function<void(shm_group&)>& first,
                              const std::function<int(shm_group&)>& partner) {
  const test_group g(what);
  return run_children(2, [&](int m) {
    auto group = join(g, m, 2);
    if (m == 1)
      return partner(group);
    std::vector<float> data(1000, 1.0f);
    std::thread side([&] { first(group); });
    const auto start = clock::now();
    int code = completed;
    try {
      group.allreduce(data.data(), data.size(), sizeof(float),
                      reduction_of(data_type::float32, reduce_op::sum), {});
    } catch (const backend_error& e) {
      code = std::string(e.what()).find(expected) == std::string::npos ? other_error
             : clock::now() - start > bound                         ? too_slow
                                                                   : threw_as_expected;
      if (code != threw_as_expected)
        std::fprintf(stderr, "member 0: %s\n", e.what());
    }
    side.join();
    return code;
  });
}

TEST(shm_group, an_abort_interrupts_a_wait_and_fails_the_other_members) {
  const auto status = wait_failing(
    "abort", "was aborted", 1500ms,
    [](shm_group& g) {
      std::this_thread::sleep_for(300ms);
      g.abort();
    },
    [](shm_group& g) {
      // Never takes part in the first allreduce, as a frozen rank; its next
      // call sees the abort at once.
      std::this_thread::sleep_for(600ms);
      float x = 1;
      try {
        g.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
      } catch (const backend_error& e) {
        return std::string(e.what()).find("was aborted") != std::string::npos ? 0 : 1;
      }
      return 1;
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

TEST(shm_group, a_member_whose_process_exits_fails_the_wait) {
  // _exit skips the group's destructor: only its process is gone.
  const auto status = wait_failing(
    "exit", "exited", 1000ms, [](shm_group&) {},
    [](shm_group&) -> int {
      std::this_thread::sleep_for(100ms);
      ::_exit(0);
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

TEST(shm_group, a_member_that_closes_its_side_fails_the_wait) {
  const auto status = wait_failing(
    "close", "closed its side", 1000ms, [](shm_group&) {},
    [](shm_group&) {
      std::this_thread::sleep_for(100ms);
      return 0;  // returning destroys the group
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

// Any process of the job's user can write into the segment. The header's
// words: magic, members, slot bytes; the failure word at byte 128.
TEST(shm_group, a_rewritten_header_is_refused_and_a_garbage_failure_word_is_an_error) {
  const test_group g("forged");
  const auto bytes = shm_group::segment_bytes(2, test_slot_bytes);
  auto creator = shm_group::create_segment(g.name, 2, test_slot_bytes);
  auto spy = shm_segment::open(g.name, bytes);
  spy.keep_name();
  auto* words = static_cast<uint64_t*>(spy.data());
  ASSERT_EQ(words[2], test_slot_bytes);
  // (A member refusing the segment would remove its name: kept here.)
  const auto opened = [&] {
    auto segment = shm_segment::open(g.name, bytes);
    segment.keep_name();
    return segment;
  };
  // Refused at once, not after waiting for the others.
  const auto refused = [&] {
    try {
      shm_group(opened(), 1, 2, 1s);
    } catch (const backend_error& e) {
      return std::string(e.what()).find("is not a group of 2 members") != std::string::npos;
    }
    return false;
  };
  // 2 x (2 + 1) x 2^63 wraps to 0: the layout's size still matches.
  words[2] = (uint64_t{1} << 63) | test_slot_bytes;
  EXPECT_TRUE(refused());
  words[2] = 0;
  EXPECT_TRUE(refused());
  words[2] = test_slot_bytes;
  // Both members join (threads of this process); then a failure word that
  // names no member.
  std::unique_ptr<shm_group> second;
  std::thread joiner([&] {
    try {
      second = std::make_unique<shm_group>(opened(), 1, 2, 5s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "member 1: " << e.what();
    }
  });
  shm_group first(std::move(creator), 0, 2, 5s);
  joiner.join();
  ASSERT_NE(second, nullptr);
  reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(spy.data()) + 128)
    ->store(uint64_t{3} << 32 | 0x7fffffffu);
  float x = 1;
  try {
    first.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
    FAIL() << "an allreduce in a failed group succeeded";
  } catch (const backend_error& e) {
    EXPECT_NE(std::string(e.what()).find("an unreadable failure word"), std::string::npos)
      << e.what();
  }
}

TEST(shm_group, a_member_that_never_comes_fails_the_join_and_leaves_no_segment) {
  const test_group g("late");
  const auto start = clock::now();
  const auto status = run_children(1, [&](int) {
    try {
      join(g, 0, 2, 300ms);
    } catch (const backend_error& e) {
      return std::string(e.what()).find("local rank 1") != std::string::npos &&
                 std::string(e.what()).find("did not arrive within 300 ms") != std::string::npos
               ? 0
               : 1;
    }
    return 1;
  });
  EXPECT_EQ(status, std::vector<int>{0});
  EXPECT_LT(clock::now() - start, 5s);
  EXPECT_FALSE(name_exists(g.name));
}

TEST(shm_group, a_waiting_member_sleeps_instead_of_spinning) {
  // Member 1 waits 500 ms for member 0: it must not burn that time on a core.
  const test_group g("idle");
  const auto status = run_children(2, [&](int m) {
    auto group = join(g, m, 2);
    float x = 1;
    const auto cpu_before = std::clock();
    if (m == 0)
      std::this_thread::sleep_for(500ms);
    group.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
    const double cpu_seconds = static_cast<double>(std::clock() - cpu_before) / CLOCKS_PER_SEC;
    if (m == 1 && cpu_seconds > 0.05) {
      std::fprintf(stderr, "member 1 used %.3f s of CPU waiting 0.5 s\n", cpu_seconds);
      return 1;
    }
    return x == 2.0f ? 0 : 1;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));
}

} // namespace
} // namespace troupe::backends
