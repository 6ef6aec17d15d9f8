// The store's connection cap (store_limits::max_connections): connections
// over it are closed, and the operator is told, once per burst.
#include "elastic/embedded_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace troupe::elastic;
using namespace std::chrono_literals;

namespace {

const std::string secret = "store-cap-test-secret-0123456789";

// A store holding at most `cap` connections, and the warnings it gave.
class capped_store {
public:
  capped_store(size_t cap, std::chrono::milliseconds warning_interval)
    : server_("127.0.0.1", 0, secret, limits(cap, warning_interval),
              [this](const std::string& text) {
                std::lock_guard<std::mutex> lock(mutex_);
                warnings_.push_back(text);
              }) {
  }

  std::unique_ptr<store_client> connect() const {
    return std::make_unique<embedded_store_client>("127.0.0.1", server_.port(), secret, 5s);
  }

  std::vector<std::string> warnings() {
    std::lock_guard<std::mutex> lock(mutex_);
    return warnings_;
  }

  // The warnings once there are `n`, or after a few seconds.
  std::vector<std::string> await_warnings(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (warnings().size() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    return warnings();
  }

private:
  static store_limits limits(size_t cap, std::chrono::milliseconds warning_interval) {
    store_limits l;
    l.max_connections = cap;
    l.refusal_warning_interval = warning_interval;
    return l;
  }

  std::mutex mutex_;
  std::vector<std::string> warnings_;
  store_server server_;
};

// `n` connections the full store closes before their greeting; the
// client's error points at the cap.
void expect_refused(const capped_store& store, int n) {
  for (int i = 0; i < n; ++i) {
    try {
      store.connect();
      ADD_FAILURE() << "connection " << i << " over the cap was served";
    } catch (const store_error& e) {
      EXPECT_NE(std::string(e.what()).find("connection cap"), std::string::npos) << e.what();
    }
  }
}

TEST(store_connection_cap, a_burst_over_the_cap_is_warned_about_once_naming_the_cap) {
  capped_store store(2, 60s);
  auto first = store.connect();
  auto second = store.connect();
  expect_refused(store, 3);
  const auto warnings = store.warnings();  // given before each close
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("closed a new connection"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("at most 2 connections"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("--max-np or ulimit -n"), std::string::npos) << warnings[0];
  // Those within the cap are served as before.
  first->set("k", "v");
  EXPECT_EQ(second->get("k"), "v");
}

TEST(store_connection_cap, refusals_after_a_warning_are_counted_in_the_next) {
  capped_store store(1, 1s);
  auto held = store.connect();
  expect_refused(store, 3);
  const auto warnings = store.await_warnings(2);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("closed 2 more new connection(s) since its last warning"),
            std::string::npos)
    << warnings[1];
  EXPECT_NE(warnings[1].find("at most 1 connections"), std::string::npos) << warnings[1];
}

} // namespace
