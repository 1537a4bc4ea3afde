// Float exp, tanh, erf and sigmoid written as straight-line code (no calls, no branches, only selects), so that
// loops over them vectorize. Accuracy against the C library (measured in tests/unit/cpu_kernels_test.cpp):
// exp and sigmoid within ~2 ulp, tanh within ~2e-7 relative, erf within 2.47 ulp. Special values match
// std::: NaN propagates, exp overflows to inf and underflows through the denormals to 0, tanh(±inf) = ±1,
// erf(±inf) = ±1, and ±0 keep their sign in tanh and erf.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "support/erf_polynomial.h"
#include "support/exp_polynomial.h"

namespace cuvil::cpu {

// c ? a : b on bits. GCC (with the default -ftrapping-math) will not turn `c ? a * b : a` into a vector select,
// since that would run the multiply on lanes that did not ask for it; with both values computed first and
// chosen by a mask it vectorizes.
inline float select_f(bool c, float a, float b) {
  uint32_t m = 0u - uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// The polynomial c[0] x^(N-1) + ... + c[N-1] by Horner's rule in fused multiply-adds, each coefficient rounded to
// float. std::fma is one instruction in the AVX2 and AVX-512 clones and exact, though slow, in the baseline one, so
// results do not depend on the clone. The loop is unrolled by pragma: left to -O2's heuristics it stays a loop, and
// the loops around these functions then do not vectorize (erf over 16K floats: 100 us against 5.3).
template <class T, size_t N>
inline float horner_f(float x, const T (&c)[N]) {
  float p = float(c[0]);
#pragma GCC unroll 16
  for (size_t i = 1; i < N; ++i) p = std::fma(p, x, float(c[i]));
  return p;
}

// e^x: the reduction and polynomial of support/exp_polynomial.h, as the generated kernels compute it, times 2^n
// applied in two halves so that results in the denormal range round once and n = 128 still overflows to inf. Every
// step is a fused multiply-add: Attention's row Softmax over 128 x 128 scores took 10.3 us on one thread with
// separate multiplies and adds, 7.2 with fused ones.
// Below kLow e^x rounds to 0: those lanes compute e^0 and take 0, since scaling to below the smallest subnormal
// costs a microcode assist on Intel cores (a causal mask's -inf scores in every row).
inline float exp_f(float x) {
  namespace xp = exp_polynomial;
  const bool zero = x < float(xp::kLow);
  float xc = select_f(zero, 0.f, x);  // NaN passes
  xc = select_f(xc > float(xp::kHigh), float(xp::kHigh), xc);
  // Round x / ln2 to an integer by adding 1.5 * 2^23: the integer lands in the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  float t = std::fma(xc, float(xp::kLog2e), kShift);
  int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift);
  float fn = t - kShift;
  float r = std::fma(fn, -float(xp::kLn2High), xc);
  r = std::fma(fn, -float(xp::kLn2Low), r);
  float p = horner_f(r, xp::kPoly);
  int32_t n1 = n >> 1, n2 = n - n1;  // each in [-75, 64]: 2^n1 and 2^n2 are normal floats
  float s1 = std::bit_cast<float>(uint32_t(n1 + 127) << 23);
  float s2 = std::bit_cast<float>(uint32_t(n2 + 127) << 23);
  float y = select_f(zero, 0.f, p * s1 * s2);
  return select_f(x != x, x, y);
}

// 1 / (1 + e^-x) evaluated with e^-|x| <= 1, so nothing overflows: s = 1 / (1 + e), and e * s for x < 0.
inline float sigmoid_f(float x) {
  float e = exp_f(-std::fabs(x));
  float s = 1.0f / (1.0f + e);
  return select_f(x < 0, e * s, s);
}

// tanh: an odd Taylor polynomial of degree 19 for |x| < 0.55 (truncation < 1e-9 relative); above, 1 - 2 / (e^2|x| + 1),
// which loses nothing to cancellation there (the result is >= 0.5) and reaches 1 exactly for large |x|.
inline float tanh_f(float x) {
  float a = std::fabs(x);
  float z = x * x;
  constexpr float kTaylor[] = {-0.00023912911424355248f, 0.00059002744094558595f, -0.0014558343870513183f,
                               0.0035921280365724811f,  -0.0088632355299021973f, 0.021869488536155203f,
                               -0.053968253968253971f,  0.13333333333333333f,    -0.33333333333333333f};
  float p = horner_f(z, kTaylor);
  float small = x + x * (z * p);
  float large = 1.0f - 2.0f / (exp_f(2.0f * a) + 1.0f);
  return std::copysign(select_f(a < 0.55f, std::fabs(small), large), x);  // NaN takes the large branch and stays NaN
}

// erf: the polynomials of support/erf_polynomial.h with the same multiply-adds as the generated kernels, so the two
// agree bit for bit (2.47 ulp over every float).

inline float erf_f(float x) {
  namespace ep = erf_polynomial;
  constexpr float kClamp = float(ep::kClamp);
  float a = std::fabs(x);
  a = select_f(a > kClamp, kClamp, a);  // a NaN stays (and takes the tail)
  float p = horner_f(a * a, ep::kSmall);
  float v = a - float(ep::kCenter);
  float v2 = v * v;
  float e = std::fma(v, horner_f(v2, ep::kTailOdd), horner_f(v2, ep::kTailEven));
  return std::copysign(select_f(a < float(ep::kSplit), a * p, 1.0f - e), x);
}

}  // namespace cuvil::cpu
