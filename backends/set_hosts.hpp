#pragma once

#include <string>
#include <vector>

#include "backends/backend.hpp"

namespace troupe::backends {

/// Every member's host (backend_context::host), indexed by set rank: each
/// rank publishes its own under `ctx.store_prefix + scope` ("shm/",
/// "nccl/") and reads all in one listing once every member has (O(1) store
/// operations per rank). Throws store_error past ctx.timeout.
std::vector<std::string> exchange_hosts(const backend_context& ctx, const std::string& scope);

} // namespace troupe::backends
