#include "workers/slow_stop_alarm.hpp"

#include <pthread.h>

namespace troupe::workers {

slow_stop_alarm::slow_stop_alarm(std::chrono::steady_clock::duration period, warning warn) {
  thread_ = std::thread([this, period, warn = std::move(warn)] {
    pthread_setname_np(pthread_self(), "troupe.stopping");
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> guard{mtx_};
    for (auto next = start + period; !cv_.wait_until(guard, next, [this] { return done_; });
         next += period) {
      guard.unlock();
      warn(std::chrono::steady_clock::now() - start);
      guard.lock();
    }
  });
}

slow_stop_alarm::~slow_stop_alarm() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

} // namespace troupe::workers
