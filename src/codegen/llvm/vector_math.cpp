#include "codegen/llvm/vector_math.h"

#include <cmath>
#include <limits>

#include <llvm/IR/IntrinsicsX86.h>

#include "codegen/llvm/control_flow.h"
#include "codegen/llvm/ir_helpers.h"
#include "support/erf_polynomial.h"
#include "support/exp_polynomial.h"

namespace cuvil::codegen {

using llvm::Value;

Value* VectorMath::horner(Value* x, std::span<const double> coeffs) {
  Value* p = fc(x, coeffs[0]);
  for (size_t i = 1; i < coeffs.size(); ++i) p = fma(p, x, fc(x, coeffs[i]));
  return p;
}

Value* VectorMath::horner(Value* x, std::initializer_list<double> coeffs) {
  return horner(x, std::span<const double>(coeffs.begin(), coeffs.size()));
}

// p * 2^n for an integral n held as a float (|n| <= 150): one vscalefps where the target has AVX-512 (exact
// scaling, rounded once, with IEEE overflow to inf and denormal results), else two multiplies by exponent-field
// powers of two, so that denormal results also round once and n = 128 still overflows to inf.
Value* VectorMath::scale_pow2(Value* p, Value* fn) {
  int w = width(p);
  if (avx512f && w % 16 == 0) {
    llvm::Function* scalef = llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::x86_avx512_mask_scalef_ps_512);
    return per_chunk(p, fn, 16, [&](Value* a, Value* b) {
      return B.CreateCall(scalef, {a, b, llvm::Constant::getNullValue(a->getType()), B.getInt16(0xffff),
                                   B.getInt32(4 /* current rounding mode */)});
    });
  }
  if (avx512vl && w == 8) {
    llvm::Function* scalef = llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::x86_avx512_mask_scalef_ps_256);
    return B.CreateCall(scalef, {p, fn, llvm::Constant::getNullValue(p->getType()), B.getInt8(0xff)});
  }
  llvm::Type* it = ivec(p);
  Value* n = B.CreateFPToSI(fn, it);
  Value* n1 = B.CreateAShr(n, ic(it, 1));
  Value* n2 = B.CreateSub(n, n1);
  Value* s1 = B.CreateBitCast(B.CreateShl(B.CreateAdd(n1, ic(it, 127)), ic(it, 23)), p->getType());
  Value* s2 = B.CreateBitCast(B.CreateShl(B.CreateAdd(n2, ic(it, 127)), ic(it, 23)), p->getType());
  return B.CreateFMul(B.CreateFMul(p, s1), s2);
}

// f(a, b) applied to `chunk`-lane pieces of two <w x T> vectors (w a multiple of chunk), reassembled.
Value* VectorMath::per_chunk(Value* a, Value* b, int chunk, const std::function<Value*(Value*, Value*)>& f) {
  int w = width(a);
  if (w == chunk) return f(a, b);
  std::vector<Value*> parts;
  for (int lo = 0; lo < w; lo += chunk) {
    std::vector<int> idx;
    for (int i = 0; i < chunk; ++i) idx.push_back(lo + i);
    parts.push_back(f(B.CreateShuffleVector(a, idx), B.CreateShuffleVector(b, idx)));
  }
  while (parts.size() > 1) {  // concatenate pairwise
    std::vector<Value*> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) {
      std::vector<int> idx;
      for (int j = 0; j < 2 * width(parts[i]); ++j) idx.push_back(j);
      next.push_back(B.CreateShuffleVector(parts[i], parts[i + 1], idx));
    }
    parts = std::move(next);
  }
  return parts[0];
}

