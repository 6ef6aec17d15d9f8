// elastic_driver inside job_supervisor's loop, with real (shell) workers and
// an in-memory store that fails during chosen windows, as an etcd does
// while it elects a leader (HTTP 503).
#include "elastic/launcher/elastic_driver.hpp"

#include "elastic/launcher/signals.hpp"
#include "elastic/store.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

namespace troupe::elastic::launcher {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class flaky_store final : public store_client {
public:
  /// Fails every request between `from` and `to` after its construction.
  void down(milliseconds from, milliseconds to) {
    windows_.emplace_back(start_ + from, start_ + to);
  }

  /// Fails every write (not reads) between `from` and `to`, as an etcd
  /// with its NOSPACE alarm raised.
  void full(milliseconds from, milliseconds to) {
    write_windows_.emplace_back(start_ + from, start_ + to);
  }

  void set(const std::string& key, const std::string& value) override {
    check("set '" + key + "'");
    check_write("set '" + key + "'");
    data_[key] = value;
  }
  std::optional<std::string> get(const std::string& key) override {
    check("get '" + key + "'");
    auto it = data_.find(key);
    return it == data_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  int64_t add(const std::string&, int64_t) override {
    throw store_error("not used");
  }
  bool remove(const std::string& key) override {
    check("remove '" + key + "'");
    check_write("remove '" + key + "'");
    return data_.erase(key) > 0;
  }
  compare_set_result compare_set(const std::string&, const std::optional<std::string>&,
                                 const std::string&) override {
    throw store_error("not used");
  }
  std::vector<std::string> list(const std::string& prefix) override {
    std::vector<std::string> out;
    for (const auto& [k, v] : list_values(prefix))
      out.push_back(k);
    return out;
  }
  std::map<std::string, std::string> list_values(const std::string& prefix) override {
    check("list '" + prefix + "'");
    std::map<std::string, std::string> out;
    for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.rfind(prefix, 0) == 0;
         ++it)
      out.insert(*it);
    return out;
  }
  void set_with_lease(const std::string& key, const std::string& value,
                      milliseconds) override {
    set(key, value);
  }
  bool renew(const std::string& key, milliseconds) override {
    return get(key).has_value();
  }
  bool wait(const std::vector<std::string>&, milliseconds) override {
    throw store_error("not used");
  }
  std::string where() const override {
    return "etcd://fake:2379/troupe/";
  }

  int failures = 0;

private:
  using windows = std::vector<std::pair<clock::time_point, clock::time_point>>;

  // Throws, as the store would, inside any of `during`.
  void fail_in(const windows& during, const std::string& what, const char* reply) {
    const auto now = clock::now();
    for (const auto& [from, to] : during)
      if (now >= from && now < to) {
        ++failures;
        throw store_error("store " + where() + ": " + what + ": " + reply);
      }
  }

  void check(const std::string& what) {
    fail_in(windows_, what, "HTTP 503: etcdserver: leader changed");
  }

  void check_write(const std::string& what) {
    fail_in(write_windows_, what, "HTTP 400: etcdserver: mvcc: database space exceeded");
  }

