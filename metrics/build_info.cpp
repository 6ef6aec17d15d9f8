#include "metrics/build_info.hpp"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace troupe::metrics {

void register_build_info(prometheus::Registry& reg, const std::string& backends) {
  prometheus::BuildGauge()
    .Name("troupe_build_info")
    .Help("Always 1; the labels say which Troupe build serves these metrics.")
    .Register(reg)
    .Add({{"version", TROUPE_VERSION}, {"backends", backends}})
    .Set(1);
}

} // namespace troupe::metrics
