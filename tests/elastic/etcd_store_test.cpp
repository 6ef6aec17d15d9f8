// The etcd rendezvous client against a real etcd this test starts on
// loopback (free ports, a temporary data directory). Exits 77 (skipped)
// without /usr/bin/etcd.

#include "elastic/etcd_store_client.hpp"
#include "elastic/launcher_beacon.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/store_endpoint.hpp"
#include "workers/launcher_watch.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace troupe::elastic;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr const char* etcd_binary = "/usr/bin/etcd";
const std::string test_secret = "etcd-test-secret-0123456789";

uint16_t free_port() {
  auto fd = net::listen_on("127.0.0.1", 0);
  return net::local_port(fd.get());
}

// One etcd member for the whole test program; killed (and its data
// directory removed) at exit.
class etcd_server : public ::testing::Environment {
public:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("troupe-etcd-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    port_ = free_port();
    const auto peer = "http://127.0.0.1:" + std::to_string(free_port());
    const auto client = "http://127.0.0.1:" + std::to_string(port_);
    const std::vector<std::string> args{etcd_binary,
                                        "--name", "t",
                                        "--data-dir", (dir_ / "data").string(),
                                        "--listen-client-urls", client,
                                        "--advertise-client-urls", client,
                                        "--listen-peer-urls", peer,
                                        "--initial-advertise-peer-urls", peer,
                                        "--initial-cluster", "t=" + peer};
    const auto log = (dir_ / "log").string();
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      std::vector<char*> argv;
      for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(etcd_binary, argv.data());
      ::_exit(127);
    }
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  static store_endpoint endpoint(const std::string& prefix) {
    store_endpoint e = parse_rendezvous("etcd://127.0.0.1:" + std::to_string(port_) + "/" + prefix);
    return e;
  }

private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  static inline uint16_t port_ = 0;
};

// Each test its own key prefix, so tests share the etcd without meeting.
std::unique_ptr<etcd_store_client> connect(const std::string& secret = test_secret) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::make_unique<etcd_store_client>(
    etcd_server::endpoint(std::string("troupe-test/") + test->name() + "/"), secret, 20s);
}

TEST(etcd_store, set_get_and_overwrite) {
  auto c = connect();
  EXPECT_EQ(c->get("k"), std::nullopt);
  c->set("k", "v1");
  EXPECT_EQ(c->get("k"), "v1");
  c->set("k", std::string("a\0b\xff", 4));
  EXPECT_EQ(c->get("k"), std::string("a\0b\xff", 4));
  c->set("empty", "");
  EXPECT_EQ(c->get("empty"), "");
}

TEST(etcd_store, add_counts_from_zero_and_refuses_text) {
  auto c = connect();
  EXPECT_EQ(c->add("n", 2), 2);
  EXPECT_EQ(c->add("n", -5), -3);
  EXPECT_EQ(c->get("n"), "-3");
  c->set("text", "abc");
  try {
    c->add("text", 1);
    FAIL() << "add to a text value succeeded";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("'text' is not an integer"), std::string::npos)
      << e.what();
  }
}

TEST(etcd_store, concurrent_adds_lose_no_update) {
  constexpr int threads = 4, each = 25;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([] {
      auto c = connect();
      for (int i = 0; i < each; ++i)
        c->add("counter", 1);
    });
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(connect()->get("counter"), std::to_string(threads * each));
}

TEST(etcd_store, compare_set_swaps_only_on_a_match) {
  auto c = connect();
  auto r = c->compare_set("k", std::nullopt, "first");
  EXPECT_TRUE(r.swapped);
  EXPECT_EQ(r.current, "first");
  r = c->compare_set("k", std::nullopt, "second");
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(r.current, "first");
  r = c->compare_set("k", std::string("wrong"), "second");
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(r.current, "first");
  r = c->compare_set("k", std::string("first"), "second");
  EXPECT_TRUE(r.swapped);
  EXPECT_EQ(c->get("k"), "second");
  r = c->compare_set("absent", std::string("x"), "y");
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(r.current, std::nullopt);
}

