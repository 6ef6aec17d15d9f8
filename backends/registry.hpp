#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace troupe::backends {

/// Names of the CPU backends this build has, preferred first.
std::vector<std::string> built_cpu_backends();

/// Creates the CPU backend for a process set: a no-communication backend for
/// a set of one, else the named one ("" = preferred). Throws backend_error
/// naming the backend when it was not built.
std::unique_ptr<backend> make_cpu_backend(const backend_context& ctx,
                                          const std::string& name = "");

} // namespace troupe::backends
