#pragma once

// Include only from .cpp files: the negotiator's tracing of backend
// activities.

#include "actors/tensor_entry.hpp"

namespace caf {
class actor;
}

namespace troupe::actors {

/// Sets `work.trace` and `work.past_trace`: every activity the backend
/// reports goes to `timeline` as span edges (timeline, tensor, phase,
/// activity, ts_us) on the row of each of the work's tensors. Edges are
/// stamped when reported; a past span at now minus its offsets.
void attach_tracers(const caf::actor& timeline, collective_work& work);

} // namespace troupe::actors
