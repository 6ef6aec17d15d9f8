#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace troupe::autotune {

class bayesian_optimizer;

/// The settings of one process set that the tuner searches.
struct settings {
  int64_t fusion_threshold = 0;  // bytes; 0 = no fusion
  double cycle_time_ms = 0;
  bool cache_enabled = true;

  bool operator==(const settings& o) const {
    return fusion_threshold == o.fusion_threshold && cycle_time_ms == o.cycle_time_ms &&
           cache_enabled == o.cache_enabled;
  }
  bool operator!=(const settings& o) const {
    return !(*this == o);
  }
};

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
  /// Samples discarded before the search starts (the job warming up).
  int warmup_samples = 3;
  /// Settings of fusion threshold and cycle time tried by Bayesian
  /// optimisation, the initial one included.
  int max_samples = 20;
  /// Samples per setting; its score is their median (Horovod: 5).
  int samples_per_setting = 5;
  /// Observation noise of the Gaussian process.
  double noise = 0.8;
  uint64_t seed = 0;
};

/// Horovod's tuning chain for one process set, without the clock or the
/// messaging: it is told each sample's score (bytes per second) and says
/// which settings to run next. After the warm-up, fusion threshold and cycle
/// time (those tuned) are searched jointly by Bayesian optimisation, then
/// the response cache is tried the other way round on the best setting so
/// far; then the best setting seen is frozen.
class parameter_search {
public:
  /// Throws std::invalid_argument for counts below 1 (warm-up: below 0).
  explicit parameter_search(search_options options);
  ~parameter_search();

  /// What a recorded sample led to.
  struct step {
    /// A setting got its score (the median of its samples).
    std::optional<settings> scored;
    double score = 0;
    /// current() changed: apply it.
    bool changed = false;
    /// The search ended with this sample; current() is the best setting.
    bool finished = false;
  };

  /// Records the score of one sample taken with current(). A score that
  /// is not a finite number counts as 0.
  step record(double score);

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
  /// The best setting scored so far and its score (none before the first).
  const std::optional<settings>& best() const {
    return best_;
  }
  double best_score() const {
    return best_score_;
  }

private:
  enum class stage { warmup, bayes, baseline, cache, done };

  // Leaves the current stage for the next one that has work.
  void advance(stage next);

  search_options options_;
  std::vector<int> dims_;  // 0 = fusion, 1 = cycle time, in point order
  std::unique_ptr<bayesian_optimizer> optimizer_;
  stage stage_ = stage::warmup;
  int warmup_left_;
  settings current_;
  std::vector<double> scores_;  // of current_
  std::optional<settings> best_;
  double best_score_ = 0;
};

} // namespace troupe::autotune
