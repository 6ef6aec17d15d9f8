#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <cstdint>
#include <memory>
#include <string>

#include "actors/protocols.hpp"
#include "autotune/parameter_search.hpp"

namespace troupe::metrics {
class autotune_metrics;
}

namespace troupe::coordinator {

/// How one process set's tuner samples, searches and reports.
struct tuner_options {
  uint32_t set_id = 0;
  /// What is searched (initial settings, fixed ones, counts, noise, seed).
  autotune::search_options search;
  /// Training steps per sample (autotune::step_sampler).
  int steps_per_sample = 10;
  /// Cache entries when the cache is on (the configured capacity, or
  /// Horovod's 1024 when it was configured off; the tuner takes the
  /// application's once it sets one).
  int64_t cache_capacity = 1024;
  /// The CSV log (autotune_log); empty = none.
  std::string log_path;
  std::shared_ptr<metrics::autotune_metrics> metrics;  // required
  caf::actor timeline;  // may be null: no samples on the timeline
};

/// Spawns the autotuner of one process set, a detached actor (the
/// Gaussian-process fits take milliseconds of CPU that the scheduler's few
/// threads must not lose; the log is file I/O). The coordinator reports
/// every response list executed on its rank, (executed, settings
/// generation, begins a step, stats); the tuner scores samples of
/// `steps_per_sample` whole training steps as bytes per wall-clock second
/// (autotune::step_sampler), drives an autotune::parameter_search and sends
/// each new setting to the coordinator as (tune, Tuning bytes), which
/// applies it at its next response list on every member. Samples never
/// span a settings change. A change the application made (troupe::tune),
/// sent to the tuner as (tune, Tuning bytes), is kept: each setting it sets
/// is not searched any more, the search starts again from the configured
/// settings with the application's values, and the tuner stops when
/// nothing is left to search. Once the search is done it sends
/// the best setting and stops; it also stops when the coordinator does.
actors::tuner_actor spawn_tuner(caf::actor_system& sys, actors::coordinator_actor coordinator,
                                tuner_options options);

} // namespace troupe::coordinator
