#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "metrics/family.hpp"

namespace troupe {
class status;
}
namespace troupe::actors {
struct collective_work;
}

namespace troupe::metrics {

class registry;

/// The families of executed collectives, registered once per runtime;
/// children per backend come from collective_metrics.
struct collective_families {
  explicit collective_families(registry& reg);

  counter_family& operations;
  counter_family& tensors;
  counter_family& bytes;
  counter_family& bus_bytes;
  counter_family& errors;
  histogram_family& duration;
  histogram_family& size;
  histogram& fusion_bytes;
  histogram& fusion_tensors;
};

/// What one backend actor updates after each collective, every child
/// resolved up front (op x status, by backend label).
class collective_metrics {
public:
  collective_metrics(std::shared_ptr<registry> keep_alive, collective_families& f,
                     const std::string& backend, int world_size, gauge& mailbox);

  /// One response ran on the backend (`result`), taking `seconds`, with
  /// `queued` more messages waiting in the backend's mailbox.
  void executed(const actors::collective_work& work, const status& result, double seconds,
                size_t queued);

private:
  struct per_status {
    counter* operations = nullptr;
    counter* tensors = nullptr;
    counter* bytes = nullptr;
    counter* bus_bytes = nullptr;
  };
  struct per_op {
    std::array<per_status, 2> status;  // ok, error
    histogram* duration = nullptr;
    histogram* size = nullptr;
  };

  std::shared_ptr<registry> keep_alive_;
  int world_size_;
  std::array<per_op, 8> ops_{};  // by v1::OpType; empty for ops that never execute
  counter& backend_errors_;
  counter& internal_errors_;
  histogram& fusion_bytes_;
  histogram& fusion_tensors_;
  gauge& mailbox_;
};

} // namespace troupe::metrics
