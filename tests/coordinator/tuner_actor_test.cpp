// A process set's tuner driven by a stand-in coordinator, which applies the
// settings changes it takes in the order it takes them, at its next list,
// the application's kept over the tuner's, as coordinator_actor does: what
// the tuner sends, what its log and gauges say, and what is in force, once
// the application changes settings (troupe::tune).
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "coordinator/tuner_actor.hpp"
#include "metrics/rank_metrics.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {
namespace {

using namespace std::chrono_literals;
using namespace troupe::actors;

// The coordinator's side: changes merged as they arrive, applied (and the
// settings generation counted) at the next list; the application's settings
// stay in force whatever the tuner's changes say. What is checked here is
// what the tuner sends, logs and exposes; that the real coordinator keeps
// the application's settings over its tuner's is
// actor_protocol.coordinator_keeps_the_applications_settings_over_its_tuners.
struct stand_in {
  v1::Tuning in_force;
  v1::Tuning pinned;
  std::optional<v1::Tuning> pending;
  uint64_t generation = 0;
  std::vector<v1::Tuning> from_tuner;

  void take(const v1::Tuning& change) {
    if (!pending)
      pending.emplace();
    pending->MergeFrom(change);
  }
  // The generation of the next list, which carries the pending change.
  uint64_t next_list() {
    if (pending) {
      in_force.MergeFrom(*pending);
      in_force.MergeFrom(pinned);
      pending.reset();
      ++generation;
    }
    return generation;
  }
};

v1::Tuning cache_capacity(int64_t entries) {
  v1::Tuning t;
  t.set_cache_capacity(entries);
  return t;
}

class tuner_actor_test : public ::testing::Test {
protected:
  tuner_actor_test() : sys_{cfg_}, metrics_{{0, 1, 0}, "gloo"}, self_{sys_} {
    log_path_ = testing::TempDir() + "tuner_actor_test." + std::to_string(::getpid()) + ".csv";
    coordinator_.in_force.set_fusion_threshold(int64_t{1} << 20);
    coordinator_.in_force.set_cycle_time_us(0);
    coordinator_.in_force.set_cache_capacity(1024);
    coordinator_.in_force.set_fusion_chunk_bytes(-1);
  }
  ~tuner_actor_test() override {
    std::remove(log_path_.c_str());
  }

  // One sample per setting and per step, no warm-up, no re-scoring.
  tuner_options options(bool cache_on) {
    tuner_options o;
    o.search.initial = {int64_t{1} << 20, 0, cache_on, -1};
    o.search.tune_fusion = false;
    o.search.tune_chunk = false;
    o.search.warmup_samples = 0;
    o.search.max_samples = 3;
    o.search.samples_per_setting = 1;
    o.search.finalists = 0;
    o.steps_per_sample = 1;
    o.log_path = log_path_;
    o.metrics = metrics_.for_autotune(0);
    if (!cache_on)
      coordinator_.in_force.set_cache_capacity(0);
    return o;
  }

  void spawn(tuner_options o) {
    tuner_ = spawn_tuner(sys_, caf::actor_cast<coordinator_actor>(self_), std::move(o));
    self_->monitor(tuner_);
  }

  // The application's change: the coordinator takes it, then tells the
  // tuner.
  void application_sets(const v1::Tuning& change) {
    coordinator_.take(change);
    coordinator_.pinned.MergeFrom(change);
    self_->send(tuner_, tune_atom::value, change.SerializeAsString());
  }

  // Takes what the tuner sent within `wait` (into `held_` while `hold_`);
  // notes the tuner's stop.
  void receive(std::chrono::milliseconds wait) {
    for (bool more = true; more;) {
      more = false;
      self_->receive(
        [&](tune_atom, const std::string& bytes) {
          v1::Tuning t;
          ASSERT_TRUE(t.ParseFromString(bytes));
          if (hold_) {
            held_.push_back(t);
          } else {
            coordinator_.take(t);
            coordinator_.from_tuner.push_back(t);
          }
          more = true;
        },
        [&](caf::down_msg&) { stopped_ = true; },
        caf::after(wait) >> [] {});
    }
  }

