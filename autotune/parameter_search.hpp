#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "autotune/settings.hpp"

namespace troupe::autotune {

class bayesian_optimizer;
class finalist_rescoring;

/// The box searched for the continuous settings. Fusion thresholds are
/// searched on a log scale, from 4 KiB (next to no fusion) to 128 MiB
/// (Horovod's default): on a CPU host the best one is often small (fused
/// buffers that fall out of cache). Cycle times from 0 (event-driven) to
/// 5 ms: lists are already batched while the backend is busy, so a long
/// cycle only adds latency.
constexpr double min_log2_fusion = 12;
constexpr double max_log2_fusion = 27;
constexpr double max_cycle_time_ms = 5;

/// What a parameter_search tunes and how.
struct search_options {
  /// The configured settings: the search starts here (as its first
  /// candidate), and a setting not tuned keeps its value.
  settings initial;
  bool tune_fusion = true;
  bool tune_cycle = true;
  bool tune_cache = true;
  bool tune_chunk = true;
  /// CPU allreduce chunks tried on the best setting after the cache: the
  /// whole buffer at once (what suits a library with a high per-call cost)
  /// and 1 MiB (what keeps the copies and the reduction in cache here);
  /// one of them is usually the configured one, which is not tried twice.
  std::vector<int64_t> chunk_candidates = {0, int64_t{1} << 20};
  /// Samples discarded before the search starts (the job warming up).
  int warmup_samples = 3;
  /// Settings of fusion threshold and cycle time tried by Bayesian
  /// optimisation, the initial one included.
  int max_samples = 20;
  /// Samples per setting; its score is their median (Horovod: 5). Also
  /// the rounds in which the finalists are scored again.
  int samples_per_setting = 5;
  /// Settings scored again before one is frozen, besides the configured
  /// one (finalist_rescoring); 0 freezes the best scored setting, as
  /// Horovod does.
  int finalists = 3;
  /// Observation noise of the Gaussian process.
  double noise = 0.8;
  uint64_t seed = 0;
};

/// Horovod's tuning chain for one process set, without the clock or the
/// messaging: it is told each sample's score (bytes per second) and says
/// which settings to run next. After the warm-up, fusion threshold and cycle
/// time (those tuned) are searched jointly by Bayesian optimisation, then
/// the response cache is tried the other way round on the best setting so
/// far, then each other CPU allreduce chunk on the best one; then the best
/// scored settings and the configured one are scored again in interleaved
/// rounds, and the best of those scores is frozen.
class parameter_search {
public:
  /// Throws std::invalid_argument for counts below 1 (warm-up and
  /// finalists: below 0).
  explicit parameter_search(search_options options);
  ~parameter_search();

  /// What a recorded sample led to.
  struct step {
    /// A setting got its score (the median of its samples).
    std::optional<settings> scored;
    double score = 0;
    /// The search ended: every finalist with its score in the re-scoring
    /// (finalist_rescoring), the configured one last; the frozen one is
    /// the highest of those that beat it by more than `margin` (relative),
    /// else the configured one.
    std::vector<scored_setting> rescored;
    double margin = 0;
    /// current() changed: apply it.
    bool changed = false;
    /// The search ended with this sample; current() is the best setting.
    bool finished = false;
  };

  /// Records the score of one sample taken with current(). A score that
  /// is not a finite number counts as 0.
  step record(double score);

  /// What the configured chunk (-1) comes to on the set's backend
  /// (list_stats::chunk_bytes), once a list ran under it: the chunk stage
  /// does not try that chunk again under its own number. The first answer
  /// stands (the same on every list of a set; a list that ran under an
  /// explicit chunk and reports late cannot change it).
  void configured_chunk_is(int64_t bytes) {
    if (configured_chunk_ < 0)
      configured_chunk_ = bytes;
  }

  /// The settings to run.
  const settings& current() const {
    return current_;
  }
  /// Warm-up samples still to discard.
  int warmup_left() const {
    return warmup_left_;
  }
  /// False once the best setting is frozen (or nothing is tuned).
  bool active() const {
    return stage_ != stage::done;
  }
  /// The best setting scored so far and its score (none before the first);
  /// once finished, the frozen setting and its score in the re-scoring.
  const std::optional<settings>& best() const {
    return best_;
  }
  double best_score() const {
    return best_score_;
  }

private:
  enum class stage { warmup, bayes, baseline, cache, chunk, rescore, done };

  // Leaves the current stage for the next one that has work.
  void advance(stage next);
  // current_ has all its samples: scores it and moves on.
  void score_current(step& out);
  // A sample of the re-scoring stage.
  void record_finalist(double score, step& out);
  // The best setting so far with the next chunk left to try; false when
  // none is left.
  bool next_chunk();

  search_options options_;
  int64_t configured_chunk_ = -1;  // unknown until configured_chunk_is()
  std::vector<int> dims_;  // 0 = fusion, 1 = cycle time, in point order
  std::unique_ptr<bayesian_optimizer> optimizer_;
  stage stage_ = stage::warmup;
  int warmup_left_;
  settings current_;
  std::vector<double> scores_;  // of current_
  std::vector<int64_t> chunks_left_;  // the chunk stage's candidates not tried yet
  std::vector<scored_setting> history_;  // every setting scored before re-scoring
  std::unique_ptr<finalist_rescoring> rescoring_;
  std::optional<settings> best_;
  double best_score_ = 0;
};

} // namespace troupe::autotune
