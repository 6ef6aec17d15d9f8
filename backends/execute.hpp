#pragma once

#include "actors/tensor_entry.hpp"
#include "backends/backend.hpp"
#include "troupe/status.hpp"

namespace troupe::backends {

/// Runs one negotiated collective on `b` for the local entries: copies in,
/// calls the backend, applies averaging, sizes allgather outputs. Never
/// throws: failures come back as a status (backend_error -> backend).
status execute(backend& b, int set_size, actors::collective_work& work);

} // namespace troupe::backends
