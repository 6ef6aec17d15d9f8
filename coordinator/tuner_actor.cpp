#include "coordinator/tuner_actor.hpp"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/timeline.hpp"
#include "autotune/autotune_log.hpp"
#include "autotune/step_sampler.hpp"
#include "metrics/autotune_metrics.hpp"

namespace troupe::coordinator {

namespace {

using namespace troupe::actors;
using clock = std::chrono::steady_clock;

struct tuner_state {
  coordinator_actor coordinator;
  tuner_options options;
  std::unique_ptr<autotune::parameter_search> search;
  std::unique_ptr<autotune::autotune_log> log;
  autotune::settings applied;  // in force (as far as this tuner changed it)
  std::unique_ptr<autotune::step_sampler> sampler;
  double optimizer_seconds = 0;  // spent in the search: the tuner's own cost
  static constexpr const char* name = "troupe.tuner";
};

using tuner_self = tuner_actor::stateful_pointer<tuner_state>;

std::string describe(const autotune::settings& s) {
  return fmt::format("[cache {}, cycle {} ms, fusion {} B, chunk {}]", s.cache_enabled ? 1 : 0,
                     s.cycle_time_ms, s.fusion_threshold,
                     s.fusion_chunk_bytes < 0 ? std::string("configured")
                                              : std::to_string(s.fusion_chunk_bytes) + " B");
}

// Sends what differs between the search's current setting and the one in
// force to the coordinator (a cache capacity sent empties the cache, so
// only a real change is sent).
void apply(tuner_self self) {
  auto& st = self->state;
  const auto& s = st.search->current();
  v1::Tuning t;
  if (s.fusion_threshold != st.applied.fusion_threshold)
    t.set_fusion_threshold(s.fusion_threshold);
  if (s.cycle_time_ms != st.applied.cycle_time_ms)
    t.set_cycle_time_us(static_cast<int64_t>(s.cycle_time_ms * 1000));
  if (s.cache_enabled != st.applied.cache_enabled)
    t.set_cache_capacity(s.cache_enabled ? st.options.cache_capacity : 0);
  if (s.fusion_chunk_bytes != st.applied.fusion_chunk_bytes)
    t.set_fusion_chunk_bytes(s.fusion_chunk_bytes);
  st.applied = s;
  self->send(st.coordinator, tune_atom::value, t.SerializeAsString());
  st.sampler->change_sent();
}

void finish_sample(tuner_self self, double score) {
  auto& st = self->state;
  const auto set = st.options.set_id;
  st.options.metrics->sampled();
  if (st.options.timeline)
    caf::anon_send(st.options.timeline, timeline_atom::value,
                   fmt::format("AUTOTUNE_SAMPLE set {} {} {:.0f} B/s", set,
                               describe(st.search->current()), score),
                   timeline_now_us());
  if (st.search->warmup_left() > 0)
    spdlog::info("Autotuner of set {}: warming up ({} remaining)", set,
                 st.search->warmup_left() - 1);
  const auto began = clock::now();
  const auto step = st.search->record(score);
  const double spent = std::chrono::duration<double>(clock::now() - began).count();
  st.optimizer_seconds += spent;
  st.options.metrics->optimizer_time(spent);
  if (step.scored) {
    spdlog::info("Autotuner of set {}: {} {:.0f} B/s", set, describe(*step.scored), step.score);
    if (st.log)
      st.log->row(*step.scored, step.score);
    st.options.metrics->scored(step.score, st.search->best_score());
  }
  if (!step.rescored.empty())
    spdlog::info("Autotuner of set {}: a finalist replaces the configured setting only when "
                 "faster by more than {:.1f} % (twice the rescoring's standard error)",
                 set, step.margin * 100);
  for (const auto& f : step.rescored) {
    spdlog::info("Autotuner of set {}: finalist {} {:.0f} B/s", set, describe(f.setting),
                 f.score);
    if (st.log)
      st.log->row(f.setting, f.score);
    st.options.metrics->scored(f.score, st.search->best_score());
  }
  if (step.changed)
    apply(self);
  const auto& now = st.search->current();
  st.options.metrics->settings(now.fusion_threshold, now.cycle_time_ms, now.cache_enabled,
                               now.fusion_chunk_bytes, st.search->active());
  if (step.finished) {
    spdlog::info("Autotuner of set {}: best params {} {:.0f} B/s (choosing settings took "
                 "{:.1f} ms)",
                 set, describe(st.search->current()), st.search->best_score(),
                 st.optimizer_seconds * 1000);
    if (st.log)
      st.log->row(st.search->current(), st.search->best_score());
    self->quit();
  }
}

void on_executed(tuner_self self, uint64_t generation, bool begins_step,
                 const list_stats& stats) {
  if (stats.chunk_bytes >= 0 && self->state.applied.fusion_chunk_bytes < 0)
    self->state.search->configured_chunk_is(stats.chunk_bytes);
  if (auto score =
        self->state.sampler->add({clock::now(), generation, stats.bytes, begins_step}))
    finish_sample(self, *score);
}

tuner_actor::behavior_type tune(tuner_self self, coordinator_actor coordinator,
                                tuner_options options) {
  auto& st = self->state;
  st.coordinator = std::move(coordinator);
  st.options = std::move(options);
  st.search = std::make_unique<autotune::parameter_search>(st.options.search);
  st.sampler = std::make_unique<autotune::step_sampler>(st.options.steps_per_sample);
  st.applied = st.options.search.initial;
  self->monitor(st.coordinator);
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  const auto& s = st.search->current();
  st.options.metrics->settings(s.fusion_threshold, s.cycle_time_ms, s.cache_enabled,
                               s.fusion_chunk_bytes, st.search->active());
  if (!st.options.log_path.empty()) {
    try {
      st.log = std::make_unique<autotune::autotune_log>(st.options.log_path);
    } catch (const std::exception& e) {
      spdlog::error("Autotuner of set {}: {}; tuning without a log", st.options.set_id,
                    e.what());
    }
  }
  return {
    [=](executed_atom, uint64_t generation, bool begins_step, const list_stats& stats) {
      on_executed(self, generation, begins_step, stats);
    },
  };
}

} // namespace

tuner_actor spawn_tuner(caf::actor_system& sys, coordinator_actor coordinator,
                        tuner_options options) {
  return sys.spawn<caf::detached>(tune, std::move(coordinator), std::move(options));
}

} // namespace troupe::coordinator
