#include "metrics/autotune_metrics.hpp"

#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "metrics/set_series.hpp"

namespace troupe::metrics {

namespace {

prometheus::Family<prometheus::Gauge>& gauges(prometheus::Registry& reg, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(reg);
}

} // namespace

autotune_families::autotune_families(prometheus::Registry& reg)
  : active(gauges(reg, "troupe_autotune_active",
                  "1 while the autotuner of the process set searches (warm-up included), 0 "
                  "once it froze the best setting (coordinator rank only).")),
    fusion_threshold(gauges(reg, "troupe_autotune_fusion_threshold_bytes",
                            "Fusion threshold the autotuner applied.")),
    cycle_time(gauges(reg, "troupe_autotune_cycle_time_seconds",
                      "Minimum time between response lists the autotuner applied.")),
    cache_enabled(gauges(reg, "troupe_autotune_cache_enabled",
                         "1 if the autotuner's setting has the response cache on.")),
    fusion_chunk(gauges(reg, "troupe_autotune_fusion_chunk_bytes",
                        "Bytes of a CPU allreduce reduced at a time in the autotuner's "
                        "setting (0: at once, -1: the configured chunk).")),
    score(gauges(reg, "troupe_autotune_score_bytes_per_second",
                 "Score of the setting scored last: median over its samples of the bytes "
                 "the set's collectives moved per second.")),
    best_score(gauges(reg, "troupe_autotune_best_score_bytes_per_second",
                      "Best score of any setting so far.")),
    samples(prometheus::BuildCounter()
              .Name("troupe_autotune_samples_total")
              .Help("Samples the autotuner measured, warm-up included.")
              .Register(reg)),
    optimizer_seconds(prometheus::BuildCounter()
                        .Name("troupe_autotune_optimizer_seconds_total")
                        .Help("Time the autotuner spent choosing settings (Gaussian-process "
                              "fit and expected-improvement search).")
                        .Register(reg)) {
}

autotune_metrics::autotune_metrics(autotune_families& f, std::unique_ptr<set_series> series)
  : series_(std::move(series)), active_(series_->add(f.active, {})),
    fusion_threshold_(series_->add(f.fusion_threshold, {})),
    cycle_time_(series_->add(f.cycle_time, {})),
    cache_enabled_(series_->add(f.cache_enabled, {})),
    fusion_chunk_(series_->add(f.fusion_chunk, {})), score_(series_->add(f.score, {})),
    best_score_(series_->add(f.best_score, {})), samples_(series_->add(f.samples, {})),
    optimizer_seconds_(series_->add(f.optimizer_seconds, {})) {
}

autotune_metrics::~autotune_metrics() = default;

void autotune_metrics::settings(int64_t fusion_threshold_bytes, double cycle_time_ms,
                                bool cache_enabled, int64_t fusion_chunk_bytes,
                                bool searching) {
  fusion_threshold_.Set(static_cast<double>(fusion_threshold_bytes));
  cycle_time_.Set(cycle_time_ms / 1000);
  cache_enabled_.Set(cache_enabled ? 1 : 0);
  fusion_chunk_.Set(static_cast<double>(fusion_chunk_bytes));
  active_.Set(searching ? 1 : 0);
}

} // namespace troupe::metrics
