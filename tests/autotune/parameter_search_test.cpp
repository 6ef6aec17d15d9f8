#include "autotune/parameter_search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autotune/autotune_log.hpp"

namespace troupe::autotune {
namespace {

// A CPU host's throughput: best with small fused buffers (~256 KiB), worse
// with any cycle time, slightly better with the cache; 1 MiB chunks best,
// whole buffers worst, the configured chunk (-1) in between.
double throughput(const settings& s) {
  const double f = std::log2(static_cast<double>(std::max<int64_t>(s.fusion_threshold, 1)));
  const double chunk = s.fusion_chunk_bytes == 1 << 20 ? 1.0
                       : s.fusion_chunk_bytes == 0     ? 0.7
                                                       : 0.9;
  return 100 * std::exp(-(f - 18) * (f - 18) / 18) / (1 + 0.2 * s.cycle_time_ms) *
         (s.cache_enabled ? 1.0 : 0.9) * chunk;
}
const double best_throughput = 100;

// The chunk stage has tests of its own (ChunkStage*): the others leave it
// out, so their counts are those of the continuous search and the cache.
search_options defaults() {
  search_options o;
  o.initial = {128 << 20, 0.0, true, 1 << 20};
  o.tune_chunk = false;
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
  // Then the finalists: the 3 best and the configured setting, a sample of
  // each per round.
  EXPECT_EQ(ran.size(), static_cast<size_t>((o.max_samples + 1 + o.finalists + 1) *
                                            o.samples_per_setting));
  ASSERT_TRUE(search.best());
  EXPECT_EQ(search.current(), *search.best());
  EXPECT_GE(throughput(search.current()), 0.95 * best_throughput);
  EXPECT_TRUE(search.current().cache_enabled);
  EXPECT_EQ(ran.front(), o.initial);  // the configured setting is the first candidate
}

// A shared host: every sample's score is the setting's throughput times
// log-normal noise (sigma `jitter`), and now and then another job's burst
// takes `burst_loss` of it for a stretch of samples.
struct noisy_host {
  std::mt19937_64 rng;
  double jitter;
  double burst_loss;
  int burst_max;
  int burst_left = 0;

  noisy_host(uint64_t seed, double jitter, double burst_loss, int burst_max)
    : rng(seed), jitter(jitter), burst_loss(burst_loss), burst_max(burst_max) {}