// e^x: x = n ln2 + r and the polynomial of support/exp_polynomial.h (the CPU kernels' exp_f computes the same
// reduction and polynomial), times 2^n (scale_pow2). The clamp to kHigh keeps r exact for huge x and still
// overflows; a NaN x passes it, so the result is NaN. `nonpositive`: x is known to be <= 0 or NaN
// (Softmax's x - max), so the upper clamp is left out: one operation of ~17 per element of Softmax's exp pass.
// Below kLow the lanes compute e^0 and take 0 at the end: scaling to below the smallest subnormal (0 after
// rounding) costs a microcode assist per instruction on Intel cores, which a causal mask's -inf scores met in every
// row (GPT-2's masked Softmax ran at a tenth of the unmasked one's speed). The results are the same bits.
Value* VectorMath::exp(Value* x, bool nonpositive) {
  namespace xp = exp_polynomial;
  Value* zero = B.CreateFCmpOLT(x, fc(x, xp::kLow));
  Value* xc = B.CreateSelect(zero, fc(x, 0.0), x);
  if (!nonpositive) xc = B.CreateSelect(B.CreateFCmpOGT(xc, fc(x, xp::kHigh)), fc(x, xp::kHigh), xc);
  const double shift = 12582912.0;  // 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits
  Value* t = fma(xc, fc(x, xp::kLog2e), fc(x, shift));
  Value* fn = B.CreateFSub(t, fc(x, shift));
  Value* r = fma(fn, fc(x, -xp::kLn2High), xc);
  r = fma(fn, fc(x, -xp::kLn2Low), r);
  return B.CreateSelect(zero, fc(x, 0.0), scale_pow2(horner(r, xp::kPoly), fn));
}

// log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by
// the odd series to s^11 (truncation < 2e-11 relative). Denormals are scaled by 2^23 first.
Value* VectorMath::log(Value* x) {
  llvm::Type* it = ivec(x);
  Value* tiny = B.CreateFCmpOLT(x, fc(x, 1.17549435e-38));
  Value* xs = B.CreateSelect(tiny, B.CreateFMul(x, fc(x, 8388608.0)), x);
  Value* bits = B.CreateBitCast(xs, it);
  Value* e = B.CreateSub(B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255)), ic(it, 127));
  e = B.CreateSelect(tiny, B.CreateSub(e, ic(it, 23)), e);
  Value* m = B.CreateBitCast(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x3f800000)), x->getType());
  Value* big = B.CreateFCmpOGT(m, fc(x, 1.41421356237309505));
  m = B.CreateSelect(big, B.CreateFMul(m, fc(x, 0.5)), m);
  e = B.CreateSelect(big, B.CreateAdd(e, ic(it, 1)), e);
  Value* f = B.CreateFSub(m, fc(x, 1.0));
  Value* s = B.CreateFDiv(f, B.CreateFAdd(f, fc(x, 2.0)));
  Value* z = B.CreateFMul(s, s);
  Value* p = horner(z, {1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3});
  Value* s2 = B.CreateFAdd(s, s);
  Value* logm = fma(B.CreateFMul(s2, z), p, s2);
  Value* fe = B.CreateSIToFP(e, x->getType());
  Value* r = fma(fe, fc(x, 0.693359375), fma(fe, fc(x, -2.12194440e-4), logm));
  double inf = std::numeric_limits<double>::infinity();
  r = B.CreateSelect(B.CreateFCmpOEQ(x, fc(x, 0.0)), fc(x, -inf), r);
  r = B.CreateSelect(B.CreateFCmpOLT(x, fc(x, 0.0)), fc(x, std::numeric_limits<double>::quiet_NaN()), r);
  r = B.CreateSelect(B.CreateFCmpOEQ(x, fc(x, inf)), x, r);
  return B.CreateSelect(B.CreateFCmpUNO(x, x), x, r);
}

