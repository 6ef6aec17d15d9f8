#include "metrics/build_info.hpp"

#include "metrics/registry.hpp"

namespace troupe::metrics {

void register_build_info(registry& reg, const std::string& backends) {
  reg.add_gauge("troupe_build_info",
                "Always 1; the labels say which Troupe build serves these metrics.",
                {"version", "backends"})
    .with({TROUPE_VERSION, backends})
    .set(1);
}

} // namespace troupe::metrics
