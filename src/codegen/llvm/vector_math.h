// The vector math of generated kernels, as straight-line LLVM IR on <W x float> (no calls): exp, log, tanh and erf
// as polynomials with fused multiply-adds (the algorithms of src/kernels/cpu/vec_math.h, sharing the exp and erf
// coefficients in support/exp_polynomial.h and support/erf_polynomial.h, so the two agree bit for bit); sin, cos,
// tan, atan and pow in f64 from the f32 arguments, rounded once (sin/cos/tan with an exact reduction by pi/2 for
// every finite float). Bounds, measured against the C library over wide sweeps and every binade (tests): exp and
// log within 2 ulp, tanh and erf within 3e-7 relative (absolute near 0 where the result is tiny), sin, cos, tan,
// atan and pow within 1 ulp. NaN propagates; exp over/underflows to inf/0; log(0) = -inf, log(<0) = NaN;
// sin/cos/tan(+-inf) = NaN. (f64 math calls the C library per lane instead: values.cpp's call_per_lane.)
#pragma once

#include <initializer_list>
#include <span>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/kernel_ir.h"
#include "codegen/llvm/ir_helpers.h"

namespace cuvil::codegen {

class VectorMath {
 public:
  // avx512f / avx512vl: the target's, for the one x86 instruction used directly (vscalefps in exp's 2^n).
  VectorMath(llvm::IRBuilder<>& b, llvm::Module& m, bool avx512f, bool avx512vl)
      : B(b), M(m), avx512f(avx512f), avx512vl(avx512vl) {}

  // e^x; `nonpositive`: x is known to be <= 0 or NaN (Softmax's x - max), so the upper clamp is left out.
  llvm::Value* exp(llvm::Value* x, bool nonpositive = false);
  llvm::Value* log(llvm::Value* x);
  llvm::Value* tanh(llvm::Value* x);
  llvm::Value* erf(llvm::Value* x);
  llvm::Value* trig(Op op, llvm::Value* x);  // sin, cos or tan
  llvm::Value* atan(llvm::Value* x);
  llvm::Value* pow(llvm::Value* x, llvm::Value* y);

  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return B.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  }
  llvm::Value* fabs(llvm::Value* a) { return B.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a); }

 private:
  llvm::IRBuilder<>& B;
  llvm::Module& M;
  bool avx512f, avx512vl;
  llvm::GlobalVariable* pi_table = nullptr;  // two_over_pi_table, created on first use

  llvm::Value* horner(llvm::Value* x, std::span<const double> coeffs);
  llvm::Value* horner(llvm::Value* x, std::initializer_list<double> coeffs);
  llvm::Value* scale_pow2(llvm::Value* p, llvm::Value* fn);
  llvm::Value* per_chunk(llvm::Value* a, llvm::Value* b, int chunk,
                         const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& f);
  llvm::Value* roundeven(llvm::Value* v) { return B.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, v); }
  llvm::Type* dvec(int w) { return vec(B.getDoubleTy(), w); }
  struct Reduced {
    llvm::Value* r;
    llvm::Value* q;
  };
  Reduced reduce_half_pi(llvm::Value* x);
  llvm::GlobalVariable* two_over_pi_table();
};

}  // namespace cuvil::codegen
