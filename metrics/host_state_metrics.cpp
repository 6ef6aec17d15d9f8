#include "metrics/host_state_metrics.hpp"

#include <prometheus/family.h>
#include <prometheus/registry.h>

namespace troupe::metrics {

namespace {

prometheus::Family<prometheus::Gauge>& hosts_family(prometheus::Registry& r) {
  return prometheus::BuildGauge()
    .Name("troupe_elastic_hosts")
    .Help("Hosts the discovery lists, by state (active, blacklisted for good, cooling down).")
    .Register(r);
}

} // namespace

host_state_metrics::host_state_metrics(prometheus::Registry& r)
  : active_(hosts_family(r).Add({{"state", "active"}})),
    blacklisted_(hosts_family(r).Add({{"state", "blacklisted"}})),
    cooling_down_(hosts_family(r).Add({{"state", "cooling_down"}})) {
}

void host_state_metrics::set(int active, int blacklisted, int cooling_down) {
  active_.Set(active);
  blacklisted_.Set(blacklisted);
  cooling_down_.Set(cooling_down);
}

} // namespace troupe::metrics
