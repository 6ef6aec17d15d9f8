#pragma once

// Members of a shm_group as forked children, for the shm_group tests
// (shm_group_test.cpp: the collectives; shm_group_failures_test.cpp: what
// fails a wait, and how fast).

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/shm/shm_group.hpp"

namespace troupe::backends::shm_test {

// Small slots: several rounds per tensor, and rounds above the size where
// three or more members reduce-scatter.
constexpr size_t test_slot_bytes = size_t{64} << 10;

// A group's segment name and a pipe, made before the fork, on which its
// creator tells the others that the segment is complete (as the store does
// for shm_communicator).
struct test_group {
  explicit test_group(const char* what)
      : name("/troupe-test-" + std::string(what) + "-" + std::to_string(::getpid())) {
    if (::pipe(ready) != 0)
      throw std::runtime_error("pipe failed");
  }
  ~test_group() {
    ::close(ready[0]);
    ::close(ready[1]);
  }
  std::string name;
  int ready[2];
};

bool name_exists(const std::string& name);

// Member `member` of group `g`: member 0 creates the segment, the others
// open it once it is complete.
shm_group join(const test_group& g, int member, int members,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Runs body(i) in `n` forked children and returns their exit statuses
// (128 + signal when killed, -1 when still running after 30 s: killed).
std::vector<int> run_children(int n, const std::function<int(int)>& body);

// Runs body(group, m) as member m of a fresh group of `members` forked
// children and expects each to return 0.
void expect_every_member_passes(const char* what, int members,
                                const std::function<int(shm_group&, int)>& body);

} // namespace troupe::backends::shm_test
