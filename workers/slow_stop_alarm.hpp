#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace troupe::workers {

/// Says so while something that should end soon does not: from a thread
/// of its own, calls `warn` with the time elapsed every `period` until it
/// is destroyed. A runtime's teardown waits without a deadline (CAF's
/// ~actor_system waits for every actor and every reference to its logger),
/// so a leftover reference would otherwise hang shutdown() in silence.
class slow_stop_alarm {
public:
  using warning = std::function<void(std::chrono::steady_clock::duration elapsed)>;

  slow_stop_alarm(std::chrono::steady_clock::duration period, warning warn);
  ~slow_stop_alarm();
  slow_stop_alarm(const slow_stop_alarm&) = delete;
  slow_stop_alarm& operator=(const slow_stop_alarm&) = delete;

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

} // namespace troupe::workers