  clock::time_point start_ = clock::now();
  windows windows_;
  windows write_windows_;
  std::map<std::string, std::string> data_;
};

struct job_result {
  int code = -1;
  std::string report;
};

// Two workers on localhost running `script`.
job_result run_job(flaky_store& store, const std::string& script, milliseconds outage_limit) {
  static const int signal_fd = open_signal_fd();
  job_result r;
  auto report = [&r](std::string_view line) { r.report += line; };
  auto quiet = [](std::string_view) {};
  job_supervisor supervisor{signal_fd, {}, report};
  elastic_driver::settings s;
  s.np = s.min_np = s.max_np = 2;
  s.elastic_timeout = std::chrono::seconds(10);
  s.reset_timeout = std::chrono::seconds(10);
  s.store_outage_limit = outage_limit;
  s.fixed_hosts = {{"localhost", 2}};
  s.command = {"/bin/sh", "-c", script};
  s.parent_env = {"PATH=/usr/bin:/bin"};
  s.job.job_id = "job";
  s.own_hostname = "elastic-driver-test";
  elastic_driver driver{std::move(s), nullptr, std::nullopt, supervisor, store,
                        report,       quiet,   quiet};
  supervisor.set_policy(driver.policy());
  r.code = supervisor.run();
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

// Down at the start (no plan can be written), and again while the workers
// exit (the barrier cannot be read): each outage is warned about once,
// its end is reported, and the job ends as it would have: exit 0.
TEST(elastic_driver, rides_out_store_outages) {
  flaky_store store;
  store.down(milliseconds{0}, milliseconds{600});
  store.down(milliseconds{900}, milliseconds{1500});
  const auto r = run_job(store, "sleep 0.3", std::chrono::seconds(5));
  EXPECT_EQ(r.code, 0) << r.report;
  EXPECT_GT(store.failures, 2);
  EXPECT_EQ(count(r.report, "troupe-run: warning: store etcd://fake:2379/troupe/: "), 2u)
    << r.report;
  EXPECT_EQ(count(r.report, "HTTP 503: etcdserver: leader changed; retrying for up to 5 s "
                            "(--start-timeout)"),
            2u)
    << r.report;
  EXPECT_EQ(count(r.report, " answers again after "), 2u) << r.report;
  EXPECT_EQ(count(r.report, "membership epoch 0: 2 worker(s)"), 1u) << r.report;
}

// A store that never comes back ends the job, naming it and the time.
TEST(elastic_driver, gives_up_on_a_store_down_past_the_start_timeout) {
  flaky_store store;
  store.down(milliseconds{0}, milliseconds{60'000});
  const auto start = clock::now();
  const auto r = run_job(store, "true", milliseconds{500});
  EXPECT_EQ(r.code, 1) << r.report;
  EXPECT_LT(clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(r.report.find("troupe-run: error: the rendezvous store etcd://fake:2379/troupe/ "
                          "has failed for "),
            std::string::npos)
    << r.report;
  EXPECT_NE(r.report.find(" s (--start-timeout 0.5 s); last error: store "
                          "etcd://fake:2379/troupe/: "),
            std::string::npos)
    << r.report;
  EXPECT_EQ(r.report.find("membership epoch 0"), std::string::npos) << r.report;
}

// A store that answers reads but refuses every write (an etcd out of
// space) is down for as long: its answering the driver's probe does not end
// the outage (that warned again every 0.25 s and never reached the start
// timeout); the job ends at the start timeout, naming the store.
TEST(elastic_driver, gives_up_on_a_store_that_refuses_writes_past_the_start_timeout) {
  flaky_store store;
  store.full(milliseconds{0}, milliseconds{60'000});
  const auto start = clock::now();
  const auto r = run_job(store, "true", milliseconds{500});
  EXPECT_EQ(r.code, 1) << r.report;
  EXPECT_LT(clock::now() - start, std::chrono::seconds(5));
  EXPECT_GT(store.failures, 1);
  EXPECT_EQ(count(r.report, "troupe-run: warning: "), 1u) << r.report;
  EXPECT_EQ(count(r.report, " answers again "), 0u) << r.report;
  EXPECT_NE(r.report.find("troupe-run: error: the rendezvous store etcd://fake:2379/troupe/ "
                          "has failed for "),
            std::string::npos)
    << r.report;
  EXPECT_NE(r.report.find("database space exceeded"), std::string::npos) << r.report;
  EXPECT_EQ(r.report.find("membership epoch 0"), std::string::npos) << r.report;
}

// A worker that fails before its peers connected: troupe-run says in the
// store that the next epoch's reset barrier is open (<job>/barrier/1), so
// that the peers still waiting for its endpoint give epoch 0 up at once,
// not at their start timeout. Written once the store answers again when it
// was down as the barrier opened.
TEST(elastic_driver, tells_the_workers_when_it_opens_a_reset_barrier) {
  for (bool outage : {false, true}) {
    flaky_store store;
    if (outage)
      store.down(milliseconds{300}, milliseconds{900});
    const auto r = run_job(
      store, "case $HOROVOD_RANK in 1) sleep 0.4; exit 3;; *) sleep 1.5;; esac",
      std::chrono::seconds(5));
    EXPECT_EQ(r.code, 3) << r.report;
    EXPECT_EQ(store.get("job/barrier/1"), std::optional<std::string>("a worker failed"))
      << r.report;
    EXPECT_FALSE(store.get("job/barrier/0")) << r.report;
    EXPECT_FALSE(store.get("job/barrier/2")) << r.report;
  }
}

} // namespace
} // namespace troupe::elastic::launcher