// tanh: |x| < 0.9: x P(x^2), P of degree 7 fitted for relative error (1e-9); else 1 - 2 / (e^2|x| + 1), |x|
// clamped at 9.1, past which tanh rounds to 1. Error over every float: 1.27 ulp (Codegen.
// DISABLED_MathEveryFloat); 128K floats in cache, one thread: 35 us. The degree-19 Taylor series it
// replaces (below 0.55): 1.6 ulp, 38 us. A reciprocal by rcp14 and a Newton step instead of the division: 40 us.
Value* VectorMath::tanh(Value* x) {
  Value* a = fabs(x);
  a = B.CreateSelect(B.CreateFCmpOGT(a, fc(x, 9.1)), fc(x, 9.1), a);  // a NaN stays (and takes the exp piece)
  Value* p = horner(B.CreateFMul(a, a), {-0.0004501337534748018, 0.00256651034578681, -0.008244953118264675,
                                         0.021651461720466614, -0.053925320506095886, 0.1333291083574295,
                                         -0.33333316445350647, 1.0});
  Value* small = B.CreateFMul(a, p);
  Value* d = B.CreateFAdd(exp(B.CreateFAdd(a, a)), fc(x, 1.0));
  Value* large = B.CreateFSub(fc(x, 1.0), B.CreateFDiv(fc(x, 2.0), d));
  Value* r = B.CreateSelect(B.CreateFCmpOLT(a, fc(x, 0.9)), small, large);
  return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// erf: the polynomials of support/erf_polynomial.h (the CPU kernels' erf_f computes the same bits). Both are
// computed and one selected. GELU over 128K floats in cache, one thread, alternated: this 37-39 us, the previous
// (Taylor series + A&S tail with e^(-x^2), 3.24 ulp) 55-60, E by one Horner chain 42 (each vector waits on
// fourteen dependent multiply-adds), a (5, 3) rational + tail 33-37 (but its f32 evaluation errs 4.7 ulp near 1),
// one chain with coefficients picked per lane by blends or vpermps slower still.
Value* VectorMath::erf(Value* x) {
  namespace ep = erf_polynomial;
  Value* a = fabs(x);
  // a NaN stays (and takes the tail)
  a = B.CreateSelect(B.CreateFCmpOGT(a, fc(x, ep::kClamp)), fc(x, ep::kClamp), a);
  Value* p = horner(B.CreateFMul(a, a), ep::kSmall);
  Value* v = B.CreateFSub(a, fc(x, ep::kCenter));
  Value* v2 = B.CreateFMul(v, v);
  Value* e = fma(v, horner(v2, ep::kTailOdd), horner(v2, ep::kTailEven));
  Value* r = B.CreateSelect(B.CreateFCmpOLT(a, fc(x, ep::kSplit)), B.CreateFMul(a, p), B.CreateFSub(fc(x, 1.0), e));
  return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

// x = q pi/2 + r, |r| <= pi/4 (plus a rounding), r in f64; only q's low two bits matter.
// |x| < 2^20: Cody-Waite with pi/2 in three parts, the first of 33 bits, so that n c1 and x - n c1 are exact.
// Larger finite |x| (a branch taken only when some lane needs it): Payne-Hanek with a table of 2/pi's bits per
// exponent (two_over_pi_table), accurate to about 2^-61 in the fraction of a quadrant.
VectorMath::Reduced VectorMath::reduce_half_pi(Value* x) {
  int w = width(x);
  llvm::Type* dt = dvec(w);
  llvm::Type* it = ivec(x);
  Value* xd = B.CreateFPExt(x, dt);
  Value* ax = fabs(x);
  Value* small = B.CreateFCmpOLT(ax, fc(x, 0x1p20));
  Value* n = roundeven(B.CreateFMul(xd, fc(xd, 0x1.45f306dc9c883p-1)));
  n = B.CreateSelect(small, n, llvm::Constant::getNullValue(dt));  // NaN and huge lanes: r = x, q = 0 here
  Value* nn = B.CreateFNeg(n);
  Value* r = fma(nn, fc(xd, 0x1.921fb544p+0), xd);
  r = fma(nn, fc(xd, 0x1.0b4611a626331p-34), r);
  r = fma(nn, fc(xd, 0x1.1701b839a2520p-88), r);
  Value* q = B.CreateFPToSI(n, it);

  Value* huge = B.CreateAnd(B.CreateNot(small), B.CreateFCmpOLT(ax, fc(x, std::numeric_limits<double>::infinity())));
  Carried rq = emit_if(B, B.CreateOrReduce(huge), {r, q}, [&](const Carried&) {
    // |x| = m 2^k, m a 24-bit integer, k = e - 150 in [-3, 104]; x 2/pi mod 4 = m (h + mi + lo) mod 4 where the
    // table holds (2^k 2/pi) mod 4 in three 29-bit pieces: m h and m mi are exact products.
    Value* bits = B.CreateBitCast(x, it);
    Value* e = B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255));
    Value* m = B.CreateSIToFP(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x800000)), dt);
    Value* row = B.CreateSelect(huge, B.CreateSub(e, ic(it, 147)), llvm::Constant::getNullValue(it));
    row = B.CreateMul(B.CreateZExt(row, vec(B.getInt64Ty(), w)), B.CreateVectorSplat(unsigned(w), B.getInt64(3)));
    llvm::GlobalVariable* table = two_over_pi_table();
    auto piece = [&](int j) {
      Value* idx = B.CreateAdd(row, B.CreateVectorSplat(unsigned(w), B.getInt64(uint64_t(j))));
      Value* ptrs = B.CreateGEP(B.getDoubleTy(), table, idx);
      return B.CreateMaskedGather(dt, ptrs, llvm::Align(8), huge, llvm::Constant::getNullValue(dt));
    };
    Value* ph = B.CreateFMul(m, piece(0));
    Value* fours = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, B.CreateFMul(ph, fc(xd, 0.25)));
    ph = B.CreateFSub(ph, B.CreateFMul(fc(xd, 4.0), fours));
    Value* pm = B.CreateFMul(m, piece(1));
    Value* pl = B.CreateFMul(m, piece(2));
    Value* nh = roundeven(B.CreateFAdd(ph, pm));
    // ph - nh is exact, and so is + pm when small
    Value* f = B.CreateFAdd(B.CreateFAdd(B.CreateFSub(ph, nh), pm), pl);
    Value* rh = fma(f, fc(xd, 0x1.921fb54442d18p+0), B.CreateFMul(f, fc(xd, 0x1.1a62633145c07p-54)));
    Value* qh = B.CreateFPToSI(nh, it);
    Value* negative = B.CreateICmpSLT(bits, llvm::Constant::getNullValue(it));  // x = -(n pi/2 + r)
    rh = B.CreateSelect(negative, B.CreateFNeg(rh), rh);
    qh = B.CreateSelect(negative, B.CreateNeg(qh), qh);
    return Carried{B.CreateSelect(huge, rh, r), B.CreateSelect(huge, qh, q)};
  });
  return {rq[0], rq[1]};
}

