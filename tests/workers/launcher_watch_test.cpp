#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elastic/embedded_store.hpp"
#include "ipc/process_alive.hpp"
#include "workers/launcher_watch.hpp"

namespace troupe::workers {
namespace {

using namespace std::chrono_literals;

const std::string secret(32, 's');

elastic::store_endpoint embedded(uint16_t port) {
  elastic::store_endpoint e;
  e.host = "127.0.0.1";
  e.port = port;
  return e;
}

// The store drops a connection that has not said hello within its hello
// timeout; the watch must not take that for troupe-run's end (it did: every
// job under troupe-run ended itself after 10 s).
TEST(launcher_watch, outlives_the_stores_hello_timeout) {
  elastic::store_limits limits;
  limits.hello_timeout = 200ms;
  elastic::store_server store{"127.0.0.1", 0, secret, limits};
  launcher_watch watch{embedded(store.port()), "job", secret, 5s};
  // Were the connection dropped, SIGTERM would end this test process here.
  std::this_thread::sleep_for(800ms);
  SUCCEED();
}

TEST(launcher_watch, refuses_a_store_with_another_secret) {
  elastic::store_server store{"127.0.0.1", 0, secret};
  EXPECT_THROW((launcher_watch{embedded(store.port()), "job", std::string(32, 'x'), 2s}),
               std::runtime_error);
}

// troupe-run going away while the watch runs; exits 0 only if the watch
// never noticed.
void lose_the_store() {
  auto store = std::make_unique<elastic::store_server>("127.0.0.1", 0, secret);
  launcher_watch watch{embedded(store->port()), "job", secret, 5s};
  store.reset();
  std::this_thread::sleep_for(5s);
  std::exit(0);
}

TEST(launcher_watch, ends_the_process_when_the_store_goes_away) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lose_the_store(), ::testing::KilledBySignal(SIGTERM), "");
}

// A child that waits to be killed (or for this process to end) and when it
// started.
struct child {
  pid_t pid;
  uint64_t start;
};

child fake_launcher() {
  const pid_t pid = ::fork();
  if (pid < 0)
    std::abort();  // (-1 would make end() signal every process)
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
      ::pause();
  }
  const auto start = ipc::process_start_time(pid);
  if (!start)
    std::abort();
  return {pid, *start};
}

void end(const child& c) {
  ::kill(c.pid, SIGKILL);
  ::waitpid(c.pid, nullptr, 0);
}

TEST(launcher_watch, refuses_a_process_that_started_at_another_time) {
  const auto other = fake_launcher();
  EXPECT_THROW((launcher_watch{other.pid, other.start + 1}), std::runtime_error);
  end(other);
  // Reaped: no process has that pid now (or a later one does).
  EXPECT_THROW((launcher_watch{other.pid, other.start}), std::runtime_error);
}

TEST(launcher_watch, keeps_quiet_while_troupe_run_runs) {
  const auto launcher = fake_launcher();
  {
    launcher_watch watch{launcher.pid, launcher.start};
    // Were it taken for gone, SIGTERM would end this test process here.
    std::this_thread::sleep_for(300ms);
  }
  end(launcher);
}

// troupe-run's process exiting while the watch runs (under mpirun: no
// store); exits 0 only if the watch never noticed.
void lose_the_launcher() {
  const auto launcher = fake_launcher();
  launcher_watch watch{launcher.pid, launcher.start};
  ::kill(launcher.pid, SIGKILL);
  std::this_thread::sleep_for(5s);
  std::exit(0);
}

TEST(launcher_watch, ends_the_process_when_troupe_runs_process_exits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lose_the_launcher(), ::testing::KilledBySignal(SIGTERM), "");
}

} // namespace
} // namespace troupe::workers