  double sample(const settings& s) {
    if (burst_left > 0)
      --burst_left;
    else if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.03)
      burst_left = std::uniform_int_distribution<int>(burst_max / 4, burst_max)(rng);
    const double load = burst_left > 0 ? 1 - burst_loss : 1;
    return throughput(s) * load * std::exp(std::normal_distribution<double>(0, jitter)(rng));
  }
};

// Of `runs` searches (seeds 1..runs) on a noisy host, how many froze a
// setting whose throughput is within 5 % of the fastest setting they ran.
int froze_within_five_percent(int finalists, int runs, double jitter, double burst_loss,
                              int burst_max) {
  int good = 0;
  for (int seed = 1; seed <= runs; ++seed) {
    auto o = defaults();
    o.seed = static_cast<uint64_t>(seed);
    o.finalists = finalists;
    parameter_search search(o);
    noisy_host host(static_cast<uint64_t>(seed) * 7919, jitter, burst_loss, burst_max);
    double fastest = 0;
    for (int i = 0; i < 10000 && search.active(); ++i) {
      fastest = std::max(fastest, throughput(search.current()));
      search.record(host.sample(search.current()));
    }
    EXPECT_FALSE(search.active()) << "seed " << seed;
    good += throughput(search.current()) >= 0.95 * fastest;
  }
  return good;
}

TEST(ParameterSearch, RescoringFinalistsFreezesANearBestSettingDespiteLoadBursts) {
  // Bursts of 50-200 samples that halve every score (another job on the
  // host) and 5 % jitter per sample. Measured with these seeds: 32 of 40
  // runs froze a setting within 5 % of the fastest one they ran, against 24
  // of 40 freezing the best scored setting (finalists = 0, Horovod's way).
  const int rescored = froze_within_five_percent(3, 40, 0.05, 0.5, 200);
  const int best_scored = froze_within_five_percent(0, 40, 0.05, 0.5, 200);
  EXPECT_GE(rescored, 30);
  EXPECT_GT(rescored, best_scored);
  // Deterministic with a seed.
  EXPECT_EQ(froze_within_five_percent(3, 5, 0.05, 0.5, 200),
            froze_within_five_percent(3, 5, 0.05, 0.5, 200));
}

TEST(ParameterSearch, ReScoresTheBestSettingsAndTheConfiguredOneInRotatingRounds) {
  auto o = defaults();
  o.warmup_samples = 0;
  o.max_samples = 6;
  o.samples_per_setting = 3;
  parameter_search search(o);
  std::vector<settings> scored;
  std::vector<double> scores;
  std::vector<scored_setting> rescored;
  std::vector<settings> ran;
  bool rescoring = false;
  for (int i = 0; i < 1000 && search.active(); ++i) {
    if (rescoring)
      ran.push_back(search.current());
    // The configured setting scores low during the search (a burst), then
    // runs fastest when the finalists are scored again.
    const bool initial = search.current() == o.initial;
    auto step = search.record(initial ? (rescoring ? 200.0 : 1.0) : throughput(search.current()));
    if (step.scored) {
      scored.push_back(*step.scored);
      scores.push_back(step.score);
    }
    rescored = step.rescored;
    rescoring = scored.size() == static_cast<size_t>(o.max_samples + 1);
  }
  ASSERT_FALSE(search.active());
  ASSERT_EQ(scored.size(), static_cast<size_t>(o.max_samples + 1));  // Bayesian, cache flipped
  ASSERT_EQ(rescored.size(), 4u);  // the 3 best scored, then the configured one
  EXPECT_EQ(rescored.back().setting, o.initial);
  std::vector<size_t> order(scored.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(rescored[i].setting, scored[order[i]]) << "finalist " << i;
  // 3 rounds of one sample each, each round starting one finalist later.
  ASSERT_EQ(ran.size(), 12u);
  for (size_t k = 0; k < ran.size(); ++k)
    EXPECT_EQ(ran[k], rescored[(k + k / 4) % 4].setting) << "sample " << k;
  // The configured setting wins the re-scoring and is frozen.
  EXPECT_EQ(search.current(), o.initial);
  EXPECT_EQ(*search.best(), o.initial);
  EXPECT_GT(search.best_score(), rescored[0].score);
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
  o.initial.fusion_chunk_bytes = 8192;
  parameter_search other(o);
  bool fusion_moved = false;
  for (const auto& s : run_to_end(other)) {
    EXPECT_EQ(s.cycle_time_ms, 2.5);
    EXPECT_TRUE(s.cache_enabled);
    EXPECT_EQ(s.fusion_chunk_bytes, 8192);
    fusion_moved = fusion_moved || s.fusion_threshold != o.initial.fusion_threshold;
  }
  EXPECT_TRUE(fusion_moved);
}

TEST(ParameterSearch, ChunkStageTriesEveryOtherChunkOnTheBestSettingAfterTheCache) {
  auto o = defaults();
  o.tune_chunk = true;
  o.initial.fusion_chunk_bytes = -1;  // the configured one (the communicator's)
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  o.max_samples = 4;
  parameter_search search(o);
  int scored = 0;
  auto ran = run_to_end(search, &scored);
  EXPECT_EQ(scored, o.max_samples + 1 + 2);  // Bayesian, the cache, then whole and 1 MiB
  ASSERT_GE(ran.size(), 7u);
  for (size_t i = 0; i <= static_cast<size_t>(o.max_samples); ++i)
    EXPECT_EQ(ran[i].fusion_chunk_bytes, -1) << "sample " << i;
  // Each on the best setting so far, which differs from it in the chunk
  // only.
  EXPECT_EQ(ran[5].fusion_chunk_bytes, 0);
  EXPECT_EQ(ran[6].fusion_chunk_bytes, 1 << 20);
  auto same_but_chunk = [](settings a, const settings& b) {
    a.fusion_chunk_bytes = b.fusion_chunk_bytes;
    return a == b;
  };
  EXPECT_TRUE(same_but_chunk(ran[5], ran[6]));
  EXPECT_EQ(search.current().fusion_chunk_bytes, 1 << 20);  // the fastest
}

TEST(ParameterSearch, ChunkStageSkipsTheChunkTheConfiguredOneComesTo) {
  // The configured chunk (-1) is 1 MiB on this set's backend: the chunk
  // stage tries whole buffers only, not 1 MiB a second time.
  auto o = defaults();
  o.tune_chunk = true;
  o.initial.fusion_chunk_bytes = -1;
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  o.max_samples = 4;
  o.finalists = 0;
  parameter_search search(o);
  search.configured_chunk_is(1 << 20);
  search.configured_chunk_is(0);  // a late list that ran whole: the first answer stands
  int scored = 0;
  auto ran = run_to_end(search, &scored);
  EXPECT_EQ(scored, o.max_samples + 1 + 1);  // Bayesian, the cache, then whole only
  std::vector<int64_t> chunks;
  for (const auto& s : ran)
    chunks.push_back(s.fusion_chunk_bytes);
  EXPECT_EQ(std::count(chunks.begin(), chunks.end(), int64_t{1} << 20), 0);
  EXPECT_EQ(std::count(chunks.begin(), chunks.end(), int64_t{0}), 1);
}

TEST(ParameterSearch, ChunkStageSkipsTheConfiguredChunkAndRunsWithoutTheOthers) {
  // Only the chunk tuned, configured at 1 MiB: the baseline, then whole,
  // then both again as finalists.
  auto o = defaults();
  o.tune_fusion = o.tune_cycle = o.tune_cache = false;
  o.tune_chunk = true;
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  parameter_search search(o);
  auto ran = run_to_end(search);
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[0].fusion_chunk_bytes, 1 << 20);
  EXPECT_EQ(ran[1].fusion_chunk_bytes, 0);
  EXPECT_EQ(search.current().fusion_chunk_bytes, 1 << 20);
  for (const auto& s : ran) {
    EXPECT_EQ(s.fusion_threshold, o.initial.fusion_threshold);
    EXPECT_TRUE(s.cache_enabled);
  }
}

TEST(ParameterSearch, OnlyTheCacheTunedComparesItBothWays) {
  auto o = defaults();
  o.tune_fusion = o.tune_cycle = false;
  o.warmup_samples = 0;
  o.samples_per_setting = 1;
  parameter_search search(o);
  auto ran = run_to_end(search);
  ASSERT_EQ(ran.size(), 4u);  // each way, then both again as finalists
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
    log.row({4 << 20, 0.0, false, 1 << 20}, 1e6);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
            "cycle_time_ms,tensor_fusion_threshold,score,fusion_chunk_bytes\n"
            "0,0,0,1,1.5,0.0625,2500,-1\n"
            "0,0,0,0,0,4,1,1048576\n");
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
