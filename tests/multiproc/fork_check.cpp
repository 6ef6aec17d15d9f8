// A child fork()ed after init() while a collective of its parent is still
// running (rank 0's allreduce, which the other ranks submit only after rank
// 0's "go"): in the child that handle fails at once with the fork's error
// naming both pids, through wait(), wait_for(), poll() and result(); a
// handle completed before the fork keeps its result; in the parent the
// pending collective completes as usual. Needs 2 ranks or more.
// With --during-shutdown: rank 0 runs shutdown() on another thread than
// init()'s, which lives on (that hung for good: CAF's per-thread logger
// reference, workers/runtime_impl.hpp), with a collective pending, and forks
// children one after another until it returns; in each child the pending
// handle must not wait (the parent's shutdown fails it only there). Stopping
// takes about a millisecond here, so only a child or two fall inside it.

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "expect.hpp"
#include "troupe/troupe.hpp"

namespace {

using troupe::test::expect;
using troupe::test::failures;

// Far beyond a wait that returns at once; a wait that never returns (a
// handle that only the parent's runtime could complete) ends the child here.
constexpr auto child_deadline = std::chrono::seconds(30);
constexpr auto prompt = std::chrono::seconds(5);
// The parent's collectives, which wait for rank 0 to see its child end.
constexpr auto collective_deadline = 2 * child_deadline;

bool all_equal(const std::vector<float>& values, int expected) {
  for (float v : values)
    if (v != static_cast<float>(expected))
      return false;
  return true;
}

// Waits through `wait` (one of the handle's waits) and checks that it
// returned promptly with `expected`.
template <class Wait>
void expect_fork_error(Wait wait, const troupe::status& expected, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  const auto s = wait();
  const auto took = std::chrono::steady_clock::now() - start;
  expect(took < prompt, 0, what + " returned only after " +
                             std::to_string(std::chrono::duration<double>(took).count()) + " s");
  expect(s.code() == expected.code() && s.message() == expected.message(), 0,
         what + ": got [" + to_string(s.code()) + "] " + s.message() + "\n  want [" +
           to_string(expected.code()) + "] " + expected.message());
}

// The child's checks; its exit code.
int child_checks(const troupe::handle& completed, const std::vector<float>& completed_values,
                 const troupe::handle& pending, int size) {
  const std::string parent = std::to_string(::getppid());
  const troupe::status expected{
    troupe::status_code::shut_down,
    "This process (pid " + std::to_string(::getpid()) + ") is a fork()ed copy of pid " + parent +
      " made after troupe::init(); the operation was still running there, and its result "
      "reaches only pid " +
      parent + "."};
  expect(pending.poll(), 0, "poll() of the pending handle in the child");
  expect_fork_error([&] { return pending.wait(); }, expected, "wait() in the child");
  expect_fork_error([&] { return pending.wait_for(std::chrono::hours(1)); }, expected,
                    "wait_for(1 h) in the child");
  expect_fork_error([&] { return pending.result(); }, expected, "result() in the child");
  expect(completed.poll() && completed.wait().ok() && completed.result().ok() &&
           all_equal(completed_values, size),
         0, "the handle completed before the fork keeps its result in the child");
  std::fflush(stdout);
  return failures() == 0 ? 0 : 1;
}

// The forked child's exit code; 1 after killing one that outlived the
// deadline.
int wait_for_child(pid_t child) {
  const auto deadline = std::chrono::steady_clock::now() + child_deadline;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  std::printf("rank 0: FAIL the forked child did not finish within %lld s (a wait that never "
              "returns)\n",
              static_cast<long long>(child_deadline.count()));
  return 1;
}

int run(int rank, int size) {
  using troupe::data_type;
  std::vector<float> completed_values(2, 1.0f);
  const auto completed =
    troupe::allreduce({completed_values.data(), data_type::float32, {2}},
                      {completed_values.data(), data_type::float32, {2}}, "fork.completed");
  expect(completed.wait_for(collective_deadline).ok() && all_equal(completed_values, size), rank,
         "allreduce before the fork");
  std::vector<float> pending_values(2, 1.0f);
  const troupe::tensor pending_tensor{pending_values.data(), data_type::float32, {2}};
  float go = 0;
  const troupe::tensor go_tensor{&go, data_type::float32, {1}};
  troupe::handle pending;
  if (rank == 0) {
    pending = troupe::allreduce(pending_tensor, pending_tensor, "fork.pending");
    std::fflush(stdout);  // else the child would print it again
    const pid_t child = ::fork();
    if (child == 0)
      ::_exit(child_checks(completed, completed_values, pending, size));
    expect(child > 0 && wait_for_child(child) == 0, rank, "the forked child's checks");
  }
  expect(troupe::broadcast(go_tensor, 0, "fork.go").wait_for(collective_deadline).ok(), rank,
         "broadcast of the go");
  if (rank != 0)
    pending = troupe::allreduce(pending_tensor, pending_tensor, "fork.pending");
  expect(pending.wait_for(collective_deadline).ok() && all_equal(pending_values, size), rank,
         "the allreduce pending at the fork completes in the parent");
  std::printf("rank %d: %s fork with a pending handle\n", rank,
              failures() == 0 ? "PASS" : "FAIL");
  return failures() == 0 ? 0 : 1;
}

// The child's exit code: 0 if `pending` returned promptly, not ok.
int child_during_shutdown(const troupe::handle& pending) {
  const auto start = std::chrono::steady_clock::now();
  const auto s = pending.wait_for(prompt);
  const auto took = std::chrono::steady_clock::now() - start;
  if (took < prompt && !s.ok())
    return 0;
  std::printf("rank 0: FAIL a child forked while shutdown() ran waited %.1f s on a handle "
              "pending in its parent (%s)\n",
              std::chrono::duration<double>(took).count(), s.message().c_str());
  std::fflush(stdout);
  return 1;
}

// Rank 0 forks until its shutdown() returns (at most `max_forks` children,
// one at a time); the other ranks wait for a broadcast that never comes
// until rank 0 has gone.
int run_during_shutdown(int rank) {
  constexpr int max_forks = 2000;
  float value = 1;
  const troupe::tensor t{&value, troupe::data_type::float32, {1}};
  expect(troupe::allreduce(t, t, "fork.ready").wait_for(collective_deadline).ok(), rank,
         "allreduce before the shutdown");
  if (rank != 0) {
    expect(!troupe::broadcast(t, 0, "fork.never").wait_for(collective_deadline).ok(), rank,
           "the broadcast rank 0 never joins fails once it has gone");
  } else {
    // Only rank 0 submits it: it is still pending when shutdown() begins.
    const auto pending = troupe::allreduce(t, t, "fork.pending_at_shutdown");
    std::fflush(stdout);
    std::atomic<bool> stopped{false};
    std::thread stopper{[&] {
      troupe::shutdown();
      stopped = true;
    }};
    int forks = 0;
    while (!stopped && forks < max_forks) {
      const pid_t child = ::fork();
      if (child == 0)
        ::_exit(child_during_shutdown(pending));
      ++forks;
      expect(child > 0 && wait_for_child(child) == 0, rank, "a child forked during shutdown()");
      if (failures() > 0)
        break;
    }
    stopper.join();
    std::printf("rank 0: %d children forked while shutdown() ran\n", forks);
  }
  std::printf("rank %d: %s fork during shutdown\n", rank, failures() == 0 ? "PASS" : "FAIL");
  return failures() == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  const bool during_shutdown = argc > 1 && std::strcmp(argv[1], "--during-shutdown") == 0;
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  int rc = 1;
  if (troupe::size() >= 2)
    rc = during_shutdown ? run_during_shutdown(troupe::rank())
                         : run(troupe::rank(), troupe::size());
  else
    std::fprintf(stderr, "fork_check needs 2 ranks or more\n");
  std::fflush(stdout);
  troupe::shutdown();
  return rc;
}
