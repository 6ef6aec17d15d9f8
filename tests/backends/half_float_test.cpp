// float16 conversion, reduction and scaling against the compiler's own
// IEEE half type (_Float16: round to nearest even), for every one of the
// 65,536 halves: the public functions (arith.hpp), whichever code the CPU
// selects, and the F16C kernels themselves where the CPU has them.
#include "backends/cpu/arith.hpp"
#include "backends/cpu/half_simd.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace troupe::backends {
namespace {

float widen(uint16_t h) {
  _Float16 f;
  std::memcpy(&f, &h, sizeof h);
  return static_cast<float>(f);
}

uint16_t narrow(float f) {
  const auto h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

// Equal bits, or both NaN (payloads are not specified).
bool same_half(uint16_t a, uint16_t b) {
  return a == b || (std::isnan(widen(a)) && std::isnan(widen(b)));
}

std::vector<uint16_t> every_half() {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = static_cast<uint16_t>(i);
  return all;
}

// Second operands: zeros, subnormals, normals of every scale, the largest
// half, infinities, a NaN.
const std::vector<float> partners{0.0f, -0.0f, 5.96e-8f, -6.1e-5f, 1.0f, -1.5f, 3.14159f,
                                  1000.5f, -2049.0f, 65504.0f, -65504.0f, INFINITY, -INFINITY,
                                  NAN, 1e-3f, 0.33333f};

template <class Op>
void check_reduction(half_reduction f, reduce_op op, Op reference) {
  const auto x = every_half();
  for (float p : partners) {
    // An odd count leaves a tail shorter than a vector.
    std::vector<uint16_t> y(x.size() - 3, narrow(p)), z(y.size());
    f(z.data(), x.data(), y.data(), z.size());
    for (size_t i = 0; i < z.size(); ++i) {
      const auto expected = narrow(reference(widen(x[i]), widen(y[i])));
      ASSERT_TRUE(same_half(z[i], expected))
        << to_string(op) << "(" << widen(x[i]) << ", " << widen(y[i]) << ") gave bits " << z[i]
        << ", expected " << expected;
    }
  }
  // In place (out aliases a), as Gloo and MPI call it.
  std::vector<uint16_t> inout(x), twos(x.size(), narrow(2.0f));
  f(inout.data(), inout.data(), twos.data(), inout.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_TRUE(same_half(inout[i], narrow(reference(widen(x[i]), 2.0f))));
}

void check_all_reductions(half_reduction (*of)(reduce_op)) {
  check_reduction(of(reduce_op::sum), reduce_op::sum, [](float a, float b) { return a + b; });
  check_reduction(of(reduce_op::product), reduce_op::product,
                  [](float a, float b) { return a * b; });
  check_reduction(of(reduce_op::min), reduce_op::min,
                  [](float a, float b) { return b < a ? b : a; });
  check_reduction(of(reduce_op::max), reduce_op::max,
                  [](float a, float b) { return a < b ? b : a; });
}

TEST(half_float, conversions_match_ieee_half_for_every_value) {
  const auto all = every_half();
  std::vector<float> wide(all.size());
  half_to_float(data_type::float16, all.data(), wide.data(), wide.size());
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_TRUE(widen(all[i]) == wide[i] || (std::isnan(widen(all[i])) && std::isnan(wide[i])))
      << "bits " << all[i];
  // Narrowing: every half, and the floats halfway between neighbours.
  std::vector<float> floats;
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    floats.push_back(widen(all[i]));
    floats.push_back((widen(all[i]) + widen(all[i + 1])) / 2);
  }
  std::vector<uint16_t> back(floats.size());
  float_to_half(data_type::float16, floats.data(), back.data(), back.size());
  for (size_t i = 0; i < floats.size(); ++i)
    ASSERT_TRUE(same_half(back[i], narrow(floats[i]))) << floats[i];
}

TEST(half_float, reductions_match_ieee_half_for_every_value) {
  check_all_reductions([](reduce_op op) { return half_reduction_of(data_type::float16, op); });
}

TEST(half_float, simd_kernels_match_ieee_half_where_the_cpu_has_them) {
  if (!simd_f16_reduction(reduce_op::sum))
    GTEST_SKIP() << "this CPU has no float16 conversion instructions";
  check_all_reductions([](reduce_op op) { return half_reduction(simd_f16_reduction(op)); });
  EXPECT_EQ(simd_f16_reduction(reduce_op::adasum), nullptr);
  const auto all = every_half();
  std::vector<float> wide(all.size() - 5);
  simd_f16_widen()(all.data(), wide.data(), wide.size());
  std::vector<uint16_t> back(wide.size()), scaled(all.begin(), all.end() - 5);
  simd_f16_narrow()(wide.data(), back.data(), back.size());
  simd_f16_scale()(scaled.data(), scaled.size(), 0.3f);
  for (size_t i = 0; i < wide.size(); ++i) {
    ASSERT_TRUE(same_half(back[i], all[i])) << "bits " << all[i];
    ASSERT_TRUE(same_half(scaled[i], narrow(widen(all[i]) * 0.3f))) << "bits " << all[i];
  }
}

TEST(half_float, scaling_matches_ieee_half_for_every_value) {
  auto all = every_half();
  auto scaled = all;
  scale(scaled.data(), scaled.size(), data_type::float16, 0.125);
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_TRUE(same_half(scaled[i], narrow(widen(all[i]) * 0.125f))) << "bits " << all[i];
}

} // namespace
} // namespace troupe::backends
