#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace troupe::metrics {

/// Counts observations into buckets with fixed upper bounds (Prometheus
/// `le`, inclusive) plus an implicit +Inf bucket, and sums them. observe()
/// is lock-free: one atomic add for the bucket, a compare-exchange for the
/// sum. A snapshot taken while observations run may see the sum and the
/// buckets of slightly different moments; the buckets among themselves are
/// always consistent (count is derived from them).
class histogram {
public:
  /// `bounds`: finite, strictly ascending upper bounds. Throws
  /// std::invalid_argument otherwise.
  explicit histogram(std::vector<double> bounds);

  void observe(double v) noexcept;

  struct snapshot {
    std::vector<double> bounds;       // without +Inf
    std::vector<uint64_t> cumulative; // bounds.size() + 1 entries, last = +Inf
    double sum = 0;
    uint64_t count = 0;               // == cumulative.back()
  };

  snapshot read() const;

  const std::vector<double>& bounds() const {
    return bounds_;
  }

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative
  std::atomic<double> sum_{0};
};

/// `count` bounds start, start*factor, start*factor^2, ...
std::vector<double> exponential_buckets(double start, double factor, int count);

} // namespace troupe::metrics
