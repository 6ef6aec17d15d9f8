#pragma once

#include <atomic>
#include <cstdint>

namespace troupe::metrics {

/// A monotonically increasing count. Whole numbers only, so concurrent
/// increments sum exactly; one relaxed atomic add per call.
class counter {
public:
  void inc(uint64_t n = 1) noexcept {
    value_.fetch_add(n, std::memory_order_relaxed);
  }

  uint64_t value() const noexcept {
    return value_.load(std::memory_order_relaxed);
  }

private:
  std::atomic<uint64_t> value_{0};
};

} // namespace troupe::metrics
