#pragma once

#include <cstdint>
#include <string>

// prometheus-cpp only (no CAF): included by troupe-run's main alone.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "metrics/host_state_metrics.hpp"

namespace troupe::metrics {

/// troupe-run's elastic driver, on the launcher's registry: the membership
/// it planned, its hosts by state, and its resets.
class elastic_metrics {
public:
  explicit elastic_metrics(prometheus::Registry& registry);

  /// Epoch `epoch` was published with `members` workers.
  void epoch(int64_t epoch, int members);
  /// A reset barrier opened; reason: failure, leave, peer_lost, hosts_updated.
  void reset(const std::string& reason);
  /// From the barrier's opening until every member arrived, left or failed.
  void barrier_seconds(double seconds);
  void hosts(int active, int blacklisted, int cooling_down);

private:
  prometheus::Gauge& epoch_;
  prometheus::Gauge& members_;
  prometheus::Family<prometheus::Counter>& resets_;
  prometheus::Histogram& barrier_;
  host_state_metrics hosts_;
};

} // namespace troupe::metrics
