#pragma once

#include "actors/tensor_entry.hpp"
#include "backends/communicator.hpp"
#include "backends/cpu/collectives/collectives.hpp"
#include "troupe/status.hpp"

namespace troupe::backends {

/// Runs one negotiated collective on `ctx.comm` for the local entries. Never
/// throws: failures come back as a status (backend_error -> backend).
status execute(const run_context& ctx, actors::collective_work& work);

} // namespace troupe::backends
