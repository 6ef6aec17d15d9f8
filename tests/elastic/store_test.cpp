#include "elastic/job_secret.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/embedded_store.hpp"
#include "elastic/store_protocol.hpp"

#include <cstdint>

#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <functional>
#include <fstream>
#include <future>
#include <thread>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <system_error>
#include <sys/socket.h>
#include <unistd.h>

using namespace troupe::elastic;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

const std::string test_secret = "store-test-secret-0123456789";

// A store for the tests' own clients, on loopback.
struct test_server : store_server {
  explicit test_server(store_limits limits = {})
    : store_server("127.0.0.1", 0, test_secret, limits) {
  }
};

std::unique_ptr<store_client> connect(const store_server& server) {
  return std::make_unique<embedded_store_client>("127.0.0.1", server.port(), test_secret, 5s);
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

// A hand-driven connection: the greeting read, frames sealed under
// `secret` (the test's, unless a test plays an outsider).
class raw_session {
public:
  explicit raw_session(uint16_t port, const std::string& secret = test_secret)
    : fd_(raw_connection(port)) {
    keys_.key = derive_key(secret, "store");
    std::string header;
    EXPECT_EQ(net::recv_exact(fd_.get(), protocol::header_size, header, clock_type::now() + 5s),
              net::io_result::done);
    EXPECT_EQ(net::recv_exact(fd_.get(), protocol::body_size(header), keys_.nonce,
                              clock_type::now() + 5s),
              net::io_result::done);
  }

  // Sends `frame` sealed as this connection's next request.
  net::io_result send(const std::string& frame, clock_type::duration limit = 5s) {
    return send_bytes(protocol::seal(frame, keys_, protocol::direction::request, sent_++), limit);
  }

  net::io_result send_bytes(std::string_view bytes, clock_type::duration limit = 5s) {
    return net::send_all(fd_.get(), bytes, clock_type::now() + limit);
  }

  // The next reply's status and first string (an error's message), or
  // nothing when none came or it is not the server's.
  std::optional<std::pair<uint8_t, std::string>> receive() {
    auto until = clock_type::now() + 5s;
    std::string header;
    std::string body;
    if (net::recv_exact(fd_.get(), protocol::header_size, header, until) != net::io_result::done ||
        net::recv_exact(fd_.get(), protocol::body_size(header), body, until) !=
          net::io_result::done)
      return std::nullopt;
    try {
      protocol::frame_reader in{
        protocol::unseal(body, keys_, protocol::direction::reply, read_++)};
      auto st = in.u8();
      return std::make_pair(st, st == static_cast<uint8_t>(protocol::status::error)
                                  ? in.bytes()
                                  : std::string());
    } catch (const protocol::protocol_error&) {
      return std::nullopt;
    }
  }

  bool hello() {
    const auto mine = protocol::random_nonce();
    auto r = send(protocol::encode_hello(mine));
    keys_.nonce += mine;  // the reply's tag covers both nonces
    auto answer = receive();
    return r == net::io_result::done && answer && answer->first == 0;
  }

  // True when the server closes the connection within `limit` (replies
  // still on their way are read and dropped).
  bool closed_within(clock_type::duration limit) {
    auto until = clock_type::now() + limit;
    char buf[65536];
    while (clock_type::now() < until) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, net::poll_timeout(until)) <= 0)
        continue;
      auto n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return true;
    }
    return false;
  }

private:
  net::unique_fd fd_;
  protocol::session_keys keys_;
  uint64_t sent_ = 0;
  uint64_t read_ = 0;
};