  // Runs training steps of one list each until `done` holds (true) or the
  // tuner stops or 500 lists went by (false). A list moves 8 MiB with the
  // cache on, 1 MiB with it off: the tuner prefers the cache on.
  bool run_until(const std::function<bool()>& done) {
    for (int list = 0; list < 500 && !stopped_; ++list) {
      if (done())
        return true;
      const auto generation = coordinator_.next_list();
      const uint64_t bytes = coordinator_.in_force.cache_capacity() > 0 ? 8 << 20 : 1 << 20;
      self_->send(tuner_, executed_atom::value, generation, true,
                  list_stats{1, bytes, 0.001, -1});
      receive(1ms);
    }
    return done();
  }

  // The cache_enabled column of the log's rows.
  std::vector<std::string> logged_cache() const {
    std::ifstream in{log_path_};
    std::vector<std::string> column;
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      size_t at = 0;
      for (int comma = 0; comma < 3; ++comma)
        at = line.find(',', at) + 1;
      column.push_back(line.substr(at, line.find(',', at) - at));
    }
    return column;
  }

  bool exposes(const std::string& line) const {
    return prometheus::TextSerializer{}.Serialize(metrics_.registry()->Collect()).find(line) !=
           std::string::npos;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  metrics::rank_metrics metrics_;
  caf::scoped_actor self_;
  std::string log_path_;
  stand_in coordinator_;
  tuner_actor tuner_;
  bool stopped_ = false;
  bool hold_ = false;
  std::vector<v1::Tuning> held_;
};

// The application turns the cache off while the tuner searches cycle time
// and cache: the tuner searches the cycle time alone and never sends a cache
// capacity again (the coordinator keeps the application's), and its log and
// gauges say the cache is off.
TEST_F(tuner_actor_test, keeps_the_applications_setting_and_reports_it) {
  spawn(options(true));
  ASSERT_TRUE(run_until([&] { return !coordinator_.from_tuner.empty(); }));
  const size_t before = coordinator_.from_tuner.size();
  application_sets(cache_capacity(0));
  // The gauge changes when the search starts again, after the rows of the
  // search before.
  ASSERT_TRUE(
    run_until([&] { return exposes("troupe_autotune_cache_enabled{process_set=\"0\"} 0\n"); }));
  const size_t rows_before = logged_cache().size();
  EXPECT_TRUE(exposes("troupe_autotune_active{process_set=\"0\"} 1\n"));
  ASSERT_TRUE(run_until([&] { return stopped_; }));
  for (size_t i = before; i < coordinator_.from_tuner.size(); ++i)
    EXPECT_FALSE(coordinator_.from_tuner[i].has_cache_capacity()) << i;
  const auto rows = logged_cache();
  ASSERT_GT(rows.size(), rows_before);  // the search went on, the frozen row last
  for (size_t i = rows_before; i < rows.size(); ++i)
    EXPECT_EQ(rows[i], "0") << "row " << i;
}

// The tuner searches only the cache, configured off; its change turning it
// on reaches the coordinator after the application's turning it off, which
// stays in force. The tuner has nothing left to search: it stops without
// sending anything more, its last row what is in force.
TEST_F(tuner_actor_test, stops_when_the_application_sets_all_it_searches) {
  auto o = options(false);
  o.search.tune_cycle = false;
  spawn(std::move(o));
  hold_ = true;
  ASSERT_TRUE(run_until([&] { return !held_.empty(); }));
  hold_ = false;
  ASSERT_EQ(held_.size(), 1u);
  ASSERT_EQ(held_[0].cache_capacity(), 1024);
  application_sets(cache_capacity(0));
  coordinator_.take(held_[0]);
  ASSERT_TRUE(run_until([&] { return stopped_; }));
  EXPECT_TRUE(coordinator_.from_tuner.empty());
  ASSERT_FALSE(logged_cache().empty());
  EXPECT_EQ(logged_cache().back(), "0");
}

} // namespace
} // namespace troupe::coordinator
