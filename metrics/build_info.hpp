#pragma once

#include <string>

namespace prometheus {
class Registry;
}

namespace troupe::metrics {

/// troupe_build_info{version, backends} 1: which build answers, for joins
/// and dashboards ("which ranks run the old version?").
void register_build_info(prometheus::Registry& reg, const std::string& backends);

} // namespace troupe::metrics
