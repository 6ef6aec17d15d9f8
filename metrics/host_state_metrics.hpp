#pragma once

#include <prometheus/gauge.h>

namespace prometheus {
class Registry;
}

namespace troupe::metrics {

/// `troupe_elastic_hosts{state}`: the hosts troupe-run's discovery lists,
/// by state (active, blacklisted for good, cooling down). troupe-run sets
/// it from its driver, each rank of an elastic job from what the driver
/// wrote to the store.
class host_state_metrics {
public:
  explicit host_state_metrics(prometheus::Registry& registry);

  void set(int active, int blacklisted, int cooling_down);

private:
  prometheus::Gauge& active_;
  prometheus::Gauge& blacklisted_;
  prometheus::Gauge& cooling_down_;
};

} // namespace troupe::metrics
