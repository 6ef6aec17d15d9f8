#include "autotune/step_sampler.hpp"

#include <stdexcept>
#include <string>

namespace troupe::autotune {

step_sampler::step_sampler(int steps_per_sample) : steps_per_sample_(steps_per_sample) {
  if (steps_per_sample < 1)
    throw std::invalid_argument("step_sampler: needs at least one step per sample, not " +
                                std::to_string(steps_per_sample));
}

void step_sampler::change_sent() {
  stale_ = true;
}

void step_sampler::begin(const list& l) {
  sampling_ = true;
  start_ = last_end_;
  steps_ = 1;
  bytes_ = l.bytes;
  last_end_ = l.end;
}

std::optional<double> step_sampler::add(const list& l) {
  if (stale_ && l.generation == generation_)
    return std::nullopt;  // executed before the sent change took effect
  if (l.generation != generation_) {
    generation_ = l.generation;
    stale_ = false;
    sampling_ = false;
    last_end_ = l.end;
    return std::nullopt;
  }
  if (!sampling_) {
    if (l.begins_step)
      begin(l);
    else
      last_end_ = l.end;
    return std::nullopt;
  }
  if (l.begins_step && steps_ == steps_per_sample_) {
    const double seconds = std::chrono::duration<double>(last_end_ - start_).count();
    const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0;
    begin(l);
    return score;
  }
  if (l.begins_step)
    ++steps_;
  bytes_ += l.bytes;
  last_end_ = l.end;
  return std::nullopt;
}

} // namespace troupe::autotune