TEST(etcd_store, epoch_advances_once_per_race) {
  std::atomic<int> advanced{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < 3; ++i)
    racers.emplace_back([&advanced] {
      auto c = connect();
      if (advance_epoch(*c, "job", 0).advanced)
        ++advanced;
    });
  for (auto& r : racers)
    r.join();
  EXPECT_EQ(advanced.load(), 1);
  EXPECT_EQ(epoch(*connect(), "job"), 1);
}

TEST(etcd_store, remove_reports_whether_the_key_existed) {
  auto c = connect();
  c->set("k", "v");
  EXPECT_TRUE(c->remove("k"));
  EXPECT_FALSE(c->remove("k"));
  EXPECT_EQ(c->get("k"), std::nullopt);
}

TEST(etcd_store, list_returns_keys_under_a_prefix_sorted) {
  auto c = connect();
  for (const char* k : {"p/b", "p/a", "p/c/d", "q/x", "p"})
    c->set(k, std::string("v-") + k);
  EXPECT_EQ(c->list("p/"), (std::vector<std::string>{"p/a", "p/b", "p/c/d"}));
  EXPECT_EQ(c->list("nothing/"), std::vector<std::string>{});
  const auto values = c->list_values("p/");
  EXPECT_EQ(values, (std::map<std::string, std::string>{
                      {"p/a", "v-p/a"}, {"p/b", "v-p/b"}, {"p/c/d", "v-p/c/d"}}));
}

TEST(etcd_store, wait_sees_later_writes_and_honours_its_deadline) {
  auto c = connect();
  auto t0 = clock_type::now();
  EXPECT_FALSE(c->wait({"a", "b"}, 300ms));
  const auto waited = clock_type::now() - t0;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 2s);
  std::thread writer{[] {
    std::this_thread::sleep_for(200ms);
    auto w = connect();
    w->set("a", "1");
    w->set("b", "2");
  }};
  t0 = clock_type::now();
  EXPECT_TRUE(c->wait({"a", "b"}, 10s));
  EXPECT_LT(clock_type::now() - t0, 5s);
  writer.join();
  EXPECT_EQ(c->wait_get("b", 1s), "2");
  try {
    c->wait_get("never", 100ms);
    FAIL() << "wait_get of an absent key returned";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("'never' did not appear within 100 ms"),
              std::string::npos)
      << e.what();
  }
}

