// cpu::exp_ps16 (kernels/cpu/vec_math_avx512.h) equals the scalar cpu::exp_f lane by lane, bit for bit: over a
// sweep of the whole clamped range and past both ends, the special values, denormal results, and random bits.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/vec_math_avx512.h"

namespace {

using cuvil::cpu::exp_f;

__attribute__((target("avx512f"))) void exp16(const float* x, float* y) {
  _mm512_storeu_ps(y, cuvil::cpu::exp_ps16(_mm512_loadu_ps(x)));
}

void expect_same_bits(std::vector<float> xs) {
  while (xs.size() % 16) xs.push_back(0.f);
  std::vector<float> got(xs.size());
  for (size_t i = 0; i < xs.size(); i += 16) exp16(xs.data() + i, got.data() + i);
  int mismatches = 0;
  for (size_t i = 0; i < xs.size() && mismatches < 10; ++i) {
    float want = exp_f(xs[i]);
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want) && !(std::isnan(got[i]) && std::isnan(want))) {
      ADD_FAILURE() << "exp(" << xs[i] << "): " << got[i] << " vs exp_f " << want;
      ++mismatches;
    }
  }
}

TEST(VecMathAvx512, ExpEqualsScalarExpBitForBit) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this machine";
  std::vector<float> xs;
  for (float x = -120.f; x <= 100.f; x += 0.0137f) xs.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -88.f, 88.7f, 89.f, 89.5f, -87.3f,
                  -103.9f, -104.f, -104.1f, std::numeric_limits<float>::denorm_min(), 1e-30f, -1e-30f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()})
    xs.push_back(x);
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) xs.push_back(std::bit_cast<float>(uint32_t(rng())));
  expect_same_bits(xs);
}

TEST(VecMathAvx512, ExpSpecialValues) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this machine";
  const float inf = std::numeric_limits<float>::infinity();
  float x[16] = {0.f, -inf, inf, std::numeric_limits<float>::quiet_NaN(), 1.f, -1.f, 100.f, -200.f};
  float y[16];
  exp16(x, y);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], inf);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_NEAR(y[4], std::exp(1.f), 2e-7 * std::exp(1.f));
  EXPECT_NEAR(y[5], std::exp(-1.f), 2e-7 * std::exp(-1.f));
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], 0.f);
}

}  // namespace
