#pragma once

#include <cstdint>
#include <memory>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

namespace prometheus {
class Registry;
template <class T>
class Family;
} // namespace prometheus

namespace troupe::metrics {

class set_series;

/// The autotuner's families (troupe_autotune_*), registered once per
/// runtime; each tuned process set adds its children (autotune_metrics).
struct autotune_families {
  explicit autotune_families(prometheus::Registry& reg);

  prometheus::Family<prometheus::Gauge>& active;
  prometheus::Family<prometheus::Gauge>& fusion_threshold;
  prometheus::Family<prometheus::Gauge>& cycle_time;
  prometheus::Family<prometheus::Gauge>& cache_enabled;
  prometheus::Family<prometheus::Gauge>& fusion_chunk;
  prometheus::Family<prometheus::Gauge>& score;
  prometheus::Family<prometheus::Gauge>& best_score;
  prometheus::Family<prometheus::Counter>& samples;
  prometheus::Family<prometheus::Counter>& optimizer_seconds;
};

/// What one process set's tuner (on the set's coordinator rank) exports,
/// labelled `process_set`; the series leave the exposition with it.
class autotune_metrics {
public:
  autotune_metrics(autotune_families& f, std::unique_ptr<set_series> series);
  ~autotune_metrics();

  autotune_metrics(const autotune_metrics&) = delete;
  autotune_metrics& operator=(const autotune_metrics&) = delete;

  /// The settings now in force (a chunk of -1: the configured one), and
  /// whether the search still runs.
  void settings(int64_t fusion_threshold_bytes, double cycle_time_ms, bool cache_enabled,
                int64_t fusion_chunk_bytes, bool searching);
  /// One more sample measured (warm-up included).
  void sampled() {
    samples_.Increment();
  }
  /// A setting was scored; the best score so far.
  void scored(double bytes_per_second, double best_bytes_per_second) {
    score_.Set(bytes_per_second);
    best_score_.Set(best_bytes_per_second);
  }
  /// Time the tuner spent choosing the next setting.
  void optimizer_time(double seconds) {
    optimizer_seconds_.Increment(seconds);
  }

private:
  std::unique_ptr<set_series> series_;  // first: the children below are its
  prometheus::Gauge& active_;
  prometheus::Gauge& fusion_threshold_;
  prometheus::Gauge& cycle_time_;
  prometheus::Gauge& cache_enabled_;
  prometheus::Gauge& fusion_chunk_;
  prometheus::Gauge& score_;
  prometheus::Gauge& best_score_;
  prometheus::Counter& samples_;
  prometheus::Counter& optimizer_seconds_;
};

} // namespace troupe::metrics
