#include "coordinator/tuner_actor.hpp"

#include <chrono>
#include <cmath>

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
  // What this tuner last told the coordinator of each setting (the
  // configured one before it told any) and the cache's capacity then.
  autotune::settings applied;
  int64_t applied_capacity = 0;
  // What the configured chunk (-1) comes to on the set's backend, once
  // known (-1 before): a search started again need not learn it again.
  int64_t configured_chunk = -1;
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

// The cache capacity `s` runs with.
int64_t capacity_of(const tuner_state& st, const autotune::settings& s) {
  return s.cache_enabled ? st.options.cache_capacity : 0;
}

// What differs between `s` and what this tuner last told the coordinator,
// which is `s` from now on (a cache capacity sent empties the cache, so
// only a real change is sent).
v1::Tuning changes_to(tuner_state& st, const autotune::settings& s) {
  v1::Tuning t;
  if (s.fusion_threshold != st.applied.fusion_threshold)
    t.set_fusion_threshold(s.fusion_threshold);
  if (s.cycle_time_ms != st.applied.cycle_time_ms)
    t.set_cycle_time_us(std::llround(s.cycle_time_ms * 1000));
  if (capacity_of(st, s) != st.applied_capacity)
    t.set_cache_capacity(capacity_of(st, s));
  if (s.fusion_chunk_bytes != st.applied.fusion_chunk_bytes)
    t.set_fusion_chunk_bytes(s.fusion_chunk_bytes);
  st.applied = s;
  st.applied_capacity = capacity_of(st, s);
  return t;
}

void send(tuner_self self, const v1::Tuning& t) {
  self->send(self->state.coordinator, tune_atom::value, t.SerializeAsString());
  self->state.sampler->change_sent();
}

// Sends the search's current setting to the coordinator.
void apply(tuner_self self) {
  send(self, changes_to(self->state, self->state.search->current()));
}

// Whether a setting is left to search (the application may have set every
// one).
bool searching(const tuner_state& st) {
  const auto& o = st.options.search;
  return st.search->active() && (o.tune_fusion || o.tune_cycle || o.tune_cache || o.tune_chunk);
}

// The gauges of the setting the search runs.
void show(const tuner_state& st) {
  const auto& s = st.search->current();
  st.options.metrics->settings(s.fusion_threshold, s.cycle_time_ms, s.cache_enabled,
                               s.fusion_chunk_bytes, searching(st));
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
  show(st);
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
  auto& st = self->state;
  if (stats.chunk_bytes >= 0 && st.applied.fusion_chunk_bytes < 0 && st.configured_chunk < 0) {
    st.configured_chunk = stats.chunk_bytes;
    st.search->configured_chunk_is(stats.chunk_bytes);
  }
  if (auto score = st.sampler->add({clock::now(), generation, stats.bytes, begins_step}))
    finish_sample(self, *score);
}

// `s` with the values `change` sets.
autotune::settings with_values(autotune::settings s, const v1::Tuning& change) {
  if (change.has_fusion_threshold())
    s.fusion_threshold = change.fusion_threshold();
  if (change.has_cycle_time_us())
    s.cycle_time_ms = static_cast<double>(change.cycle_time_us()) / 1000;
  if (change.has_cache_capacity())
    s.cache_enabled = change.cache_capacity() > 0;
  if (change.has_fusion_chunk_bytes())
    s.fusion_chunk_bytes = std::max<int64_t>(change.fusion_chunk_bytes(), -1);
  return s;
}

// `search` with what `change` sets: the application's values, not searched
// any more (as settings configured explicitly are not).
autotune::search_options pinned(autotune::search_options search, const v1::Tuning& change) {
  search.initial = with_values(search.initial, change);
  search.tune_fusion = search.tune_fusion && !change.has_fusion_threshold();
  search.tune_cycle = search.tune_cycle && !change.has_cycle_time_us();
  search.tune_cache = search.tune_cache && !change.has_cache_capacity();
  search.tune_chunk = search.tune_chunk && !change.has_fusion_chunk_bytes();
  return search;
}

bool same_search(const autotune::search_options& a, const autotune::search_options& b) {
  return a.initial == b.initial && a.tune_fusion == b.tune_fusion &&
         a.tune_cycle == b.tune_cycle && a.tune_cache == b.tune_cache &&
         a.tune_chunk == b.tune_chunk;
}

// A settings change the application made (troupe::tune), which the
// coordinator applies at its next list and keeps from then on: it drops
// them from this tuner's changes, so the tuner never sends them. Each
// setting it sets is the application's: the search starts again without
// it, from the configured settings with the application's values (scores
// measured with other values say little about the rest), or the tuner
// stops when it searched nothing else. A search started again sends where
// it starts, which can differ from this tuner's last change only in
// settings that are still its own.
void on_application_change(tuner_self self, const v1::Tuning& change) {
  auto& st = self->state;
  st.sampler->change_sent();
  if (change.cache_capacity() > 0)
    st.options.cache_capacity = change.cache_capacity();
  st.applied = with_values(st.applied, change);
  st.applied_capacity = capacity_of(st, st.applied);
  auto search = pinned(st.options.search, change);
  if (same_search(search, st.options.search))
    return;
  st.options.search = std::move(search);
  st.search = std::make_unique<autotune::parameter_search>(st.options.search);
  if (st.configured_chunk >= 0)
    st.search->configured_chunk_is(st.configured_chunk);
  show(st);
  const auto& now = st.search->current();
  if (auto t = changes_to(st, now); t.ByteSizeLong() > 0)
    send(self, t);
  const auto set = st.options.set_id;
  if (searching(st)) {
    spdlog::info("Autotuner of set {}: the application changed settings; searching again "
                 "from {}",
                 set, describe(now));
    return;
  }
  spdlog::info("Autotuner of set {}: the application set every setting searched; stopping "
               "with {}",
               set, describe(now));
  if (st.log)
    st.log->row(now, 0);
  self->quit();
}

tuner_actor::behavior_type tune(tuner_self self, coordinator_actor coordinator,
                                tuner_options options) {
  auto& st = self->state;
  st.coordinator = std::move(coordinator);
  st.options = std::move(options);
  st.search = std::make_unique<autotune::parameter_search>(st.options.search);
  st.sampler = std::make_unique<autotune::step_sampler>(st.options.steps_per_sample);
  st.applied = st.options.search.initial;
  st.applied_capacity = capacity_of(st, st.applied);
  self->monitor(st.coordinator);
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  show(st);
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
    [=](tune_atom, const std::string& bytes) {
      v1::Tuning change;
      if (!change.ParseFromString(bytes)) {
        spdlog::error("Autotuner of set {}: dropped a malformed settings change ({} bytes)",
                      self->state.options.set_id, bytes.size());
        return;
      }
      on_application_change(self, change);
    },
  };
}

} // namespace

tuner_actor spawn_tuner(caf::actor_system& sys, coordinator_actor coordinator,
                        tuner_options options) {
  return sys.spawn<caf::detached>(tune, std::move(coordinator), std::move(options));
}

} // namespace troupe::coordinator