// (2^k 2/pi) mod 4 for k = -3..104 as three doubles each: the bits of weight 2^1..2^-27, 2^-28..2^-56 and
// 2^-57..2^-85. 2/pi to 256 bits (checked against a 400-bit Machin computation).
llvm::GlobalVariable* VectorMath::two_over_pi_table() {
  if (pi_table) return pi_table;
  static const char kHex[] = "A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561";
  auto bit = [&](int i) {  // bit i after the binary point (i >= 1)
    if (i < 1) return 0;
    int d = i - 1, c = kHex[d / 4];
    int v = c <= '9' ? c - '0' : c - 'A' + 10;
    return (v >> (3 - d % 4)) & 1;
  };
  std::vector<double> vals;
  for (int k = -3; k <= 104; ++k)
    for (int hi : {1, -28, -57}) {
      uint64_t acc = 0;
      for (int j = hi; j > hi - 29; --j) acc = acc << 1 | uint64_t(bit(k - j));
      vals.push_back(std::ldexp(double(acc), hi - 28));
    }
  llvm::Constant* init = llvm::ConstantDataArray::get(B.getContext(), vals);
  pi_table = new llvm::GlobalVariable(M, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "two_over_pi");
  pi_table->setAlignment(llvm::Align(64));
  return pi_table;
}

