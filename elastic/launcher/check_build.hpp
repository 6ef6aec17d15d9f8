#pragma once

#include <string>

namespace troupe::elastic::launcher {

/// What `troupe-run --check-build` prints: horovodrun --check-build's
/// sections (frameworks, controllers, tensor operations) for this build.
std::string build_report(const std::string& version, bool python_package);

} // namespace troupe::elastic::launcher
