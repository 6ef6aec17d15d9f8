#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "troupe/types.hpp"

namespace troupe::backends {

/// float16 and bfloat16: they travel as 16 bits and every partial result
/// is rounded to 16 bits (as NCCL and Horovod's MPI float16 op do), except
/// for Adasum, which computes in float32.
bool is_half(data_type dtype);

/// Widens `count` 16-bit floats to float32, and narrows them back
/// (round to nearest even).
void half_to_float(data_type dtype, const void* in, float* out, size_t count);
void float_to_half(data_type dtype, const float* in, void* out, size_t count);

/// out[i] = a[i] op b[i] over `count` elements (out may alias a or b):
/// Gloo's reduce-function signature.
using element_reduction = void (*)(void* out, const void* a, const void* b, size_t count);

/// out = input(0) op input(1) op ... op input(members - 1) over `count`
/// elements, in member order, so that every rank that runs it gets the same
/// bits (`members` at least 2; `input(m)` a pointer, which may alias `out`
/// for m = 0 only).
template <class Input>
void reduce_in_member_order(void* out, size_t count, element_reduction reduce, int members,
                            const Input& input) {
  reduce(out, input(0), input(1), count);
  for (int m = 2; m < members; ++m)
    reduce(out, out, input(m), count);
}

/// The reduction of `op` on `dtype` that Gloo-mode allreduces and the
/// shared-memory group use: sum for average (the caller divides), max for a
/// bool sum (a logical or, as in torch), the 16-bit ones below for 16-bit
/// floats; min and max as std::min and std::max. Throws backend_error for
/// Adasum.
element_reduction reduction_of(data_type dtype, reduce_op op);

/// An element_reduction of 16-bit floats: computed in float32 and rounded
/// to 16 bits.
using half_reduction = element_reduction;

/// The reduction of `op` (sum for average: the caller divides) on 16-bit
/// `dtype`; throws backend_error for Adasum.
half_reduction half_reduction_of(data_type dtype, reduce_op op);

/// data[i] = data[i] * factor, for every numeric dtype. Integers round
/// toward zero, as Horovod's scaling does; 16-bit floats are scaled in
/// float32 and rounded once.
void scale(void* data, size_t count, data_type dtype, double factor);

/// Throws backend_error where scale() by `factor` would: a bool tensor
/// scaled by anything but 1.
void check_scalable(data_type dtype, double factor);

/// Calls f(T*) with the C++ element type of `dtype` (uint8_t for bool);
/// 16-bit floats are not dispatched (see is_half). Throws backend_error for
/// a dtype without an element type.
template <class F>
void with_element_type(data_type dtype, F&& f);

} // namespace troupe::backends

#include "backends/cpu/arith_dispatch.hpp"
