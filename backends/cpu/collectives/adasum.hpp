#pragma once

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

/// Adasum (Maleki et al.; Horovod's CPU algorithm): vector-halving,
/// distance-doubling. At each level a rank swaps half its segment with the
/// partner at that distance, the ranks sharing the pair of vectors sum
/// their partial dot product and squared norms, and each combines
///   (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b
/// on its half; a distance-halving exchange then reassembles the vector.
/// Needs a power-of-two set size; float32 / float64 only (callers widen
/// 16-bit floats).
void adasum_in_place(const run_context& ctx, void* data, size_t count, data_type dtype);

} // namespace troupe::backends
