// elastic_driver inside job_supervisor's loop, with real (shell) workers and
// an in-memory store that fails during chosen windows, as an etcd does
// while it elects a leader (HTTP 503).
#include "elastic/launcher/elastic_driver.hpp"

#include "elastic/launcher/signals.hpp"
#include "elastic/store.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>

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

  /// The next `n` writes (set, compare_set) of keys starting with `prefix`,
  /// after the first `skip` such writes, take effect but fail all the same,
  /// as a request whose reply an etcd leader change cut off; `lost` runs at
  /// the first.
  void lose_replies(std::string prefix, int n, std::function<void()> lost, int skip = 0) {
    lost_prefix_ = std::move(prefix);
    lost_left_ = n;
    on_lost_ = std::move(lost);
    skip_left_ = skip;
  }

  void set(const std::string& key, const std::string& value) override {
    check("set '" + key + "'");
    check_write("set '" + key + "'");
    store(key, value);
    lose_reply("set '" + key + "'", key);
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
  compare_set_result compare_set(const std::string& key,
                                 const std::optional<std::string>& expected,
                                 const std::string& desired) override {
    const auto what = "compare_set '" + key + "'";
    check(what);
    check_write(what);
    compare_set_result r{false, get(key)};
    if (r.current == expected) {
      store(key, desired);
      r = {true, desired};
    }
    lose_reply(what, key);
    return r;
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
  /// Every value each key was given, in order.
  std::map<std::string, std::vector<std::string>> written;

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

  void store(const std::string& key, const std::string& value) {
    data_[key] = value;
    written[key].push_back(value);
  }

  void lose_reply(const std::string& what, const std::string& key) {
    if (lost_left_ == 0 || key.rfind(lost_prefix_, 0) != 0)
      return;
    if (skip_left_ > 0) {
      --skip_left_;
      return;
    }
    if (on_lost_)
      std::exchange(on_lost_, nullptr)();
    --lost_left_;
    ++failures;
    throw store_error("store " + where() + ": " + what +
                      ": HTTP 503: etcdserver: request timed out");
  }

  clock::time_point start_ = clock::now();
  windows windows_;
  windows write_windows_;
  std::map<std::string, std::string> data_;
  std::string lost_prefix_;
  int lost_left_ = 0;
  int skip_left_ = 0;
  std::function<void()> on_lost_;
};

struct job_result {
  int code = -1;
  std::string report;
};

// Workers on localhost running `script`: two, or up to `max_np` on the
// hosts `discovery` finds (else on localhost's `max_np` slots). A job
// still running after 20 s is stopped (exit status 124).
job_result run_job(flaky_store& store, const std::string& script, milliseconds outage_limit,
                   std::optional<discovery_poller::options> discovery = std::nullopt,
                   int max_np = 2) {
  static const int signal_fd = open_signal_fd();
  // After the signal mask: the poller's thread must not take SIGCHLD.
  auto poller = discovery ? std::make_unique<discovery_poller>(*discovery) : nullptr;
  job_result r;
  auto report = [&r](std::string_view line) { r.report += line; };
  auto quiet = [](std::string_view) {};
  job_supervisor supervisor{signal_fd, {std::chrono::seconds(20)}, report};
  elastic_driver::settings s;
  s.np = s.min_np = 2;
  s.max_np = max_np;
  s.elastic_timeout = std::chrono::seconds(10);
  s.reset_timeout = std::chrono::seconds(10);
  s.store_outage_limit = outage_limit;
  s.fixed_hosts = {{"localhost", max_np}};
  s.command = {"/bin/sh", "-c", script};
  s.parent_env = {"PATH=/usr/bin:/bin"};
  s.job.job_id = "job";
  s.own_hostname = "elastic-driver-test";
  elastic_driver driver{std::move(s), std::move(poller), std::nullopt, supervisor, store,
                        report,       quiet,              quiet};
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

// The hosts a discovery script finds (read every 20 ms), as offered last.
class hosts_file {
public:
  explicit hosts_file(const std::string& name)
    : path_(testing::TempDir() + name + "_" + std::to_string(::getpid())) {}
  ~hosts_file() {
    std::remove(path_.c_str());
  }
  hosts_file(const hosts_file&) = delete;
  hosts_file& operator=(const hosts_file&) = delete;

  void offer(const char* line) const {
    std::ofstream{path_} << line << "\n";
  }
  discovery_poller::options discovery() const {
    discovery_poller::options o;
    o.script = "cat '" + path_ + "'";
    o.env = {"PATH=/usr/bin:/bin"};
    o.interval = milliseconds{20};
    return o;
  }

private:
  std::string path_;
};

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

// A job on a store failing from the start, with a 0.5 s start timeout: it
// ends failed within 5 s, naming the store, before any epoch.
job_result run_on_a_failed_store(flaky_store& store) {
  const auto start = clock::now();
  auto r = run_job(store, "true", milliseconds{500});
  EXPECT_EQ(r.code, 1) << r.report;
  EXPECT_LT(clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(r.report.find("troupe-run: error: the rendezvous store etcd://fake:2379/troupe/ "
                          "has failed for "),
            std::string::npos)
    << r.report;
  EXPECT_EQ(r.report.find("membership epoch 0"), std::string::npos) << r.report;
  return r;
}

// A store that never comes back ends the job, naming it and the time.
TEST(elastic_driver, gives_up_on_a_store_down_past_the_start_timeout) {
  flaky_store store;
  store.down(milliseconds{0}, milliseconds{60'000});
  const auto r = run_on_a_failed_store(store);
  EXPECT_NE(r.report.find(" s (--start-timeout 0.5 s); last error: store "
                          "etcd://fake:2379/troupe/: "),
            std::string::npos)
    << r.report;
}

// A store that answers reads but refuses every write (an etcd out of
// space) is down for as long: its answering the driver's probe does not end
// the outage (that warned again every 0.25 s and never reached the start
// timeout); the job ends at the start timeout, naming the store.
TEST(elastic_driver, gives_up_on_a_store_that_refuses_writes_past_the_start_timeout) {
  flaky_store store;
  store.full(milliseconds{0}, milliseconds{60'000});
  const auto r = run_on_a_failed_store(store);
  EXPECT_GT(store.failures, 1);
  EXPECT_EQ(count(r.report, "troupe-run: warning: "), 1u) << r.report;
  EXPECT_EQ(count(r.report, " answers again "), 0u) << r.report;
  EXPECT_NE(r.report.find("database space exceeded"), std::string::npos) << r.report;
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

// A job whose epoch-0 write reached the store while its reply was lost
// (`lost`, `failures` times) and that went on with epoch 0's stored plan,
// workers 0 and 1, successfully.
void expect_stored_epoch_0(flaky_store& store, const job_result& r, const char* lost,
                           int failures) {
  EXPECT_EQ(r.code, 0) << lost << "\n" << r.report;
  EXPECT_EQ(store.failures, failures) << lost << "\n" << r.report;
  EXPECT_EQ(store.get("job/epoch"), std::optional<std::string>("0")) << lost;
  EXPECT_EQ(count(r.report, "membership epoch 0: 2 worker(s), rank order 0@localhost "
                            "1@localhost\n"),
            1u)
    << lost << "\n" << r.report;
}

// The first write of epoch 0's plan (then of the epoch) reaches the store
// but its reply is lost, and discovery finds a third slot before the
// retries: the plan stored first stands (workers may have read it), and the
// driver goes on with it. (The retry used to write another plan, seating a
// third worker in the same epoch.)
TEST(elastic_driver, never_replaces_a_stored_plan) {
  const hosts_file hosts{"elastic_driver_hosts"};
  const auto first = encode_plan({{0, "localhost"}, {1, "localhost"}});
  for (const char* lost : {"job/plan/0", "job/epoch"}) {
    hosts.offer("localhost:2");
    flaky_store store;
    store.lose_replies(lost, 3, [&] { hosts.offer("localhost:3"); });
    const auto r = run_job(store, "sleep 0.3", std::chrono::seconds(5), hosts.discovery(), 3);
    expect_stored_epoch_0(store, r, lost, 3);
    EXPECT_EQ(store.written["job/plan/0"], std::vector<std::string>{first})
      << lost << "\n" << r.report;
    EXPECT_EQ(count(r.report, "membership epoch 0:"), 1u) << lost << "\n" << r.report;
  }
}

// Three workers, of whom 0 and 1 arrived at epoch 1 from the start (as
// written here), and epoch 1's plan whose reply is lost 4 times; `script`
// says who leaves when.
job_result run_with_lost_epoch_1_replies(flaky_store& store, const std::string& script) {
  store.set("job/arrive/1/0", "1");
  store.set("job/arrive/1/1", "1");
  store.lose_replies("job/plan/1", 4, nullptr);
  return run_job(store, script, std::chrono::seconds(5), std::nullopt, 3);
}

// Epoch 1's plan (0, 1 and a new 3: 2 left) is stored, but its reply is
// lost, and worker 1 leaves before the retries: the driver adopts the
// stored plan with worker 1 gone, and opens epoch 2's barrier at once (its
// peers cannot start epoch 1 without it).
TEST(elastic_driver, adopts_a_stored_plan_whose_member_left_meanwhile) {
  flaky_store store;
  const auto r = run_with_lost_epoch_1_replies(
    store, "case $TROUPE_WORKER_ID in 0) sleep 3;; 1) sleep 0.6;; 2) sleep 0.2;; esac");
  EXPECT_EQ(r.code, 0) << r.report;
  EXPECT_EQ(store.written["job/plan/1"],
            std::vector<std::string>{encode_plan({{0, "localhost"}, {1, "localhost"},
                                                  {3, "localhost"}})})
    << r.report;
  EXPECT_EQ(count(r.report, "membership epoch 1: 3 worker(s), rank order 0@localhost "
                            "1@localhost 3@localhost\n"),
            1u)
    << r.report;
  EXPECT_EQ(count(r.report, "a member exited before its epoch was published; reset barrier "
                            "of membership epoch 2 open"),
            1u)
    << r.report;
}

// As above, but both members epoch 1's stored plan keeps exit while its
// reply is lost, one of them failing: its newcomer would have nobody to
// sync state from, so the job ends as when nobody survives, failed, and
// the newcomer is never started.
TEST(elastic_driver, ends_instead_of_adopting_a_stored_plan_whose_members_all_left) {
  flaky_store store;
  const auto r = run_with_lost_epoch_1_replies(
    store, "case $TROUPE_WORKER_ID in 0) sleep 0.5; exit 3;; 1) sleep 0.6;; 2) sleep 0.2;; "
           "3) echo newcomer started;; esac");
  EXPECT_EQ(r.code, 3) << r.report;
  EXPECT_EQ(count(r.report, "newcomer started"), 0u) << r.report;
  EXPECT_EQ(count(r.report, "membership epoch 1:"), 0u) << r.report;
  EXPECT_EQ(count(r.report, "has exited; one failed, so the job failed"), 1u) << r.report;
}

// Epoch 0 (its plan, then the epoch) is written but the reply is lost, and
// discovery drops to one slot, below --np 2, before the retry: workers may
// have joined epoch 0, so the driver goes on with its stored plan. (The retry
// used to plan again, found too few slots and waited for them until the
// elastic timeout, while the workers waited for the peers nobody spawned.)
TEST(elastic_driver, starts_a_stored_epoch_whatever_the_hosts_did_since) {
  const hosts_file hosts{"elastic_driver_start"};
  for (const char* lost : {"job/plan/0", "job/epoch"}) {
    hosts.offer("localhost:2");
    flaky_store store;
    store.lose_replies(lost, 1, [&] { hosts.offer("localhost:1"); });
    const auto r = run_job(store, "sleep 0.5", std::chrono::seconds(5), hosts.discovery());
    expect_stored_epoch_0(store, r, lost, 1);
    EXPECT_EQ(count(r.report, "Timed out waiting"), 0u) << lost << "\n" << r.report;
  }
}

// The same at a reset: worker 2 leaves, epoch 1's plan (0, 1 and a new 3)
// and then its epoch are written but the reply is lost, and discovery drops
// to one slot, below --min-np 2, before the retry: the driver adopts the
// stored plan and starts worker 3, instead of waiting for slots at epoch 0
// while workers 0 and 1 wait in epoch 1 for it. Workers 0 and 1 arrived at
// epoch 1 from the start (as written here).
TEST(elastic_driver, adopts_a_stored_epoch_whatever_the_hosts_did_since) {
  const hosts_file hosts{"elastic_driver_reset"};
  // Epoch 0's write of the epoch key goes through.
  for (auto [lost, skip] : {std::pair{"job/plan/1", 0}, std::pair{"job/epoch", 1}}) {
    hosts.offer("localhost:3");
    flaky_store store;
    store.set("job/arrive/1/0", "1");
    store.set("job/arrive/1/1", "1");
    store.lose_replies(lost, 1, [&] { hosts.offer("localhost:1"); }, skip);
    const auto r = run_job(store,
                           "case $TROUPE_WORKER_ID in 2) sleep 0.2;; *) sleep 1.2;; esac",
                           std::chrono::seconds(5), hosts.discovery(), 3);
    EXPECT_EQ(r.code, 0) << lost << "\n" << r.report;
    EXPECT_EQ(store.failures, 1) << lost << "\n" << r.report;
    EXPECT_EQ(store.written["job/plan/1"],
              std::vector<std::string>{encode_plan({{0, "localhost"}, {1, "localhost"},
                                                    {3, "localhost"}})})
      << lost << "\n" << r.report;
    EXPECT_EQ(store.get("job/epoch"), std::optional<std::string>("1")) << lost;
    EXPECT_EQ(count(r.report, "membership epoch 1: 3 worker(s), rank order 0@localhost "
                              "1@localhost 3@localhost\n"),
              1u)
      << lost << "\n" << r.report;
    EXPECT_EQ(count(r.report, "below --min-np"), 0u) << lost << "\n" << r.report;
  }
}

} // namespace
} // namespace troupe::elastic::launcher
