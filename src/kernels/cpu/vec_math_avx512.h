// exp_f (vec_math.h) on 16 lanes with AVX-512 intrinsics, step for step the same fused multiply-adds (the final
// scaling by 2^n as one scalef, rounding as exp_f's two multiplies do), so each lane equals exp_f of it bit for bit. For kernels whose loops the compiler does not vectorize well on their own: short
// rows, where `#pragma omp simd` loops ran their remainders through the scalar exp_f (Attention's row Softmax over
// ViT's 197 keys: 0.72 ns an element, against 0.34 in the generated Softmax kernel).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "support/exp_polynomial.h"

namespace cuvil::cpu {

__attribute__((target("avx512f"))) inline __m512 exp_ps16(__m512 x) {
  namespace xp = exp_polynomial;
  // Below kLow: e^0 computed, 0 taken (no subnormal scaling, as exp_f). min returns its second operand when
  // either is NaN: a NaN lane stays NaN.
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(float(xp::kLow)), _CMP_LT_OQ);
  __m512 xc = _mm512_mask_blend_ps(zero, x, _mm512_setzero_ps());
  xc = _mm512_min_ps(_mm512_set1_ps(float(xp::kHigh)), xc);
  const __m512 shift = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23: x / ln2 rounded lands in the low mantissa bits
  __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(float(xp::kLog2e)), shift);
  __m512 fn = _mm512_sub_ps(t, shift);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(float(xp::kLn2High)), xc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(float(xp::kLn2Low)), r);
  __m512 p = _mm512_set1_ps(float(xp::kPoly[0]));
  for (size_t i = 1; i < sizeof(xp::kPoly) / sizeof(xp::kPoly[0]); ++i)
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(float(xp::kPoly[i])));
  // p * 2^n in one instruction: exp_f's (p * 2^n1) * 2^n2 (n = n1 + n2, so that neither factor overflows) is
  // exact in its first product and rounds once in the second, as scalef rounds p * 2^n once: the same bits, also
  // where the result is subnormal or overflows. 8 integer/multiply steps fewer.
  __m512 y = _mm512_mask_blend_ps(zero, _mm512_scalef_ps(p, fn), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

}  // namespace cuvil::cpu