// Sends a frame (sealed, after hello, unless `bytes` is given raw) on a fresh
// connection; succeeds when the server answers it with an error naming a
// malformed request and then hangs up.
testing::AssertionResult refused(uint16_t port, const std::string& frame, bool raw = false) {
  raw_session session{port};
  if (!session.hello())
    return testing::AssertionFailure() << "hello failed";
  if ((raw ? session.send_bytes(frame) : session.send(frame)) != net::io_result::done)
    return testing::AssertionFailure() << "send failed";
  auto answer = session.receive();
  if (!answer)
    return testing::AssertionFailure() << "no error reply";
  if (answer->first != static_cast<uint8_t>(protocol::status::error) ||
      answer->second.find("malformed request") == std::string::npos)
    return testing::AssertionFailure() << "reply: " << answer->second;
  if (!session.closed_within(5s))
    return testing::AssertionFailure() << "connection left open";
  return testing::AssertionSuccess() << answer->second;
}

// Polls `key` until it is gone; false when it outlived `limit`.
bool gone_within(store_client& client, const std::string& key,
                     clock_type::duration limit) {
  auto start = clock_type::now();
  while (clock_type::now() - start < limit) {
    if (!client.get(key))
      return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

// Runs `body(client, i)` for i in [0, n) on n threads, each with its own
// client; returns how many bodies failed or threw.
int failures_on_threads(const store_server& server, int n,
                        const std::function<bool(store_client&, int)>& body) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        if (!body(*connect(server), i))
          ++failures;
      } catch (const store_error&) {
        ++failures;
      }
    });
  for (auto& t : threads)
    t.join();
  return failures;
}

// Succeeds when `call` throws a store_error whose message names `key`.
template <class Call>
testing::AssertionResult fails_naming(const std::string& key, Call call) {
  try {
    call();
  } catch (const store_error& e) {
    std::string what = e.what();
    if (what.find("'" + key + "'") == std::string::npos)
      return testing::AssertionFailure() << "message lacks the key: " << what;
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << "no store_error";
}

} // namespace

TEST(store, set_then_get) {
  test_server server;
  auto client = connect(server);
  client->set("alpha", "one");
  EXPECT_EQ(client->get("alpha"), "one");
  client->set("alpha", "two");
  EXPECT_EQ(client->get("alpha"), "two");
  EXPECT_EQ(client->get("missing"), std::nullopt);
}

TEST(store, values_are_arbitrary_bytes) {
  test_server server;
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
  test_server server;
  auto client = connect(server);
  std::string huge(65 << 20, 'x');
  EXPECT_TRUE(fails_naming("huge", [&] { client->set("huge", huge); }));
  EXPECT_TRUE(fails_naming("big", [&] {
    client->compare_set("big", std::nullopt, huge);
  }));
  client->set("small", "ok");
  EXPECT_EQ(client->get("small"), "ok");
}

TEST(store, add_counts_from_zero) {
  test_server server;
  auto client = connect(server);
  EXPECT_EQ(client->add("n", 1), 1);
  EXPECT_EQ(client->add("n", 5), 6);
  EXPECT_EQ(client->add("n", -10), -4);
  EXPECT_EQ(client->get("n"), "-4");
}

TEST(store, add_to_text_value_fails_with_key_in_message) {
  test_server server;
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

TEST(store, an_add_that_overflows_fails_and_leaves_the_counter) {
  test_server server;
  auto client = connect(server);
  EXPECT_EQ(client->add("n", INT64_MAX), INT64_MAX);
  try {
    client->add("n", 1);
    FAIL() << "INT64_MAX + 1 was stored";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("adding 1 to key 'n' overflows 64 bits"),
              std::string::npos)
      << e.what();
  }
  EXPECT_EQ(client->get("n"), std::to_string(INT64_MAX));
}

TEST(store, wait_returns_at_once_for_present_keys) {
  test_server server;
  auto client = connect(server);
  client->set("a", "1");
  client->set("b", "2");
  EXPECT_TRUE(client->wait({"a", "b"}, 0ms));
  EXPECT_TRUE(client->wait({}, 0ms));
}