bool gone_within(store_client& c, const std::string& key, std::chrono::seconds limit) {
  const auto deadline = clock_type::now() + limit;
  while (clock_type::now() < deadline) {
    if (!c.get(key))
      return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

TEST(etcd_store, a_lease_expires_unless_renewed_and_set_clears_it) {
  auto c = connect();
  c->set_with_lease("leased", "v", 1s);
  c->set_with_lease("renewed", "v", 1s);
  c->set_with_lease("made_permanent", "v", 1s);
  c->set("made_permanent", "w");
  c->set_with_lease("counted", "1", 1s);
  EXPECT_EQ(c->add("counted", 1), 2);  // keeps the lease
  EXPECT_EQ(c->get("leased"), "v");
  // etcd's shortest lease is about 2 s; its expiry is checked every 0.5 s.
  const auto deadline = clock_type::now() + 12s;
  bool leased_gone = false, counted_gone = false;
  while (clock_type::now() < deadline && !(leased_gone && counted_gone)) {
    EXPECT_TRUE(c->renew("renewed", 3s));
    leased_gone = !c->get("leased");
    counted_gone = !c->get("counted");
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_TRUE(leased_gone) << "an unrenewed lease outlived 12 s";
  EXPECT_TRUE(counted_gone) << "add dropped the key's lease";
  EXPECT_EQ(c->get("renewed"), "v");
  EXPECT_EQ(c->get("made_permanent"), "w");
  EXPECT_FALSE(c->renew("absent", 3s));
  EXPECT_TRUE(gone_within(*c, "renewed", 12s)) << "a renewed lease never expired";
}

TEST(etcd_store, a_bad_ttl_is_refused_naming_the_key) {
  auto c = connect();
  try {
    c->set_with_lease("k", "v", 0ms);
    FAIL() << "a zero ttl was accepted";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("set_with_lease 'k'"), std::string::npos) << e.what();
  }
}

TEST(etcd_store, values_sealed_with_another_secret_are_refused) {
  auto mine = connect();
  auto stranger = connect("another-secret-entirely-0123");
  stranger->set("plan", "1 evil-host");
  try {
    mine->get("plan");
    FAIL() << "a value written without the job's secret was accepted";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not sealed with this job's secret"),
              std::string::npos)
      << e.what();
  }
  // Nor can the stranger's value be made to look like the expected one.
  EXPECT_THROW(mine->compare_set("plan", std::string("1 evil-host"), "x"), store_error);
  EXPECT_THROW(mine->list_values(""), store_error);
}

TEST(etcd_store, launcher_beacon_holds_its_key_and_deletes_it) {
  auto c = connect();
  {
    launcher_beacon beacon{connect(), "job"};
    EXPECT_EQ(c->get(launcher_key("job")), "");
    // Outlives its lease while the beacon renews it.
    std::this_thread::sleep_for(launcher_lease + 2s);
    EXPECT_EQ(c->get(launcher_key("job")), "");
  }
  EXPECT_EQ(c->get(launcher_key("job")), std::nullopt);
}

// A rank's launcher watch with the rendezvous in etcd: quiet while
// troupe-run's key is there, ends the process once it is gone. Exits 0 only
// if the watch never fired.
void lose_the_launcher_key(const store_endpoint& where) {
  auto c = std::make_unique<etcd_store_client>(where, test_secret, 20s);
  c->set(launcher_key("job"), "");
  troupe::workers::launcher_watch watch{where, "job", test_secret, 20s};
  std::this_thread::sleep_for(2500ms);
  c->remove(launcher_key("job"));
  std::this_thread::sleep_for(5s);
  std::exit(0);
}

TEST(etcd_store, the_launcher_watch_ends_the_rank_when_the_key_is_gone) {
  // Forked without exec: the child uses this process's etcd.
  GTEST_FLAG_SET(death_test_style, "fast");
  const auto where = etcd_server::endpoint("troupe-test/watch/");
  const auto t0 = clock_type::now();
  EXPECT_EXIT(lose_the_launcher_key(where), ::testing::KilledBySignal(SIGTERM), "");
  const auto took = clock_type::now() - t0;
  EXPECT_GE(took, 2500ms) << "the watch fired while the key was there";
  EXPECT_LT(took, 6s) << "the watch took far more than its 1 s poll to notice";
}

TEST(etcd_store, an_unreachable_etcd_fails_within_the_connect_timeout) {
  const auto t0 = clock_type::now();
  try {
    etcd_store_client c{parse_rendezvous("etcd://127.0.0.1:" + std::to_string(free_port())),
                        test_secret, 500ms};
    FAIL() << "connected to nothing";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach etcd at etcd://127.0.0.1:"),
              std::string::npos)
      << e.what();
  }
  EXPECT_LT(clock_type::now() - t0, 3s);
}

TEST(rendezvous_url, parses_hosts_ports_and_prefixes) {
  auto e = parse_rendezvous("etcd://10.0.0.1:2379");
  EXPECT_EQ(e.kind, store_endpoint::backend::etcd);
  EXPECT_EQ(e.host, "10.0.0.1");
  EXPECT_EQ(e.port, 2379);
  EXPECT_EQ(e.prefix, "troupe/");
  e = parse_rendezvous("etcd://[fe80::1]:23/a/b/");
  EXPECT_EQ(e.host, "fe80::1");
  EXPECT_EQ(e.prefix, "a/b/");
  EXPECT_EQ(e.describe(), "etcd://[fe80::1]:23/a/b/");
  for (const char* bad : {"http://h:1", "etcd://h", "etcd://h:0", "etcd://h:70000", "etcd://:1",
                          "etcd://[::1:1", "etcd://h:12x"})
    EXPECT_THROW(parse_rendezvous(bad), std::invalid_argument) << bad;
}

} // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::access(etcd_binary, X_OK) != 0) {
    std::printf("skipped: no %s (apt-get install etcd-server)\n", etcd_binary);
    return 77;
  }
  ::testing::AddGlobalTestEnvironment(new etcd_server);
  return RUN_ALL_TESTS();
}
