#include "autotune/step_sampler.hpp"

#include <stdexcept>
#include <string>

#include "autotune/median.hpp"

namespace troupe::autotune {

step_sampler::step_sampler(int steps_per_sample) : steps_per_sample_(steps_per_sample) {
  if (steps_per_sample < 1)
    throw std::invalid_argument("step_sampler: needs at least one step per sample, not " +
                                std::to_string(steps_per_sample));
  rates_.reserve(static_cast<size_t>(steps_per_sample));
}

void step_sampler::change_sent() {
  stale_ = true;
}

void step_sampler::begin(const list& l) {
  sampling_ = true;
  rates_.clear();
  step_start_ = last_end_;
  step_bytes_ = l.bytes;
  last_end_ = l.end;
}

void step_sampler::end_step() {
  const double seconds = std::chrono::duration<double>(last_end_ - step_start_).count();
  rates_.push_back(seconds > 0 ? static_cast<double>(step_bytes_) / seconds : 0.0);
  step_start_ = last_end_;
  step_bytes_ = 0;
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
  if (l.begins_step) {
    end_step();
    if (static_cast<int>(rates_.size()) == steps_per_sample_) {
      const double score = median(rates_);
      begin(l);
      return score;
    }
  }
  step_bytes_ += l.bytes;
  last_end_ = l.end;
  return std::nullopt;
}

} // namespace troupe::autotune