TEST(store, wait_is_satisfied_by_later_writes) {
  test_server server;
  auto waiter = connect(server);
  auto setter = connect(server);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    setter->set("first", "x");
    std::this_thread::sleep_for(25ms);
    setter->add("second", 1);
    std::this_thread::sleep_for(25ms);
    setter->compare_set("third", std::nullopt, "z");
  });
  auto start = clock_type::now();
  EXPECT_TRUE(waiter->wait({"first", "second", "third"}, 10s));
  auto took = clock_type::now() - start;
  later.join();
  EXPECT_GE(took, 140ms);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(waiter->wait_get("first", 1s), "x");
}

TEST(store, wait_timeout_is_honoured) {
  test_server server;
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
  test_server server;
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
  test_server server;
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
  test_server server;
  constexpr int n = 16;
  constexpr int adds = 50;
  auto failures = failures_on_threads(server, n, [&](store_client& client,
                                                     int i) {
    for (int k = 0; k < adds; ++k)
      client.add("counter", 1);
    client.set("ready/" + std::to_string(i), std::to_string(i));
    std::vector<std::string> all;
    for (int j = 0; j < n; ++j)
      all.push_back("ready/" + std::to_string(j));
    bool ok = client.wait(all, 10s);
    for (int j = 0; j < n; ++j)
      ok = ok && client.get("ready/" + std::to_string(j)) == std::to_string(j);
    return ok;
  });
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(connect(server)->add("counter", 0), n * adds);
}

