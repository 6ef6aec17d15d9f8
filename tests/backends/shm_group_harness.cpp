#include "shm_group_harness.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

namespace troupe::backends::shm_test {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

bool name_exists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

shm_group join(const test_group& g, int member, int members,
               std::chrono::milliseconds timeout) {
  if (member == 0) {
    auto segment = shm_group::create_segment(g.name, members, test_slot_bytes);
    const std::string tokens(static_cast<size_t>(members - 1), 'x');
    if (::write(g.ready[1], tokens.data(), tokens.size()) != static_cast<ssize_t>(tokens.size()))
      throw std::runtime_error("write to the ready pipe failed");
    return shm_group(std::move(segment), 0, members, timeout);
  }
  pollfd p{g.ready[0], POLLIN, 0};
  char token;
  if (::poll(&p, 1, 10000) != 1 || ::read(g.ready[0], &token, 1) != 1)
    throw std::runtime_error("the creator of " + g.name + " did not say it is ready");
  return shm_group(shm_segment::open(g.name, shm_group::segment_bytes(members, test_slot_bytes)),
                   member, members, timeout);
}

std::vector<int> run_children(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 3;
      try {
        code = body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        code = 2;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(n, -1);
  int left = n;
  const auto deadline = clock::now() + 30s;
  while (left > 0 && clock::now() < deadline) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    for (int i = 0; i < n; ++i)
      if (pids[i] == pid) {
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
  }
  for (int i = 0; i < n; ++i)
    if (status[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
  return status;
}

void expect_every_member_passes(const char* what, int members,
                                const std::function<int(shm_group&, int)>& body) {
  const test_group g(what);
  const auto status = run_children(members, [&](int m) {
    auto group = join(g, m, members);
    return body(group, m);
  });
  EXPECT_EQ(status, std::vector<int>(members, 0));
}

} // namespace troupe::backends::shm_test
