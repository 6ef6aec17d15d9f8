#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

namespace prometheus {
class Registry;
template <class T>
class Family;
} // namespace prometheus

namespace troupe {
class status;
}
namespace troupe::actors {
struct collective_work;
}

namespace troupe::metrics {

class set_series;

/// The families of executed collectives, registered once per runtime;
/// every process set adds its children (collective_metrics).
struct collective_families {
  explicit collective_families(prometheus::Registry& reg);

  prometheus::Family<prometheus::Counter>& operations;
  prometheus::Family<prometheus::Counter>& tensors;
  prometheus::Family<prometheus::Counter>& bytes;
  prometheus::Family<prometheus::Counter>& bus_bytes;
  prometheus::Family<prometheus::Counter>& errors;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Histogram>& size;
  prometheus::Family<prometheus::Histogram>& fusion_bytes;
  prometheus::Family<prometheus::Histogram>& fusion_tensors;
};

/// What one process set's backend actor updates after each collective,
/// every child (op x status) resolved up front in `series`.
class collective_metrics {
public:
  /// `set_size`: the set's ranks, for the bus-bytes factor.
  collective_metrics(const collective_families& f, set_series& series, int set_size,
                     const std::string& backend, prometheus::Gauge& mailbox);

  /// One response ran on the backend (`result`), moving `bytes` (its
  /// payload_bytes) in `seconds`, with `queued` more messages waiting in the
  /// backend's mailbox.
  void executed(const actors::collective_work& work, const status& result, uint64_t bytes,
                double seconds, size_t queued);

private:
  struct per_status {
    prometheus::Counter* operations = nullptr;
    prometheus::Counter* tensors = nullptr;
    prometheus::Counter* bytes = nullptr;
    prometheus::Counter* bus_bytes = nullptr;
  };
  struct per_op {
    std::array<per_status, 2> status;  // ok, error
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* size = nullptr;
  };

  int set_size_;
  // By v1::OpType (one slot per value: the .cpp asserts the count); empty
  // for ops that never execute.
  static constexpr size_t op_count = 9;
  std::array<per_op, op_count> ops_{};
  prometheus::Counter& backend_errors_;
  prometheus::Counter& internal_errors_;
  prometheus::Histogram& fusion_bytes_;
  prometheus::Histogram& fusion_tensors_;
  prometheus::Gauge& mailbox_;
};

/// `count` bucket bounds start, start*factor, start*factor^2, ...
std::vector<double> exponential_buckets(double start, double factor, int count);

/// Buckets shared by the latency histograms: 10 us to ~168 s, factor 2.
std::vector<double> latency_buckets();

} // namespace troupe::metrics
