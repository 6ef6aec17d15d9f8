#include "elastic/socket_util.hpp"
#include "elastic/store.hpp"
#include "elastic/store_protocol.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <sys/socket.h>

using namespace troupe::elastic;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::unique_ptr<store_client> connect(const store_server& server) {
  return std::make_unique<store_client>("127.0.0.1", server.port(), 5s);
}

// A port nothing listens on: bound once by us, then released.
uint16_t dead_port() {
  auto fd = net::listen_on("127.0.0.1", 0);
  return net::local_port(fd.get());
}

net::unique_fd raw_connection(uint16_t port) {
  std::string why;
  auto fd = net::try_connect("127.0.0.1", port, clock_type::now() + 5s, why);
  EXPECT_TRUE(fd) << why;
  return fd;
}

// True when the server closes `fd` within the deadline.
bool closed_by_peer(int fd) {
  std::string buf;
  return net::recv_exact(fd, 1, buf, clock_type::now() + 5s)
         == net::io_result::closed;
}

} // namespace

TEST(store, set_then_get) {
  store_server server;
  auto client = connect(server);
  client->set("alpha", "one");
  EXPECT_EQ(client->get("alpha"), "one");
  client->set("alpha", "two");
  EXPECT_EQ(client->get("alpha"), "two");
  EXPECT_EQ(client->get("missing"), std::nullopt);
}

TEST(store, values_are_arbitrary_bytes) {
  store_server server;
  auto client = connect(server);
  std::string binary("\0\xff\n\x01", 4);
  client->set(binary, binary);
  EXPECT_EQ(client->get(binary), binary);
  client->set("empty", "");
  EXPECT_EQ(client->get("empty"), "");
  std::string big(3 << 20, 'x');
  client->set("big", big);
  EXPECT_EQ(client->get("big"), big);
}

TEST(store, oversized_value_is_refused_before_sending) {
  store_server server;
  auto client = connect(server);
  EXPECT_THROW(client->set("huge", std::string(65 << 20, 'x')), store_error);
  client->set("small", "ok");
  EXPECT_EQ(client->get("small"), "ok");
}

TEST(store, add_counts_from_zero) {
  store_server server;
  auto client = connect(server);
  EXPECT_EQ(client->add("n", 1), 1);
  EXPECT_EQ(client->add("n", 5), 6);
  EXPECT_EQ(client->add("n", -10), -4);
  EXPECT_EQ(client->get("n"), "-4");
}

TEST(store, add_to_text_value_fails_with_key_in_message) {
  store_server server;
  auto client = connect(server);
  client->set("word", "hello");
  try {
    client->add("word", 1);
    FAIL() << "add on a non-integer succeeded";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("'word'"), std::string::npos);
  }
  // The connection stays usable after a refused add.
  EXPECT_EQ(client->add("other", 2), 2);
}

TEST(store, wait_returns_at_once_for_present_keys) {
  store_server server;
  auto client = connect(server);
  client->set("a", "1");
  client->set("b", "2");
  EXPECT_TRUE(client->wait({"a", "b"}, 0ms));
  EXPECT_TRUE(client->wait({}, 0ms));
}

TEST(store, wait_is_satisfied_by_a_later_set) {
  store_server server;
  auto waiter = connect(server);
  auto setter = connect(server);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    setter->set("first", "x");
    std::this_thread::sleep_for(50ms);
    setter->add("second", 1);
  });
  auto start = clock_type::now();
  EXPECT_TRUE(waiter->wait({"first", "second"}, 10s));
  auto took = clock_type::now() - start;
  later.join();
  EXPECT_GE(took, 140ms);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(waiter->wait_get("first", 1s), "x");
}

TEST(store, wait_timeout_is_honoured) {
  store_server server;
  auto client = connect(server);
  auto start = clock_type::now();
  EXPECT_FALSE(client->wait({"never"}, 300ms));
  auto took = clock_type::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 1300ms);
  // The client stays usable after a timed-out wait.
  client->set("after", "ok");
  EXPECT_EQ(client->get("after"), "ok");
}

TEST(store, wait_get_timeout_names_the_key) {
  store_server server;
  auto client = connect(server);
  try {
    client->wait_get("rank_3_addr", 50ms);
    FAIL() << "wait_get returned without the key";
  } catch (const store_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("rank_3_addr"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(server.port())),
              std::string::npos)
      << what;
  }
}

TEST(store, waits_with_different_deadlines_expire_independently) {
  store_server server;
  auto short_client = connect(server);
  auto long_client = connect(server);
  auto setter = connect(server);
  std::atomic<bool> long_result{false};
  std::thread long_wait(
    [&] { long_result = long_client->wait({"late"}, 5s); });
  EXPECT_FALSE(short_client->wait({"late"}, 100ms));
  setter->set("late", "1");
  long_wait.join();
  EXPECT_TRUE(long_result);
}

