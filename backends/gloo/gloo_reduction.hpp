#pragma once

#include <cstddef>

#include "troupe/types.hpp"

namespace troupe::backends {

/// out[i] = a[i] op b[i] over `count` elements (out may alias a or b):
/// Gloo's reduce-function signature.
using element_reduction = void (*)(void* out, const void* a, const void* b, size_t count);

/// The reduction of `op` on `dtype` that Gloo-mode allreduces use: Gloo's
/// own functions, the 16-bit ones of cpu/arith.hpp, sum for average (the
/// caller divides) and max for a bool sum (a logical or, as in torch).
/// Throws backend_error for Adasum.
element_reduction reduction_of(data_type dtype, reduce_op op);

} // namespace troupe::backends
