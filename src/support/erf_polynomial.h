// The f32 erf shared by the generated kernels (src/codegen/llvm/vector_math.cpp) and the hand-written CPU kernels
// (src/kernels/cpu/vec_math.h), so both compute the same bits:
//   |x| < 1:              x P(x^2), P of degree 6 (relative error 1.2e-9);
//   1 <= |x| <= 3.925:    1 - E(|x| - 2.4625), E of degree 14 fitted to erfc (absolute error 6.7e-9), evaluated as
//                         even(v^2) + v odd(v^2): two chains of seven multiply-adds instead of one of fourteen;
//   |x| > 3.925:          erf rounds to 1 in f32, and so does 1 - E at the clamp.
// Every step is a multiply-add (no exp, no division). Coefficients fitted offline (minimax by Lawson-weighted least
// squares) and rounded to f32 where used. Error over every float: 2.47 ulp (Codegen.DISABLED_MathEveryFloat).
#pragma once

namespace cuvil::erf_polynomial {

inline constexpr double kClamp = 3.925;   // |x| beyond: erf is 1 in f32
inline constexpr double kSplit = 1.0;     // below: x P(x^2); above: 1 - E(|x| - kCenter)
inline constexpr double kCenter = 2.4625;

// Highest degree first (Horner order).
inline constexpr double kSmall[] = {7.854026625864208e-05, -0.0008010247838683426, 0.005188334733247757,
                                    -0.026853816583752632, 0.1128358542919159,    -0.3761262595653534,
                                    1.1283791065216064};
inline constexpr double kTailEven[] = {-1.078210630112153e-06, 1.7216096239280887e-05, -7.619794632773846e-05,
                                       -0.00034957629395648837, 0.00292933639138937,   0.009829382412135601,
                                       0.006461156997829676,    0.0004967535496689379};
inline constexpr double kTailOdd[] = {-1.3473869842073327e-07, -2.416991992504336e-05, 0.0002976549440063536,
                                      -0.00046629071584902704, -0.006755616050213575,  -0.009733718819916248,
                                      -0.0026237498968839645};

}  // namespace cuvil::erf_polynomial
