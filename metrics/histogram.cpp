#include "metrics/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace troupe::metrics {

histogram::histogram(std::vector<double> bounds)
  : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1]))
      throw std::invalid_argument("histogram bounds must be finite and strictly ascending");
  for (size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double v) noexcept {
  // First bound >= v: buckets are "less than or equal". NaN compares false
  // with everything, so it is sent to +Inf explicitly.
  const size_t at =
    std::isnan(v) ? bounds_.size()
                  : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                        bounds_.begin());
  buckets_[at].fetch_add(1, std::memory_order_relaxed);
  double old = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(old, old + v, std::memory_order_relaxed))
    ;
}

histogram::snapshot histogram::read() const {
  snapshot s;
  s.bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (start <= 0 || factor <= 1 || count < 1)
    throw std::invalid_argument("exponential_buckets needs start > 0, factor > 1, count >= 1");
  std::vector<double> out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor)
    out.push_back(b);
  return out;
}

} // namespace troupe::metrics
