#include "autotune/parameter_search.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autotune/autotune_log.hpp"

namespace troupe::autotune {
namespace {

// A CPU host's throughput: best with small fused buffers (~256 KiB), worse
// with any cycle time, slightly better with the cache.
double throughput(const settings& s) {
  const double f = std::log2(static_cast<double>(std::max<int64_t>(s.fusion_threshold, 1)));
  return 100 * std::exp(-(f - 18) * (f - 18) / 18) / (1 + 0.2 * s.cycle_time_ms) *
         (s.cache_enabled ? 1.0 : 0.9);
}
const double best_throughput = 100;

search_options defaults() {
  search_options o;
  o.initial = {128 << 20, 0.0, true};
  o.seed = 1;
  return o;
}

// Runs the search to its end; returns the settings it ran, sample by sample.
std::vector<settings> run_to_end(parameter_search& search, int* scored = nullptr) {
  std::vector<settings> ran;
  for (int i = 0; i < 10000 && search.active(); ++i) {
    ran.push_back(search.current());
    auto step = search.record(throughput(search.current()));
    if (step.scored && scored)
      ++*scored;
  }
  return ran;
}

TEST(ParameterSearch, DiscardsWarmupThenFindsTheBestSettingWithinFivePercent) {
  auto o = defaults();
  parameter_search search(o);
  for (int i = 0; i < o.warmup_samples; ++i) {
    EXPECT_EQ(search.warmup_left(), o.warmup_samples - i);
    auto step = search.record(1e12);  // a warm-up score never counts
    EXPECT_FALSE(step.scored);
    EXPECT_FALSE(step.changed);
  }
  int scored = 0;
  auto ran = run_to_end(search, &scored);
  EXPECT_EQ(scored, o.max_samples + 1);  // Bayesian samples, then the cache flipped
  EXPECT_EQ(ran.size(), static_cast<size_t>((o.max_samples + 1) * o.samples_per_setting));
  ASSERT_TRUE(search.best());
  EXPECT_EQ(search.current(), *search.best());
  EXPECT_GE(throughput(search.current()), 0.95 * best_throughput);
  EXPECT_TRUE(search.current().cache_enabled);
  EXPECT_EQ(ran.front(), o.initial);  // the configured setting is the first candidate
}

TEST(ParameterSearch, ScoresASettingByTheMedianOfItsSamples) {
  auto o = defaults();
  o.warmup_samples = 0;
  o.samples_per_setting = 5;
  parameter_search search(o);
  parameter_search::step step;
  for (double s : {5.0, 1.0, 1000.0, 3.0, 4.0})
    step = search.record(s);
  ASSERT_TRUE(step.scored);
  EXPECT_EQ(*step.scored, o.initial);
  EXPECT_EQ(step.score, 4.0);
  EXPECT_TRUE(step.changed);
  EXPECT_NE(search.current(), o.initial);
}

TEST(ParameterSearch, FixedSettingsNeverChange) {
  auto o = defaults();
  o.tune_fusion = false;
  o.initial.fusion_threshold = 1 << 20;
  parameter_search search(o);
  for (const auto& s : run_to_end(search))
    EXPECT_EQ(s.fusion_threshold, 1 << 20);
  EXPECT_EQ(search.current().fusion_threshold, 1 << 20);

  o = defaults();
  o.tune_cycle = false;
  o.tune_cache = false;
  o.initial.cycle_time_ms = 2.5;
  parameter_search other(o);
  bool fusion_moved = false;
  for (const auto& s : run_to_end(other)) {
    EXPECT_EQ(s.cycle_time_ms, 2.5);
    EXPECT_TRUE(s.cache_enabled);
    fusion_moved = fusion_moved || s.fusion_threshold != o.initial.fusion_threshold;
  }
  EXPECT_TRUE(fusion_moved);
}

TEST(ParameterSearch, OnlyTheCacheTunedComparesItBothWays) {
  auto o = defaults();
  o.tune_fusion = o.tune_cycle = false;
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  parameter_search search(o);
  auto ran = run_to_end(search);
  ASSERT_EQ(ran.size(), 2u);
  EXPECT_TRUE(ran[0].cache_enabled);
  EXPECT_FALSE(ran[1].cache_enabled);
  EXPECT_TRUE(search.current().cache_enabled);  // 10 % faster with it
}

TEST(ParameterSearch, NothingTunedEndsAfterWarmupWithTheInitialSetting) {
  auto o = defaults();
  o.tune_fusion = o.tune_cycle = o.tune_cache = false;
  parameter_search search(o);
  EXPECT_TRUE(search.active());
  for (int i = 0; i < o.warmup_samples; ++i)
    search.record(1);
  EXPECT_FALSE(search.active());
  EXPECT_EQ(search.current(), o.initial);
  EXPECT_FALSE(search.record(1).scored);
}

TEST(ParameterSearch, NonFiniteScoresCountAsZeroAndBadOptionsThrow) {
  auto o = defaults();
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  parameter_search search(o);
  auto step = search.record(std::nan(""));
  ASSERT_TRUE(step.scored);
  EXPECT_EQ(step.score, 0.0);
  o.samples_per_setting = 0;
  EXPECT_THROW(parameter_search{o}, std::invalid_argument);
  o = defaults();
  o.max_samples = 0;
  EXPECT_THROW(parameter_search{o}, std::invalid_argument);
  o = defaults();
  o.warmup_samples = -1;
  EXPECT_THROW(parameter_search{o}, std::invalid_argument);
}

TEST(AutotuneLog, WritesHorovodsHeaderAndOneRowPerSetting) {
  const std::string path = testing::TempDir() + "autotune_log_test.csv";
  {
    autotune_log log(path);
    log.row({64 << 10, 1.5, true}, 2.5e9);
    log.row({4 << 20, 0.0, false}, 1e6);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
            "cycle_time_ms,tensor_fusion_threshold,score\n"
            "0,0,0,1,1.5,0.0625,2500\n"
            "0,0,0,0,0,4,1\n");
  std::remove(path.c_str());
  EXPECT_THROW(autotune_log("/nonexistent-dir/x.csv"), std::runtime_error);
}

TEST(AutotuneLog, PathNamesTheSetAndEpoch) {
  EXPECT_EQ(log_path("tune.csv", 0, 0), "tune.csv");
  EXPECT_EQ(log_path("/a.b/tune.csv", 2, 0), "/a.b/tune.set2.csv");
  EXPECT_EQ(log_path("tune.csv", 0, 3), "tune.epoch3.csv");
  EXPECT_EQ(log_path("/a.b/tune", 1, 1), "/a.b/tune.set1.epoch1");
  EXPECT_EQ(log_path("/tmp/.hidden", 1, 0), "/tmp/.hidden.set1");
}

} // namespace
} // namespace troupe::autotune
