#pragma once

#include <string>

namespace troupe::metrics {

class registry;

/// troupe_build_info{version, backends} 1: which build answers, for joins
/// and dashboards ("which ranks run the old version?").
void register_build_info(registry& reg, const std::string& backends);

} // namespace troupe::metrics
