#include "backends/cpu/arith.hpp"

#include "backends/cpu/half_simd.hpp"

#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

// Each iteration of the element-wise loops below touches index i only, so
// an output that is one of the inputs (in place) is no dependence: say so,
// or GCC vectorizes behind a runtime overlap check that an in-place call
// fails. (The file is built with -O3, backends/CMakeLists.txt: GCC 12's -O2
// vectorizes no loop whose count is unknown, and the scalar loop took
// 665 ns per 4 KiB of float32 here, the vectorized one 167.)
#if defined(__clang__)
#define TROUPE_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#else
#define TROUPE_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#endif

namespace troupe::backends {

namespace {

// The IEEE-754 bits of a float and back (std::bit_cast before C++20).
float float_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t bits_of_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return float_of_bits(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = bits_of_float(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u)
      return sign;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs >> 23) - 127 + 15) << 10 | ((abs >> 13) & 0x3ffu);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half;  // may carry into the exponent, which is the right result
  return static_cast<uint16_t>(sign | half);
}

float bf16_to_f32(uint16_t h) {
  return float_of_bits(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_of_float(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

uint16_t to_half(bool bf16, float f) {
  return bf16 ? f32_to_bf16(f) : f32_to_f16(f);
}

float from_half(bool bf16, uint16_t h) {
  return bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// out[i] = a[i] op b[i] for 16-bit floats, computed in float32 and rounded.
template <bool BF16>
struct halves {
  template <class Op>
  static void reduce(void* out, const void* a, const void* b, size_t count) {
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    auto* z = static_cast<uint16_t*>(out);
    for (size_t i = 0; i < count; ++i)
      z[i] = to_half(BF16, Op{}(from_half(BF16, x[i]), from_half(BF16, y[i])));
  }
};

// out[i] = a[i] op b[i] in T's own arithmetic.
template <class T>
struct elements {
  template <class Op>
  static void reduce(void* out, const void* a, const void* b, size_t count) {
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    auto* z = static_cast<T*>(out);
    TROUPE_INDEPENDENT_ITERATIONS
    for (size_t i = 0; i < count; ++i)
      z[i] = static_cast<T>(Op{}(x[i], y[i]));
  }
};

// std::min and std::max (NaN handling included), as Gloo's reductions.
struct min_of {
  template <class T>
  T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

struct max_of {
  template <class T>
  T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// Kind's reduction of `op` (sum for average: the caller divides).
template <class Kind>
element_reduction reduction_by_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: return &Kind::template reduce<std::plus<>>;
    case reduce_op::product: return &Kind::template reduce<std::multiplies<>>;
    case reduce_op::min: return &Kind::template reduce<min_of>;
    case reduce_op::max: return &Kind::template reduce<max_of>;
    case reduce_op::adasum: break;
  }
  throw backend_error(std::string("no element-wise reduction for '") + to_string(op) + "'");
}

template <class T>
void scale_as(void* data, size_t count, double factor) {
  auto* p = static_cast<T*>(data);
  TROUPE_INDEPENDENT_ITERATIONS
  for (size_t i = 0; i < count; ++i)
    p[i] = static_cast<T>(static_cast<double>(p[i]) * factor);
}

} // namespace

bool is_half(data_type dtype) {
  return dtype == data_type::float16 || dtype == data_type::bfloat16;
}

void half_to_float(data_type dtype, const void* in, float* out, size_t count) {
  const auto* h = static_cast<const uint16_t*>(in);
  static const auto simd = simd_f16_widen();
  if (dtype == data_type::float16 && simd)
    simd(h, out, count);
  else if (dtype == data_type::float16)
    for (size_t i = 0; i < count; ++i)
      out[i] = f16_to_f32(h[i]);
  else
    for (size_t i = 0; i < count; ++i)
      out[i] = bf16_to_f32(h[i]);
}

void float_to_half(data_type dtype, const float* in, void* out, size_t count) {
  auto* h = static_cast<uint16_t*>(out);
  static const auto simd = simd_f16_narrow();
  if (dtype == data_type::float16 && simd)
    simd(in, h, count);
  else if (dtype == data_type::float16)
    for (size_t i = 0; i < count; ++i)
      h[i] = f32_to_f16(in[i]);
  else
    for (size_t i = 0; i < count; ++i)
      h[i] = f32_to_bf16(in[i]);
}

half_reduction half_reduction_of(data_type dtype, reduce_op op) {
  if (!is_half(dtype))
    throw backend_error(std::string("no 16-bit reduction for ") + to_string(dtype));
  if (dtype == data_type::bfloat16)
    return reduction_by_op<halves<true>>(op);
  if (auto simd = simd_f16_reduction(op))
    return simd;
  return reduction_by_op<halves<false>>(op);
}

element_reduction reduction_of(data_type dtype, reduce_op op) {
  if (is_half(dtype))
    return half_reduction_of(dtype, op);
  element_reduction fn = nullptr;
  with_element_type(dtype, [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    // bool is uint8 here; its sum is a logical or, as in torch.
    fn = reduction_by_op<elements<T>>(
      dtype == data_type::boolean && op == reduce_op::sum ? reduce_op::max : op);
  });
  return fn;
}

void check_scalable(data_type dtype, double factor) {
  if (factor != 1.0 && dtype == data_type::boolean)
    throw backend_error("bool tensors cannot be scaled (prescale/postscale/average)");
}

void scale(void* data, size_t count, data_type dtype, double factor) {
  check_scalable(dtype, factor);
  if (factor == 1.0)
    return;
  if (is_half(dtype)) {
    const bool bf16 = dtype == data_type::bfloat16;
    auto* p = static_cast<uint16_t*>(data);
    const auto f = static_cast<float>(factor);
    static const auto simd = simd_f16_scale();
    if (!bf16 && simd)
      return simd(p, count, f);
    for (size_t i = 0; i < count; ++i)
      p[i] = to_half(bf16, from_half(bf16, p[i]) * f);
    return;
  }
  with_element_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, float>) {
      // float32 is scaled in float32, as the framework would.
      auto* p = static_cast<float*>(data);
      const auto f = static_cast<float>(factor);
      TROUPE_INDEPENDENT_ITERATIONS
      for (size_t i = 0; i < count; ++i)
        p[i] *= f;
    } else {
      scale_as<T>(data, count, factor);
    }
  });
}

} // namespace troupe::backends
