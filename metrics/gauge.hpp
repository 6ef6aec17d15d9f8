#pragma once

#include <atomic>
#include <cstdint>

namespace troupe::metrics {

/// A value that goes up and down (depths, sizes, ranks).
class gauge {
public:
  void set(int64_t v) noexcept {
    value_.store(v, std::memory_order_relaxed);
  }

  void inc(int64_t n = 1) noexcept {
    value_.fetch_add(n, std::memory_order_relaxed);
  }

  void dec(int64_t n = 1) noexcept {
    value_.fetch_sub(n, std::memory_order_relaxed);
  }

  int64_t value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

private:
  std::atomic<int64_t> value_{0};
};

} // namespace troupe::metrics