// sin and cos of |r| <= pi/4 by Taylor series in f64 (truncation below 1e-12 relative), picked and signed by
// the quadrant; tan as their quotient. Within 1 ulp of the f32 result (one f64 -> f32 rounding); +-inf -> NaN.
Value* VectorMath::trig(Op op, Value* x) {
  Reduced red = reduce_half_pi(x);
  Value* r = red.r;
  Value* z = B.CreateFMul(r, r);
  Value* ps = horner(z, {1.0 / 6227020800, -1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6});
  Value* s = fma(B.CreateFMul(r, z), ps, r);
  Value* pc = horner(z, {-1.0 / 87178291200, 1.0 / 479001600, -1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24});
  Value* c = fma(B.CreateFMul(z, z), pc, fma(z, fc(z, -0.5), fc(z, 1.0)));
  llvm::Type* it = red.q->getType();
  Value* q = op == Op::cos ? B.CreateAdd(red.q, ic(it, 1)) : red.q;
  Value* odd = B.CreateICmpNE(B.CreateAnd(q, ic(it, 1)), llvm::Constant::getNullValue(it));
  Value* v;
  if (op == Op::tan) {
    v = B.CreateSelect(odd, B.CreateFNeg(B.CreateFDiv(c, s)), B.CreateFDiv(s, c));
  } else {
    v = B.CreateSelect(odd, c, s);
    Value* neg = B.CreateICmpNE(B.CreateAnd(q, ic(it, 2)), llvm::Constant::getNullValue(it));
    v = B.CreateSelect(neg, B.CreateFNeg(v), v);
  }
  Value* y = B.CreateFPTrunc(v, x->getType());
  Value* inf = B.CreateFCmpOEQ(fabs(x), fc(x, std::numeric_limits<double>::infinity()));
  return B.CreateSelect(inf, fc(x, std::numeric_limits<double>::quiet_NaN()), y);
}

// atan: |x| > 1 through pi/2 - atan(1/|x|), then above tan(pi/8) through pi/4 + atan((t - 1) / (t + 1)), so the
// odd Taylor series runs on |u| <= 0.4143 (to u^25: truncation below 2e-12 relative), all in f64.
Value* VectorMath::atan(Value* x) {
  Value* xd = B.CreateFPExt(x, dvec(width(x)));
  Value* a = fabs(xd);
  Value* inv = B.CreateFCmpOGT(a, fc(xd, 1.0));
  Value* t = B.CreateSelect(inv, B.CreateFDiv(fc(xd, 1.0), a), a);
  Value* big = B.CreateFCmpOGT(t, fc(xd, 0x1.a827999fcef32p-2));
  Value* u = B.CreateSelect(big, B.CreateFDiv(B.CreateFSub(t, fc(xd, 1.0)), B.CreateFAdd(t, fc(xd, 1.0))), t);
  Value* z = B.CreateFMul(u, u);
  Value* p = horner(z, {-1.0 / 25, 1.0 / 23, -1.0 / 21, 1.0 / 19, -1.0 / 17, 1.0 / 15, -1.0 / 13, 1.0 / 11,
                        -1.0 / 9, 1.0 / 7, -1.0 / 5, 1.0 / 3});
  Value* at = B.CreateFSub(u, B.CreateFMul(B.CreateFMul(u, z), p));
  at = B.CreateSelect(big, B.CreateFAdd(fc(xd, 0x1.921fb54442d18p-1), at), at);
  at = B.CreateSelect(inv, B.CreateFSub(fc(xd, 0x1.921fb54442d18p+0), at), at);
  return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, B.CreateFPTrunc(at, x->getType()), x);
}