TEST(store, many_concurrent_clients) {
  store_server server;
  constexpr int n = 16;
  constexpr int adds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto client = connect(server);
        for (int k = 0; k < adds; ++k)
          client->add("counter", 1);
        client->set("ready/" + std::to_string(i), std::to_string(i));
        std::vector<std::string> all;
        for (int j = 0; j < n; ++j)
          all.push_back("ready/" + std::to_string(j));
        if (!client->wait(all, 10s))
          ++failures;
        for (int j = 0; j < n; ++j)
          if (client->get("ready/" + std::to_string(j)) != std::to_string(j))
            ++failures;
      } catch (const store_error&) {
        ++failures;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(connect(server)->add("counter", 0), n * adds);
}

TEST(store, one_client_is_safe_to_share_between_threads) {
  store_server server;
  auto client = connect(server);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 100; ++k)
        client->add("shared", 1);
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(client->add("shared", 0), 400);
}

TEST(store, malformed_frames_close_only_that_client) {
  store_server server;
  auto good = connect(server);
  good->set("kept", "yes");
  // An unknown op.
  auto bad_op = raw_connection(server.port());
  std::string frame = protocol::frame_writer{}.u8(99).bytes("x").finish();
  ASSERT_EQ(net::send_all(bad_op.get(), frame, clock_type::now() + 5s),
            net::io_result::done);
  EXPECT_TRUE(closed_by_peer(bad_op.get()));
  // A length far above the limit.
  auto huge = raw_connection(server.port());
  std::string header("\xff\xff\xff\xff", 4);
  ASSERT_EQ(net::send_all(huge.get(), header, clock_type::now() + 5s),
            net::io_result::done);
  EXPECT_TRUE(closed_by_peer(huge.get()));
  // A body shorter than its fields claim.
  auto truncated = raw_connection(server.port());
  frame = protocol::frame_writer{}.u8(1).u32(1000).finish();
  ASSERT_EQ(net::send_all(truncated.get(), frame, clock_type::now() + 5s),
            net::io_result::done);
  EXPECT_TRUE(closed_by_peer(truncated.get()));
  // A wait whose key count is absurd.
  auto count = raw_connection(server.port());
  frame = protocol::frame_writer{}.u8(4).u32(0xffffffff).finish();
  ASSERT_EQ(net::send_all(count.get(), frame, clock_type::now() + 5s),
            net::io_result::done);
  EXPECT_TRUE(closed_by_peer(count.get()));
  EXPECT_EQ(good->get("kept"), "yes");
  EXPECT_EQ(connect(server)->get("kept"), "yes");
}

TEST(store, client_that_leaves_mid_wait_does_not_disturb_others) {
  store_server server;
  {
    auto leaver = raw_connection(server.port());
    auto frame = protocol::encode_wait({"k"}, 60'000);
    ASSERT_EQ(net::send_all(leaver.get(), frame, clock_type::now() + 5s),
              net::io_result::done);
  }
  auto client = connect(server);
  client->set("k", "v");
  EXPECT_EQ(client->get("k"), "v");
}

TEST(store, connect_to_dead_port_fails_within_deadline) {
  auto port = dead_port();
  auto start = clock_type::now();
  try {
    store_client client{"127.0.0.1", port, 300ms};
    FAIL() << "connected to a port nobody listens on";
  } catch (const store_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)),
              std::string::npos)
      << what;
  }
  auto took = clock_type::now() - start;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 1500ms);
}

TEST(store, connect_retries_until_server_appears) {
  auto port = dead_port();
  std::unique_ptr<store_server> server;
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<store_server>("127.0.0.1", port);
  });
  store_client client{"127.0.0.1", port, 5s};
  later.join();
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

TEST(store, calls_fail_fast_when_server_goes_away) {
  auto server = std::make_unique<store_server>();
  auto client = connect(*server);
  client->set("k", "v");
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  auto start = clock_type::now();
  try {
    client->wait({"never"}, 30s);
    FAIL() << "wait survived the server";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos);
  }
  stopper.join();
  EXPECT_LT(clock_type::now() - start, 2s);
  EXPECT_THROW(client->get("k"), store_error);
}

TEST(store, destructor_stops_promptly_with_clients_connected) {
  auto server = std::make_unique<store_server>();
  auto client = connect(*server);
  std::thread waiter([&] {
    try {
      client->wait({"never"}, 60s);
    } catch (const store_error&) {
      // expected: the server went away
    }
  });
  std::this_thread::sleep_for(50ms);
  auto start = clock_type::now();
  server.reset();
  EXPECT_LT(clock_type::now() - start, 500ms);
  waiter.join();
}
