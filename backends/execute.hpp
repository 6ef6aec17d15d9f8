#pragma once

#include "actors/tensor_entry.hpp"
#include "backends/backend.hpp"
#include "backends/collectives/collectives.hpp"
#include "troupe/status.hpp"

namespace troupe::backends {

/// Runs one negotiated collective on `b` for the local entries. Never
/// throws: failures come back as a status (backend_error -> backend).
status execute(const run_context& ctx, actors::collective_work& work);

} // namespace troupe::backends