// pow(x, y) = 2^(y log2 |x|) in f64 (log2 |x| from the float's exponent and the atanh series on m in
// [sqrt(1/2), sqrt(2)), 2^f by Taylor on |f| <= 1/2: each below 1e-15 relative), rounded once to f32: within
// 1 ulp. Signs and special values follow C's pow: y = 0 or x = 1 give 1; a negative finite x needs an integer y
// (odd: a negative result) or gives NaN; |x| = 1 with y = +-inf gives 1.
Value* VectorMath::pow(Value* x, Value* y) {
  int w = width(x);
  llvm::Type* dt = dvec(w);
  llvm::Type* it = ivec(x);
  const double inf = std::numeric_limits<double>::infinity();
  Value* ax = fabs(x);
  Value* tiny = B.CreateFCmpOLT(ax, fc(x, 0x1p-126));
  Value* xs = B.CreateSelect(tiny, B.CreateFMul(ax, fc(x, 0x1p23)), ax);
  Value* bits = B.CreateBitCast(xs, it);
  Value* e = B.CreateSub(B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255)), ic(it, 127));
  e = B.CreateSelect(tiny, B.CreateSub(e, ic(it, 23)), e);
  Value* m = B.CreateBitCast(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x3f800000)), x->getType());
  m = B.CreateFPExt(m, dt);
  Value* big = B.CreateFCmpOGT(m, fc(m, 1.41421356237309505));
  m = B.CreateSelect(big, B.CreateFMul(m, fc(m, 0.5)), m);
  e = B.CreateSelect(big, B.CreateAdd(e, ic(it, 1)), e);
  Value* s = B.CreateFDiv(B.CreateFSub(m, fc(m, 1.0)), B.CreateFAdd(m, fc(m, 1.0)));
  Value* z = B.CreateFMul(s, s);
  Value* logm = B.CreateFMul(B.CreateFAdd(s, s),
                             horner(z, {1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0}));
  Value* l2 = fma(logm, fc(m, 1.4426950408889634), B.CreateSIToFP(e, dt));
  l2 = B.CreateSelect(B.CreateFCmpOEQ(ax, fc(x, 0.0)), fc(m, -inf), l2);
  l2 = B.CreateSelect(B.CreateFCmpOEQ(ax, fc(x, inf)), fc(m, inf), l2);
  Value* t = B.CreateFMul(B.CreateFPExt(y, dt), l2);
  t = B.CreateSelect(B.CreateFCmpOEQ(l2, fc(m, 0.0)), fc(m, 0.0), t);  // |x| = 1, even for y = +-inf
  // 2^t with t clamped to [-300, 300] (beyond the f32 range either way); NaN lanes are replaced below.
  t = B.CreateSelect(B.CreateFCmpOLT(t, fc(m, -300.0)), fc(m, -300.0), t);
  t = B.CreateSelect(B.CreateFCmpOGT(t, fc(m, 300.0)), fc(m, 300.0), t);
  t = B.CreateSelect(B.CreateFCmpUNO(t, t), fc(m, 0.0), t);
  Value* n = roundeven(t);
  Value* g = B.CreateFMul(B.CreateFSub(t, n), fc(m, 0.69314718055994531));
  Value* p = horner(g, {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                        1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0});
  llvm::Type* i64v = vec(B.getInt64Ty(), w);
  Value* two_n = B.CreateBitCast(B.CreateShl(B.CreateAdd(B.CreateFPToSI(n, i64v), ic(i64v, 1023)), ic(i64v, 52)), dt);
  Value* r = B.CreateFPTrunc(B.CreateFMul(p, two_n), x->getType());
  // signs and special values
  Value* fy = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, y);
  Value* y_int = B.CreateFCmpOEQ(fy, y);
  Value* half_floor = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, B.CreateFMul(y, fc(y, 0.5)));
  Value* y_odd = B.CreateAnd(y_int, B.CreateFCmpONE(B.CreateFMul(half_floor, fc(y, 2.0)), y));
  Value* x_neg = B.CreateICmpSLT(B.CreateBitCast(x, it), llvm::Constant::getNullValue(it));
  r = B.CreateSelect(B.CreateAnd(x_neg, y_odd), B.CreateFNeg(r), r);
  Value* neg_finite = B.CreateAnd(B.CreateFCmpOLT(x, fc(x, 0.0)), B.CreateFCmpOGT(x, fc(x, -inf)));
  Value* nan = fc(x, std::numeric_limits<double>::quiet_NaN());
  r = B.CreateSelect(B.CreateAnd(neg_finite, B.CreateNot(y_int)), nan, r);
  r = B.CreateSelect(B.CreateFCmpUNO(x, y), nan, r);
  return B.CreateSelect(B.CreateOr(B.CreateFCmpOEQ(y, fc(y, 0.0)), B.CreateFCmpOEQ(x, fc(x, 1.0))), fc(x, 1.0), r);
}

}  // namespace cuvil::codegen
