#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

#include "elastic/embedded_store.hpp"
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

} // namespace
} // namespace troupe::workers
