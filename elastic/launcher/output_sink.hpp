#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

namespace troupe::elastic::launcher {

/// troupe-run's standard output or error as the job's lines reach it: a
/// thread of its own writes them, so a reader that stops reading (a paused
/// terminal, a stopped pipe consumer) never stops troupe-run's supervision
/// (reaping, elastic ticks, signals, its time limit). Lines beyond `bound`
/// bytes waiting are dropped, and how many is said in the output once it
/// flows again.
class output_sink {
public:
  static constexpr size_t default_bound = size_t{64} << 20;
  /// How long the destructor lets queued output drain before it gives up.
  static constexpr std::chrono::seconds drain_time{2};

  explicit output_sink(int fd, size_t bound = default_bound);
  /// Waits up to drain_time for what is queued, then leaves the rest.
  ~output_sink();
  output_sink(const output_sink&) = delete;
  output_sink& operator=(const output_sink&) = delete;

  /// Queues `text` (one or more whole lines); never blocks on the reader.
  void write(std::string_view text);

  /// Lines dropped so far because the reader fell `bound` bytes behind.
  size_t dropped() const;

private:
  struct state;
  std::shared_ptr<state> state_;
};

} // namespace troupe::elastic::launcher
