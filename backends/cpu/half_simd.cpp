#include "backends/cpu/half_simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace troupe::backends {

#if defined(__x86_64__)

namespace {

#define TROUPE_F16C __attribute__((target("avx,f16c")))

bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}

// Widens 8 halves from p, n of them real (the rest read as zero).
TROUPE_F16C __m256 load8(const uint16_t* p, size_t n) {
  if (n == 8)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t tail[8] = {};
  for (size_t i = 0; i < n; ++i)
    tail[i] = p[i];
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail)));
}

// Rounds 8 floats to halves (nearest even) and stores the first n.
TROUPE_F16C void store8(uint16_t* p, __m256 v, size_t n) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (n == 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
    return;
  }
  alignas(16) uint16_t tail[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(tail), h);
  for (size_t i = 0; i < n; ++i)
    p[i] = tail[i];
}

// The element-wise operations of arith.cpp, 8 lanes at a time; min and max
// keep its choice of operand when a NaN is involved (`b < a ? b : a`,
// `a < b ? b : a`), which is what _mm256_min_ps(b, a) / _mm256_max_ps(b, a)
// return.
struct add8 {
  TROUPE_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_add_ps(a, b); }
};
struct mul8 {
  TROUPE_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_mul_ps(a, b); }
};
struct min8 {
  TROUPE_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_min_ps(b, a); }
};
struct max8 {
  TROUPE_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_max_ps(b, a); }
};

template <class Op>
TROUPE_F16C void reduce(void* out, const void* a, const void* b, size_t count) {
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  auto* z = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < count; i += 8) {
    const size_t n = count - i < 8 ? count - i : 8;
    store8(z + i, Op{}(load8(x + i, n), load8(y + i, n)), n);
  }
}

TROUPE_F16C void widen(const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, load8(in + i, 8));
  if (i < count) {
    alignas(32) float tail[8];
    _mm256_store_ps(tail, load8(in + i, count - i));
    for (size_t k = 0; i + k < count; ++k)
      out[i + k] = tail[k];
  }
}

TROUPE_F16C void narrow(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    store8(out + i, _mm256_loadu_ps(in + i), 8);
  if (i < count) {
    alignas(32) float tail[8] = {};
    for (size_t k = 0; i + k < count; ++k)
      tail[k] = in[i + k];
    store8(out + i, _mm256_load_ps(tail), count - i);
  }
}

TROUPE_F16C void scale(uint16_t* data, size_t count, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  for (size_t i = 0; i < count; i += 8) {
    const size_t n = count - i < 8 ? count - i : 8;
    store8(data + i, _mm256_mul_ps(load8(data + i, n), f), n);
  }
}

} // namespace

f16_widen simd_f16_widen() {
  return has_f16c() ? &widen : nullptr;
}

f16_narrow simd_f16_narrow() {
  return has_f16c() ? &narrow : nullptr;
}

f16_reduce simd_f16_reduction(reduce_op op) {
  if (!has_f16c())
    return nullptr;
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: return &reduce<add8>;
    case reduce_op::product: return &reduce<mul8>;
    case reduce_op::min: return &reduce<min8>;
    case reduce_op::max: return &reduce<max8>;
    case reduce_op::adasum: break;
  }
  return nullptr;
}

f16_scale simd_f16_scale() {
  return has_f16c() ? &scale : nullptr;
}

#else

f16_widen simd_f16_widen() {
  return nullptr;
}

f16_narrow simd_f16_narrow() {
  return nullptr;
}

f16_reduce simd_f16_reduction(reduce_op) {
  return nullptr;
}

f16_scale simd_f16_scale() {
  return nullptr;
}

#endif

} // namespace troupe::backends
