#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe::autotune {

/// Cuts a process set's executed response lists into samples of whole
/// training steps, as Horovod's autotuner does (a sample closes when a
/// tensor has been seen `steps_per_sample` more times), and scores each by
/// the median of its steps' bytes per second. A step runs from the end of
/// the last list of the step before it to the end of its own last list, so
/// it holds every list of the step and the pause before it (the
/// application's own work, negotiation, cycle waits): a setting that cuts a
/// step into many lists is scored over the same time as one that sends it
/// in one. The median, rather than the bytes of the sample over its whole
/// time, keeps one step stalled by another process on a shared host from
/// deciding the score. Samples never span a settings change.
class step_sampler {
public:
  using clock = std::chrono::steady_clock;

  /// One response list, as executed on the coordinator's rank.
  struct list {
    clock::time_point end;  // when it finished executing
    uint64_t generation;    // settings changes applied before it
    uint64_t bytes;         // payload bytes it moved
    bool begins_step;       // a step_detector's verdict
  };

  /// Throws std::invalid_argument for fewer than one step per sample.
  explicit step_sampler(int steps_per_sample);

  /// Counts `l`; returns the score (bytes per second) of the sample it
  /// closed, if any. The first list of a new generation carries the change
  /// and is not counted; the next sample starts at the next step.
  std::optional<double> add(const list& l);

  /// A settings change was sent but not yet applied: lists of the current
  /// generation still arriving ran the old settings and are not counted.
  void change_sent();

private:
  // Starts a sample whose first step begins with `l`.
  void begin(const list& l);
  // Ends the step in progress: records its bytes per second.
  void end_step();

  int steps_per_sample_;
  std::optional<uint64_t> generation_;  // of the lists counted
  bool stale_ = false;                  // change_sent() and not yet applied
  bool sampling_ = false;               // a sample's first step has begun
  std::vector<double> rates_;           // of this sample's ended steps
  uint64_t step_bytes_ = 0;             // of the step in progress
  clock::time_point step_start_;        // the end of the step before it
  clock::time_point last_end_;          // of the last list of this generation
};

} // namespace troupe::autotune