TEST(store, one_client_is_safe_to_share_between_threads) {
  test_server server;
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

TEST(store, malformed_frames_are_refused_and_close_only_that_client) {
  test_server server;
  auto good = connect(server);
  good->set("kept", "yes");
  auto port = server.port();
  using protocol::frame_writer;
  // An unknown op.
  EXPECT_TRUE(refused(port, frame_writer{}.u8(99).bytes("x").finish()));
  // A length far above the limit.
  EXPECT_TRUE(refused(port, std::string("\xff\xff\xff\xff", 4), true));
  // A frame that is not sealed.
  EXPECT_TRUE(refused(port, protocol::encode_get("kept"), true));
  // A body shorter than its fields claim.
  EXPECT_TRUE(refused(port, frame_writer{}.u8(1).u32(1000).finish()));
  // A wait whose key count is absurd.
  EXPECT_TRUE(refused(port, frame_writer{}.u8(4).u32(0xffffffff).finish()));
  // The new ops: a remove without its key, a compare_set whose flag is
  // neither 0 nor 1, a list without its flag, a lease without its ttl, a
  // renew with trailing bytes.
  EXPECT_TRUE(refused(port, frame_writer{}.u8(5).finish()));
  EXPECT_TRUE(refused(
    port, frame_writer{}.u8(6).bytes("k").u8(2).bytes("v").finish()));
  EXPECT_TRUE(refused(port, frame_writer{}.u8(7).bytes("p").finish()));
  EXPECT_TRUE(refused(
    port, frame_writer{}.u8(8).bytes("k").bytes("v").u32(1).finish()));
  EXPECT_TRUE(refused(
    port, frame_writer{}.u8(9).bytes("k").i64(100).u8(0).finish()));
  EXPECT_EQ(good->get("kept"), "yes");
  EXPECT_EQ(connect(server)->get("kept"), "yes");
}

TEST(store, client_that_leaves_mid_wait_does_not_disturb_others) {
  test_server server;
  {
    raw_session leaver{server.port()};
    ASSERT_TRUE(leaver.hello());
    ASSERT_EQ(leaver.send(protocol::encode_wait({"k"}, 60'000)), net::io_result::done);
  }
  auto client = connect(server);
  client->set("k", "v");
  EXPECT_EQ(client->get("k"), "v");
}

TEST(store, connect_to_dead_port_fails_within_deadline) {
  auto port = dead_port();
  auto start = clock_type::now();
  try {
    embedded_store_client client{"127.0.0.1", port, test_secret, 300ms};
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
    server = std::make_unique<store_server>("127.0.0.1", port, test_secret);
  });
  embedded_store_client client{"127.0.0.1", port, test_secret, 5s};
  later.join();
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

TEST(store, calls_fail_fast_when_server_goes_away) {
  auto server = std::make_unique<test_server>();
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
  auto server = std::make_unique<test_server>();
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

TEST(store, remove_reports_whether_the_key_existed) {
  test_server server;
  auto client = connect(server);
  client->set("k", "v");
  EXPECT_TRUE(client->remove("k"));
  EXPECT_EQ(client->get("k"), std::nullopt);
  EXPECT_FALSE(client->remove("k"));
  EXPECT_FALSE(client->wait({"k"}, 0ms));
  // A removed counter counts from zero again.
  client->add("n", 5);
  EXPECT_TRUE(client->remove("n"));
  EXPECT_EQ(client->add("n", 1), 1);
}

TEST(store, remove_cancels_a_lease) {
  test_server server;
  auto client = connect(server);
  client->set_with_lease("k", "leased", 100ms);
  EXPECT_TRUE(client->remove("k"));
  client->set("k", "permanent");
  std::this_thread::sleep_for(250ms);
  EXPECT_EQ(client->get("k"), "permanent");
}

TEST(store, compare_set_swaps_only_on_a_match) {
  test_server server;
  auto client = connect(server);
  // Nothing expected: create-if-absent.
  auto created = client->compare_set("k", std::nullopt, "1");
  EXPECT_TRUE(created.swapped);
  EXPECT_EQ(created.current, "1");
  auto again = client->compare_set("k", std::nullopt, "2");
  EXPECT_FALSE(again.swapped);
  EXPECT_EQ(again.current, "1");
  // A stale expectation reports the value to retry from.
  auto stale = client->compare_set("k", std::string("0"), "2");
  EXPECT_FALSE(stale.swapped);
  EXPECT_EQ(stale.current, "1");
  auto swapped = client->compare_set("k", std::string("1"), "2");
  EXPECT_TRUE(swapped.swapped);
  EXPECT_EQ(swapped.current, "2");
  EXPECT_EQ(client->get("k"), "2");
  // A value expected of an absent key fails and reports the absence; the
  // empty value is a value, not an absence.
  auto absent = client->compare_set("none", std::string(""), "x");
  EXPECT_FALSE(absent.swapped);
  EXPECT_EQ(absent.current, std::nullopt);
  EXPECT_EQ(client->get("none"), std::nullopt);
  client->set("empty", "");
  EXPECT_FALSE(client->compare_set("empty", std::nullopt, "x").swapped);
  EXPECT_TRUE(client->compare_set("empty", std::string(""), "x").swapped);
}

TEST(store, concurrent_compare_set_loses_no_update) {
  test_server server;
  constexpr int clients = 8;
  constexpr int increments = 200;
  // Each failed swap means another client's swap succeeded, so this bounds
  // the retries of a correct store.
  constexpr int max_attempts = clients * increments * 2;
  std::atomic<int> swaps{0};
  auto failures = failures_on_threads(server, clients, [&](store_client& client,
                                                           int) {
    std::optional<std::string> seen;
    int done = 0;
    for (int attempt = 0; attempt < max_attempts && done < increments;
         ++attempt) {
      auto next = std::to_string(seen ? std::stoi(*seen) + 1 : 1);
      auto result = client.compare_set("counter", seen, next);
      done += result.swapped ? 1 : 0;
      seen = result.current;
    }
    swaps += done;
    return done == increments;
  });
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(swaps, clients * increments);
  EXPECT_EQ(connect(server)->get("counter"),
            std::to_string(clients * increments));
}

TEST(store, list_returns_keys_under_a_prefix_sorted) {
  test_server server;
  auto client = connect(server);
  for (const char* key : {"job/b", "job/a/2", "job/a/10", "job", "jobs", "x"})
    client->set(key, std::string("v:") + key);
  EXPECT_EQ(client->list("job/"),
            (std::vector<std::string>{"job/a/10", "job/a/2", "job/b"}));
  EXPECT_EQ(client->list("job"), (std::vector<std::string>{
                                   "job", "job/a/10", "job/a/2", "job/b",
                                   "jobs"}));
  EXPECT_EQ(client->list("").size(), 6u);
  EXPECT_TRUE(client->list("nothing").empty());
  EXPECT_TRUE(client->list_values("nothing").empty());
  auto values = client->list_values("job/a/");
  EXPECT_EQ(values, (std::map<std::string, std::string>{
                      {"job/a/10", "v:job/a/10"}, {"job/a/2", "v:job/a/2"}}));
  // Bytes above 0x7f sort after ASCII and bound the range correctly.
  std::string high("\xff", 1);
  client->set(high + "a", "1");
  client->set(high + high, "2");
  EXPECT_EQ(client->list(high),
            (std::vector<std::string>{high + "a", high + high}));
  EXPECT_EQ(client->list(high + high), (std::vector<std::string>{high + high}));
}

TEST(store, list_over_the_frame_limit_is_refused_naming_the_prefix) {
  test_server server;
  auto client = connect(server);
  std::string value(33 << 20, 'x');
  client->set("big/1", value);
  client->set("big/2", value);
  EXPECT_EQ(client->list("big/"),
            (std::vector<std::string>{"big/1", "big/2"}));
  EXPECT_TRUE(fails_naming("big/", [&] { client->list_values("big/"); }));
  // The connection stays usable after the refusal.
  EXPECT_EQ(client->list_values("big/1").size(), 1u);
}

TEST(store, renewed_lease_outlives_its_ttl) {
  test_server server;
  auto owner = connect(server);
  auto reader = connect(server);
  owner->set_with_lease("member/0", "alive", 200ms);
  auto start = clock_type::now();
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(60ms);
    ASSERT_TRUE(owner->renew("member/0", 200ms)) << "renewal " << i;
  }
  EXPECT_GE(clock_type::now() - start, 600ms);
  EXPECT_EQ(reader->get("member/0"), "alive");
  EXPECT_TRUE(reader->wait({"member/0"}, 0ms));
}

TEST(store, unrenewed_lease_expires_within_its_ttl_and_a_margin) {
  test_server server;
  auto owner = connect(server);
  auto reader = connect(server);
  auto start = clock_type::now();
  owner->set_with_lease("member/1", "alive", 200ms);
  EXPECT_EQ(reader->get("member/1"), "alive");
  ASSERT_TRUE(gone_within(*reader, "member/1", 3s));
  auto lived = clock_type::now() - start;
  EXPECT_GE(lived, 200ms);
  EXPECT_LT(lived, 200ms + 150ms);
  EXPECT_FALSE(owner->renew("member/1", 200ms));
  EXPECT_TRUE(owner->list("member/").empty());
  EXPECT_FALSE(reader->wait({"member/1"}, 50ms));
}

TEST(store, waiters_see_a_lease_expire) {
  test_server server;
  auto waiter = connect(server);
  auto setter = connect(server);
  // "a" expires before "b" appears: both are never present at once.
  setter->set_with_lease("a", "1", 100ms);
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    setter->set("b", "2");
  });
  auto start = clock_type::now();
  EXPECT_FALSE(waiter->wait({"a", "b"}, 600ms));
  EXPECT_GE(clock_type::now() - start, 600ms);
  later.join();
  // A leased key satisfies a wait while it lives.
  std::thread lease([&] {
    std::this_thread::sleep_for(50ms);
    setter->set_with_lease("a", "again", 1s);
  });
  EXPECT_TRUE(waiter->wait({"a", "b"}, 5s));
  lease.join();
}

TEST(store, set_clears_a_lease_while_add_and_compare_set_keep_it) {
  test_server server;
  auto client = connect(server);
  client->set_with_lease("set", "1", 100ms);
  client->set("set", "2");
  client->set_with_lease("add", "1", 100ms);
  client->add("add", 1);
  client->set_with_lease("cas", "1", 100ms);
  EXPECT_TRUE(client->compare_set("cas", std::string("1"), "2").swapped);
  EXPECT_TRUE(gone_within(*client, "cas", 3s));
  EXPECT_TRUE(gone_within(*client, "add", 3s));
  EXPECT_EQ(client->get("set"), "2");
  // renew gives a permanent key a lease.
  EXPECT_TRUE(client->renew("set", 50ms));
  EXPECT_TRUE(gone_within(*client, "set", 3s));
}

TEST(store, lease_with_a_bad_ttl_is_refused_naming_the_key) {
  test_server server;
  auto client = connect(server);
  EXPECT_TRUE(
    fails_naming("k", [&] { client->set_with_lease("k", "v", 0ms); }));
  EXPECT_TRUE(
    fails_naming("k", [&] { client->set_with_lease("k", "v", -5ms); }));
  EXPECT_TRUE(fails_naming("k", [&] {
    auto too_long = std::chrono::milliseconds{protocol::max_timeout_ms + 1};
    client->set_with_lease("k", "v", too_long);
  }));
  client->set("k", "v");
  EXPECT_TRUE(fails_naming("k", [&] { client->renew("k", 0ms); }));
  // Refusals change nothing and leave the connection usable.
  EXPECT_EQ(client->get("k"), "v");
}

TEST(store, a_pending_lease_does_not_busy_poll) {
  test_server server;
  auto client = connect(server);
  client->set_with_lease("k", "v", 400ms);
  auto cpu = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return std::chrono::seconds{ts.tv_sec}
           + std::chrono::nanoseconds{ts.tv_nsec};
  };
  auto before = cpu();
  std::this_thread::sleep_for(300ms);
  EXPECT_LT(cpu() - before, 50ms);
  EXPECT_TRUE(gone_within(*client, "k", 3s));
}

TEST(store, epoch_is_shared_and_advances_once_per_race) {
  test_server server;
  auto first = connect(server);
  auto second = connect(server);
  const std::string job = "job7";
  EXPECT_EQ(epoch(*first, job), 0);
  for (int64_t n = 0; n < 20; ++n) {
    std::promise<void> go;
    auto started = go.get_future().share();
    auto race = [&](store_client& client) {
      started.wait();
      return advance_epoch(client, job, n);
    };
    auto a = std::async(std::launch::async, race, std::ref(*first));
    auto b = std::async(std::launch::async, race, std::ref(*second));
    go.set_value();
    auto ra = a.get();
    auto rb = b.get();
    EXPECT_NE(ra.advanced, rb.advanced) << "from epoch " << n;
    EXPECT_EQ(ra.epoch, n + 1);
    EXPECT_EQ(rb.epoch, n + 1);
    EXPECT_EQ(epoch(*first, job), n + 1);
    EXPECT_EQ(epoch(*second, job), n + 1);
  }
  // A process that joins later reads the same epoch, under the documented key.
  auto late = connect(server);
  EXPECT_EQ(epoch(*late, job), 20);
  EXPECT_EQ(late->get(epoch_key(job)), "20");
  // Advancing from a stale epoch moves nothing and reports the current one.
  auto stale = advance_epoch(*late, job, 3);
  EXPECT_FALSE(stale.advanced);
  EXPECT_EQ(stale.epoch, 20);
  EXPECT_EQ(epoch(*late, "other_job"), 0);
}

TEST(store, epoch_key_holding_garbage_fails_naming_the_key) {
  test_server server;
  auto client = connect(server);
  client->set(epoch_key("job"), "seven");
  EXPECT_TRUE(fails_naming("job/epoch", [&] { epoch(*client, "job"); }));
  EXPECT_TRUE(
    fails_naming("job/epoch", [&] { advance_epoch(*client, "job", 7); }));
}

namespace {

// Resident memory of this process (the server runs in it).
size_t resident_bytes() {
  std::ifstream statm{"/proc/self/statm"};
  size_t pages = 0;
  size_t resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

constexpr size_t mib = 1 << 20;

} // namespace

TEST(store_security, a_client_without_the_secret_is_rejected) {
  test_server server;
  connect(server)->set("endpoint/0", "10.0.0.1:1");
  try {
    embedded_store_client outsider{"127.0.0.1", server.port(), "not-the-job-secret-at-all", 5s};
    FAIL() << "a client with another secret was served";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  // By hand: a forged hello, an unsealed request, a request before hello,
  // and a first frame announcing more than a hello.
  raw_session forger{server.port(), "not-the-job-secret-at-all"};
  EXPECT_FALSE(forger.hello());
  EXPECT_TRUE(forger.closed_within(5s));
  for (const auto& first :
       {protocol::encode_set("endpoint/0", "6.6.6.6:1"), std::string("\x04\x00\x00\x00", 4)}) {
    raw_session intruder{server.port()};
    intruder.send_bytes(first);
    EXPECT_TRUE(intruder.closed_within(5s));
  }
  raw_session skipper{server.port()};
  skipper.send(protocol::encode_set("endpoint/0", "6.6.6.6:1"));
  auto answer = skipper.receive();
  ASSERT_TRUE(answer);
  EXPECT_NE(answer->second.find("hello"), std::string::npos) << answer->second;
  EXPECT_EQ(connect(server)->get("endpoint/0"), "10.0.0.1:1");
}

// An attacker on the path records a session's server side (greeting and
// the hello's reply) and plays it back to a new client of the same job:
// the reply's tag covers the recorded client's nonce, not the new one's.
TEST(store_security, a_recorded_session_replayed_to_a_new_client_fails_its_check) {
  test_server server;
  std::string recorded;
  {
    const auto conn = raw_connection(server.port());
    const int fd = conn.get();
    std::string header, greeting;
    ASSERT_EQ(net::recv_exact(fd, protocol::header_size, header, clock_type::now() + 5s),
              net::io_result::done);
    ASSERT_EQ(net::recv_exact(fd, protocol::body_size(header), greeting, clock_type::now() + 5s),
              net::io_result::done);
    recorded = header + greeting;
    protocol::session_keys keys{derive_key(test_secret, "store"), greeting};
    const auto mine = protocol::random_nonce();
    ASSERT_EQ(net::send_all(fd, protocol::seal(protocol::encode_hello(mine), keys,
                                               protocol::direction::request, 0),
                            clock_type::now() + 5s),
              net::io_result::done);
    std::string reply_header, reply;
    ASSERT_EQ(net::recv_exact(fd, protocol::header_size, reply_header, clock_type::now() + 5s),
              net::io_result::done);
    ASSERT_EQ(net::recv_exact(fd, protocol::body_size(reply_header), reply,
                              clock_type::now() + 5s),
              net::io_result::done);
    keys.nonce += mine;  // the recorded client itself accepts the reply
    EXPECT_NO_THROW(protocol::unseal(reply, keys, protocol::direction::reply, 0));
    recorded += reply_header + reply;
  }
  // The replaying "server": the recorded bytes, whatever the client sends.
  auto listener = net::listen_on("127.0.0.1", 0);
  std::thread replayer([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1)
      return;
    net::unique_fd victim{::accept(listener.get(), nullptr, nullptr)};
    net::send_all(victim.get(), recorded, clock_type::now() + 5s);
    char sink[4096];
    while (::recv(victim.get(), sink, sizeof sink, 0) > 0) {
    }
  });
  try {
    embedded_store_client client("127.0.0.1", net::local_port(listener.get()), test_secret, 5s);
    ADD_FAILURE() << "a client authenticated against a replayed session";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("not authenticated"), std::string::npos) << e.what();
  }
  replayer.join();
}

TEST(store_security, a_client_that_never_says_hello_is_dropped) {
  store_limits limits;
  limits.hello_timeout = 200ms;
  test_server server{limits};
  raw_session idle{server.port()};
  EXPECT_TRUE(idle.closed_within(10s));
}

TEST(store_security, pipelined_gets_of_a_large_value_keep_memory_bounded) {
  store_limits limits;
  limits.slow_reader_timeout = 1s;
  test_server server{limits};
  const std::string big(16 * mib, 'v');
  connect(server)->set("big", big);
  const auto before = resident_bytes();
  // 100 gets (1.6 GB of replies), never read.
  raw_session greedy{server.port()};
  ASSERT_TRUE(greedy.hello());
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(greedy.send(protocol::encode_get("big")), net::io_result::done);
  // Others are still served meanwhile.
  auto other = connect(server);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(other->get("big")->size(), big.size());
  const auto grown = resident_bytes() - std::min(before, resident_bytes());
  EXPECT_LT(grown, 100 * mib) << "the server buffered " << grown / mib << " MiB of replies";
  // The reader that never reads is dropped.
  EXPECT_TRUE(greedy.closed_within(20s));
}

// A large set that waits for input budget goes on as soon as the frame
// holding the budget is taken, also when that happens after the waiting
// connection was looked at in the same round and nothing else arrives:
// client `first` connects first (the server looks at it first), `other`
// sends one large set and then nothing, `first` sends its own while that
// one is on its way. (Whether `other` wins the budget is a race: the loop
// before the fix left `first` waiting in 1 of 2 runs of 4 rounds here.)
TEST(store_security, a_set_waiting_for_input_budget_goes_on_when_it_frees) {
  store_limits limits;
  limits.input_budget = 80 * mib;  // one largest frame (64 MiB) and some
  test_server server{limits};
  const std::string value(48 * mib, 'v');
  for (int round = 0; round < 4; ++round) {
    auto first = connect(server);
    auto other = connect(server);
    std::thread sender([&] { other->set("other", value); });
    std::this_thread::sleep_for(2ms);
    const auto start = std::chrono::steady_clock::now();
    // Left waiting, it would fail at its client's deadline (5 s).
    EXPECT_NO_THROW(first->set("first", value)) << "round " << round;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "round " << round;
    sender.join();
  }
}

TEST(store_security, half_sent_large_frames_are_bounded_in_total) {
  test_server server;
  auto client = connect(server);
  const std::string half(40 * mib, 'x');
  const auto before = resident_bytes();
  // Eight authenticated clients each announce a 64 MiB set and send 40 MiB
  // of it: 320 MiB if each were buffered.
  std::vector<std::unique_ptr<raw_session>> senders;
  for (int i = 0; i < 8; ++i) {
    senders.push_back(std::make_unique<raw_session>(server.port()));
    ASSERT_TRUE(senders.back()->hello());
    ASSERT_EQ(senders.back()->send_bytes(std::string("\x04\x00\x00\x00", 4)),  // 64 MiB
              net::io_result::done);
    // The server stops reading once the budget is spent: the send then
    // times out with the rest in the kernel's buffers.
    const auto sent = senders.back()->send_bytes(half, 300ms);
    ASSERT_TRUE(sent == net::io_result::done || sent == net::io_result::timed_out);
  }
  client->set("still", "served");
  EXPECT_EQ(client->get("still"), "served");
  const auto grown = resident_bytes() - std::min(before, resident_bytes());
  EXPECT_LT(grown, 128 * mib) << "the server buffered " << grown / mib << " MiB of input";
}

// launcher_watch's connection learns of a troupe-run host that died without
// closing it only through these.
TEST(socket_util, keepalive_is_on_with_the_given_timing) {
  net::unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  ASSERT_GE(fd.get(), 0);
  net::set_keepalive(fd.get(), std::chrono::seconds(15), std::chrono::seconds(5), 3);
  auto option = [&](int level, int name) {
    int value = -1;
    socklen_t len = sizeof value;
    EXPECT_EQ(::getsockopt(fd.get(), level, name, &value, &len), 0);
    return value;
  };
  EXPECT_EQ(option(SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPIDLE), 15);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPINTVL), 5);
  EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPCNT), 3);
  EXPECT_THROW(net::set_keepalive(-1, std::chrono::seconds(1), std::chrono::seconds(1), 1),
               std::system_error);
}
