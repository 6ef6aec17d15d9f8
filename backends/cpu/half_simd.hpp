#pragma once

#include <cstddef>
#include <cstdint>

#include "troupe/types.hpp"

namespace troupe::backends {

// float16 through the CPU's conversion instructions (x86 F16C: 8 values per
// instruction, IEEE round to nearest even, subnormals, infinities and NaNs
// as the portable code in arith.cpp). Converting one value at a time in
// portable code made a float16 ResNet-50 step (48.7 MiB) 3x slower than the
// same step in float32 (97.5 MiB). Each function below exists only when
// the CPU has the instructions: it is null otherwise, and arith.cpp then
// uses its portable code.

using f16_widen = void (*)(const uint16_t* in, float* out, size_t count);
using f16_narrow = void (*)(const float* in, uint16_t* out, size_t count);
using f16_reduce = void (*)(void* out, const void* a, const void* b, size_t count);
using f16_scale = void (*)(uint16_t* data, size_t count, float factor);

f16_widen simd_f16_widen();
f16_narrow simd_f16_narrow();
/// Sum (average), product, min and max as arith.cpp's; null for Adasum.
f16_reduce simd_f16_reduction(reduce_op op);
f16_scale simd_f16_scale();

} // namespace troupe::backends
