#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "troupe/types.hpp"

namespace troupe::backends {

/// float16 and bfloat16 travel and reduce as float32 on CPU, so sums keep
/// float32 precision and round to 16 bits once at the end.
bool is_half(data_type dtype);

/// Widens `count` 16-bit floats to float32, and narrows them back
/// (round to nearest even).
void half_to_float(data_type dtype, const void* in, float* out, size_t count);
void float_to_half(data_type dtype, const float* in, void* out, size_t count);

/// data[i] = data[i] * factor, for every numeric dtype except the 16-bit
/// floats (scaled while widened). Integers round toward zero, as
/// Horovod's scaling does.
void scale(void* data, size_t count, data_type dtype, double factor);

/// Calls f(T*) with the C++ element type of `dtype` (uint8_t for bool);
/// 16-bit floats are not dispatched (see is_half). Throws backend_error for
/// a dtype without an element type.
template <class F>
void with_element_type(data_type dtype, F&& f);

} // namespace troupe::backends

#include "backends/cpu/arith_dispatch.hpp"
