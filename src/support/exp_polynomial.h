// The f32 exp shared by the generated kernels (src/codegen/llvm/vector_math.cpp) and the hand-written CPU kernels
// (src/kernels/cpu/vec_math.h): x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so that n ln2's high part is
// exact), e^r = 1 + r + r^2 Q(r), then times 2^n.
//
// Q has degree 4, fitted offline for the relative error of e^r over [-ln2/2, ln2/2] (minimax by Lawson-weighted
// least squares): 3.1e-9 in exact arithmetic, 0.71 ulp in f32 with the coefficients rounded to f32 (the degree-7
// Taylor polynomial it replaces: 5e-9 and 0.75 ulp, one multiply-add more per element). The whole exp stays
// within 2 ulp over every float (Codegen.DISABLED_MathEveryFloat).
#pragma once

namespace cuvil::exp_polynomial {

inline constexpr double kLow = -104.0;  // e^x rounds to 0 below (taken as 0, not computed: see vector_math.cpp)
inline constexpr double kHigh = 89.0;   // and to inf above
inline constexpr double kLog2e = 1.44269504088896341;
inline constexpr double kLn2High = 0.693359375;      // 9 significant bits: n * it is exact for |n| < 2^15
inline constexpr double kLn2Low = -2.12194440e-4;    // ln2 - kLn2High

// 1 + r + r^2 Q(r), highest degree first (Horner order).
inline constexpr double kPoly[] = {0.0013814610429108143, 0.008368710055947304, 0.04166838899254799,
                                   0.1666652113199234,    0.4999999403953552,   1.0,
                                   1.0};

}  // namespace cuvil::exp_polynomial
