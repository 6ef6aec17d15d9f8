#pragma once

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

/// Reduces `count` elements of `dtype` at `data` in place across the set:
/// prescale, reduce, average and postscale. 16-bit floats stay 16-bit (see
/// is_half) except under Adasum, widened to float32 for the whole
/// computation. Shared by allreduce and reducescatter.
void reduce_in_place(const run_context& ctx, const v1::Response& resp, void* data,
                     size_t count, data_type dtype);

} // namespace troupe::backends
