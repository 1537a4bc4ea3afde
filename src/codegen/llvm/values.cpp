// Element values: the expression DAG evaluated at a vector of lanes (iteratively, without recursion), each kernel
// IR op's instructions (compute), casts, and the C library's functions called lane by lane.
#include "codegen/llvm/emitter.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace cuvil::codegen {

// The operand expressions expression e reads at element level (row-uniform values come from uval): up to 3.
int Emitter::element_operands(int e, int (&deps)[3]) const {
  const Expr& x = K.exprs[size_t(e)];
  if (uniform[size_t(e)] || x.op == Op::load || x.op == Op::row_index) return 0;
  if (x.op == Op::scan_sum) {
    deps[0] = x.a;
    return 1;
  }
  deps[0] = x.a, deps[1] = x.b, deps[2] = x.c;
  return 3;
}

// Expression e at these lanes (memo: the values computed so far at them). Iterative, with an explicit stack:
// a fused chain of 50,000 element-wise ops is an expression 50,000 deep, which recursion would have to hold
// on the machine stack. Operands are emitted a, b, c, each before its user, as a recursion would.
Value* Emitter::elem(int e, const Lanes& l, std::vector<Value*>& memo) {
  if (memo[size_t(e)]) return memo[size_t(e)];
  struct Visit {
    int expr;
    int next;  // the operand slot to look at next
  };
  std::vector<Visit> stack{{e, 0}};
  while (!stack.empty()) {
    int x = stack.back().expr;
    int deps[3] = {-1, -1, -1};
    int nd = element_operands(x, deps);
    int& next = stack.back().next;
    while (next < nd && (deps[next] < 0 || memo[size_t(deps[next])])) ++next;
    if (next < nd) {
      int d = deps[next++];
      stack.push_back({d, 0});  // (invalidates `next`)
      continue;
    }
    stack.pop_back();
    if (!memo[size_t(x)]) memo[size_t(x)] = elem_at(x, l, memo);
  }
  return memo[size_t(e)];
}

// Expression e at these lanes, its element-level operands already in memo.
Value* Emitter::elem_at(int e, const Lanes& l, const std::vector<Value*>& memo) {
  const Expr& x = K.exprs[size_t(e)];
  auto operand = [&](int a) { return a >= 0 ? memo[size_t(a)] : nullptr; };
  if (uniform[size_t(e)]) return K.columns ? uval[size_t(e)] : splat(uval[size_t(e)], l.w);
  if (x.op == Op::load) return x.imm != 0 ? shifted_load(x, l) : load(x, l);
  if (x.op == Op::row_index) return K.columns ? splat_i64(column_pos, l.w) : positions(l.j, l.w);
  if (x.op == Op::scan_sum) return scan(e, operand(x.a), l);
  if (const FloatRoundTrip& f = float_round_trip[size_t(e)]; f.clamped >= 0 && memo[size_t(f.clamped)]) {
    Value* c = memo[size_t(f.clamped)];
    return f.zero_point == 0 ? B.CreateFAdd(c, fc(c, 0.0)) : B.CreateFSub(c, fc(c, f.zero_point));
  }
  return compute(x, operand(x.a), operand(x.b), operand(x.c), l.w);
}

// Whether expression e is a - max(a) over a's row (or column): <= 0, or NaN.
bool Emitter::nonpositive(int e) const {
  const Expr& x = K.exprs[size_t(e)];
  if (x.op != Op::sub) return false;
  const Expr& m = K.exprs[size_t(x.b)];
  return is_max_op(m.op) && m.a == x.a && is_float(x.type);
}

Value* Emitter::cast(Value* a, Scalar from, Scalar to, int w) {
  llvm::Type* t = vec(scalar_ty(to), w);
  if (from == to) return a;
  if (to == Scalar::i1)
    return is_float(from) ? B.CreateFCmpUNE(a, fc(a, 0.0)) : B.CreateICmpNE(a, llvm::Constant::getNullValue(a->getType()));
  if (from == Scalar::i1) return is_float(to) ? B.CreateUIToFP(a, t) : B.CreateZExt(a, t);
  if (is_float(from) && is_float(to)) return to == Scalar::f64 ? B.CreateFPExt(a, t) : B.CreateFPTrunc(a, t);
  if (is_float(to)) return from == Scalar::u64 ? B.CreateUIToFP(a, t) : B.CreateSIToFP(a, t);
  if (is_float(from)) {  // saturating to i64 (NaN -> 0), then modular to i32, as the reference Cast
    llvm::Type* i64v = vec(B.getInt64Ty(), w);
    // fptosi.sat's semantics written out: LLVM 16 splits a vector fptosi.sat into one scalar conversion and
    // compares per lane (QuantizeLinear's kernels ran at ~5 cycles per element), while a clamp into range, a plain
    // conversion (vcvttps2qq) and two selects stay vectors. The clamp's top is the largest float below 2^63.
    double below = from == Scalar::f32 ? double(std::nextafter(9223372036854775808.0f, 0.0f))
                                       : std::nextafter(9223372036854775808.0, 0.0);
    Value* inside = B.CreateMinNum(B.CreateMaxNum(a, fc(a, -9223372036854775808.0)), fc(a, below));
    Value* i = B.CreateFPToSI(inside, i64v);
    i = B.CreateSelect(B.CreateFCmpOGE(a, fc(a, 9223372036854775808.0)),
                       llvm::ConstantInt::get(i64v, uint64_t(INT64_MAX)), i);
    i = B.CreateSelect(B.CreateFCmpUNO(a, a), llvm::Constant::getNullValue(i64v), i);
    if (to == Scalar::u64) {  // from 2^63 up: unsigned, saturating at 2^64 - 1; below: i64's bits
      Value* high = B.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {i64v, a->getType()}, {a});
      i = B.CreateSelect(B.CreateFCmpOGE(a, fc(a, 9223372036854775808.0)), high, i);
    }
    return to == Scalar::i32 ? B.CreateTrunc(i, t) : i;
  }
  // between integers: i32 sign-extends (to u64 too, as C's conversion); u64 and i64 share their bits
  if (to == Scalar::i32) return B.CreateTrunc(a, t);
  return from == Scalar::i32 ? B.CreateSExt(a, t) : a;
}

// The C library's `name` applied lane by lane (the JIT resolves it: jit.cpp's math_functions()). f64 math calls
// it, as the reference kernels do, so the results are theirs bit for bit; so does fmod, which no short
// polynomial computes exactly.
Value* Emitter::call_per_lane(const char* name, std::initializer_list<Value*> args) {
  llvm::Type* t = (*args.begin())->getType();
  llvm::Type* s = t->getScalarType();
  std::vector<llvm::Type*> params(args.size(), s);
  llvm::FunctionCallee fn = M.getOrInsertFunction(name, llvm::FunctionType::get(s, params, false));
  Value* r = llvm::PoisonValue::get(t);
  for (int i = 0; i < width(*args.begin()); ++i) {
    std::vector<Value*> lane;
    for (Value* a : args) lane.push_back(B.CreateExtractElement(a, uint64_t(i)));
    r = B.CreateInsertElement(r, B.CreateCall(fn, lane), uint64_t(i));
  }
  return r;
}

// QuantizeLinear's x / scale with a constant scale is read only by round (and is_nan): a divide (vdivps, about
// 16 cycles a vector on these cores; MiniLM's QDQ GELU kernels divide six times per element) can become a
// multiply by the reciprocal and one correction, provided the rounded integer stays the same. The divisor must be
// a normal float whose reciprocal is normal too.
std::vector<bool> Emitter::rounded_quotients(const Kernel& k) {
  std::vector<bool> r(k.exprs.size(), false);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& x = k.exprs[i];
    if (x.op != Op::div || x.type != Scalar::f32 || k.exprs[size_t(x.b)].op != Op::constant) continue;
    float d = float(k.exprs[size_t(x.b)].imm);
    r[i] = std::isnormal(d) && std::isnormal(1.f / d);
  }
  for (const Expr& x : k.exprs)  // any other reader needs the quotient's exact bits
    for (int o : {x.a, x.b, x.c})
      if (o >= 0 && x.op != Op::round && x.op != Op::is_nan) r[size_t(o)] = false;
  for (const Store& s : k.stores) r[size_t(s.expr)] = false;
  return r;
}

// Whether expression e is t clamped between two constants inside i32's range, as QuantizeLinear's saturation
// writes it: select(t < lo, lo, select(t > hi, hi, t)) (or the two tests the other way round). Its value is then
// in [lo, hi], or NaN where t is.
bool Emitter::clamp_bounds(int e, int* t, double* lo, double* hi) const {
  auto constant_in_range = [&](int c, double* v) {
    if (c < 0 || K.exprs[size_t(c)].op != Op::constant) return false;
    *v = K.exprs[size_t(c)].imm;
    double as_f32 = double(float(*v));  // (the bound as the f32 compare sees it; 2^31 - 1 is 2^31 there)
    return as_f32 >= -2147483648.0 && as_f32 < 2147483648.0;
  };
  // select(t OP bound, bound, rest): returns t, the bound and rest.
  auto clamp_step = [&](int sel, Op test, int* t, double* bound, int* rest) {
    if (sel < 0) return false;
    const Expr& s = K.exprs[size_t(sel)];
    if (s.op != Op::select) return false;
    const Expr& c = K.exprs[size_t(s.a)];
    double chosen;
    if (c.op != test || !constant_in_range(c.b, bound) || !constant_in_range(s.b, &chosen) || *bound != chosen)
      return false;
    *t = c.a, *rest = s.c;
    return true;
  };
  for (auto [outer, inner] : {std::pair{Op::lt, Op::gt}, std::pair{Op::gt, Op::lt}}) {
    int t1, rest, t2, rest2;
    double b1, b2;
    if (clamp_step(e, outer, &t1, &b1, &rest) && clamp_step(rest, inner, &t2, &b2, &rest2) && t1 == t2 &&
        rest2 == t1) {
      *t = t1;
      *lo = outer == Op::lt ? b1 : b2;
      *hi = outer == Op::lt ? b2 : b1;
      return true;
    }
  }
  return false;
}

bool Emitter::clamped_to_i32(int e) const {
  int t;
  double lo, hi;
  return clamp_bounds(e, &t, &lo, &hi);
}

// Whether f32 expression e only takes integer values (or infinities or NaN): rounded values, integers converted,
// integer constants, and sums, differences, products and choices of such (a float of magnitude 2^24 or more is an
// integer, so their rounding keeps them integers). Looks a few levels deep.
bool Emitter::integral(int e, int depth) const {
  if (e < 0 || depth > 8) return false;
  const Expr& x = K.exprs[size_t(e)];
  switch (x.op) {
    case Op::constant: return x.imm == std::floor(x.imm);
    case Op::round: case Op::floor: case Op::ceil: return true;
    case Op::cast: return !is_float(K.exprs[size_t(x.a)].type);
    case Op::add: case Op::sub: case Op::mul: return integral(x.a, depth + 1) && integral(x.b, depth + 1);
    case Op::select: return integral(x.b, depth + 1) && integral(x.c, depth + 1);
    default: return false;
  }
}

// Whether f32 expression e is never NaN: finite constants, integers converted, a choice that replaces NaN
// (select(is_nan(q), k, round(q))), rounding of such, and a sum or difference of such with a finite operand (no
// inf - inf). Looks a few levels deep.
bool Emitter::nan_free(int e, int depth) const {
  if (e < 0 || depth > 8) return false;
  const Expr& x = K.exprs[size_t(e)];
  auto finite = [&](int o) {
    const Expr& y = K.exprs[size_t(o)];
    return (y.op == Op::constant && std::isfinite(y.imm)) || (y.op == Op::cast && !is_float(K.exprs[size_t(y.a)].type));
  };
  switch (x.op) {
    case Op::constant: return !std::isnan(x.imm);
    case Op::cast: return !is_float(K.exprs[size_t(x.a)].type);
    case Op::round: case Op::floor: case Op::ceil: return nan_free(x.a, depth + 1);
    case Op::add: case Op::sub:
      return (finite(x.a) && nan_free(x.b, depth + 1)) || (finite(x.b) && nan_free(x.a, depth + 1));
    case Op::select: {
      if (!nan_free(x.b, depth + 1)) return false;
      if (nan_free(x.c, depth + 1)) return true;
      // select(is_nan(q), k, r(q)): NaN only where q is NaN, and that case takes k
      const Expr& test = K.exprs[size_t(x.a)];
      const Expr& other = K.exprs[size_t(x.c)];
      bool rounds_q = x.c == test.a || ((other.op == Op::round || other.op == Op::floor || other.op == Op::ceil) &&
                                        other.a == test.a);
      return test.op == Op::is_nan && rounds_q;
    }
    default: return false;
  }
}

// DequantizeLinear after QuantizeLinear takes the saturated value through i32 and back: cast.f32(sub.i32(
// wrap(cast.i32(c)), zp)). Where c is an integral, NaN-free f32 clamped inside the wrap's range, every integer step
// is exact and the value is c - zp in f32 (both integers under 2^24, so the difference is exact too): one
// subtraction where the round trip takes five instructions (MiniLM's QDQ GELU kernels make six round trips an
// element). A zero point of 0 adds +0.0 instead, so that -0.0 comes out as the integers' +0.
std::vector<Emitter::FloatRoundTrip> Emitter::float_round_trips() const {
  std::vector<FloatRoundTrip> r(K.exprs.size());
  for (size_t i = 0; i < K.exprs.size(); ++i) {
    const Expr& x = K.exprs[i];
    if (x.op != Op::cast || x.type != Scalar::f32 || K.exprs[size_t(x.a)].type != Scalar::i32) continue;
    int e = x.a;
    double zp = 0;
    if (K.exprs[size_t(e)].op == Op::sub) {
      const Expr& z = K.exprs[size_t(K.exprs[size_t(e)].b)];
      if (z.op != Op::constant || std::fabs(z.imm) >= 16777216.0) continue;
      zp = z.imm;
      e = K.exprs[size_t(e)].a;
    }
    double wrap_lo = -2147483648.0, wrap_hi = 2147483647.0;
    if (const Expr& w = K.exprs[size_t(e)]; w.op == Op::wrap_u || w.op == Op::wrap_s) {
      double span = std::ldexp(1.0, int(w.imm));
      wrap_lo = w.op == Op::wrap_u ? 0 : -span / 2;
      wrap_hi = w.op == Op::wrap_u ? span - 1 : span / 2 - 1;
      e = w.a;
    }
    const Expr& to_int = K.exprs[size_t(e)];
    if (to_int.op != Op::cast || to_int.type != Scalar::i32 || K.exprs[size_t(to_int.a)].type != Scalar::f32) continue;
    int clamped = to_int.a, t;
    double lo, hi;
    if (!clamp_bounds(clamped, &t, &lo, &hi) || lo < wrap_lo || hi > wrap_hi || lo != std::floor(lo) ||
        hi != std::floor(hi) || std::fabs(lo) >= 16777216.0 || std::fabs(hi) >= 16777216.0)
      continue;
    if (integral(t) && nan_free(t)) r[i] = {clamped, zp};
  }
  return r;
}

// a / d with d = 1 / r: q0 = a * r, e = a - q0 * d (exact, one FMA), q = q0 + e * r (Markstein's correction:
// the correctly rounded quotient wherever e does not underflow, i.e. |a / d| above about 2^-100; below it the
// quotient rounds to 0 either way). An infinite q0 (a quotient past the float range, or a infinite) is the answer
// itself: the correction would make it NaN. NaN stays NaN. Checked over every f32 a for ten divisors: the rounded
// integer never differs from the divide's.
Value* Emitter::quotient_by_constant(Value* a, float divisor) {
  Value* d = fc(a, double(divisor));
  Value* r = fc(a, double(1.f / divisor));  // the correctly rounded reciprocal, as the theorem assumes
  Value* q0 = B.CreateFMul(a, r);
  Value* e = math->fma(B.CreateFNeg(q0), d, a);
  Value* q = math->fma(e, r, q0);
  Value* overflowed = B.CreateFCmpOEQ(math->fabs(q0), fc(a, std::numeric_limits<double>::infinity()));
  return B.CreateSelect(overflowed, q0, q);
}

Value* Emitter::compute(const Expr& x, Value* a, Value* b, Value* c, int w) {
  bool f = x.a >= 0 && is_float(K.exprs[size_t(x.a)].type);
  bool u = x.a >= 0 && is_unsigned(K.exprs[size_t(x.a)].type);
  // f64 math: the C library function of the op's name (exp, log, ..., pow, expm1, sinh, ...).
  if (x.type == Scalar::f64 && x.op != Op::fmod && is_transcendental(x.op))
    return x.op == Op::pow ? call_per_lane("pow", {a, b}) : call_per_lane(op_name(x.op), {a});
  switch (x.op) {
    case Op::constant:
      if (is_float(x.type)) return llvm::ConstantFP::get(vec(scalar_ty(x.type), w), x.imm);
      // (the lowering writes only integers a double holds exactly; u64 from 2^63 up has no i64 form)
      return llvm::ConstantInt::get(vec(scalar_ty(x.type), w),
                                    x.imm >= 9223372036854775808.0 ? uint64_t(x.imm) : uint64_t(int64_t(x.imm)));
    case Op::neg: return f ? B.CreateFNeg(a) : B.CreateNeg(a);
    case Op::abs: return f ? math->fabs(a) : u ? a : B.CreateSelect(B.CreateICmpSLT(a, llvm::Constant::getNullValue(a->getType())), B.CreateNeg(a), a);
    case Op::exp: return math->exp(a, nonpositive(x.a));
    case Op::log: return math->log(a);
    case Op::sqrt: return B.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
    case Op::tanh: return math->tanh(a);
    case Op::erf: return math->erf(a);
    case Op::sin: case Op::cos: case Op::tan: return math->trig(x.op, a);
    case Op::atan: return math->atan(a);
    case Op::round_bf16: return round_bf16(a);
    case Op::trunc_bf16: return round_bf16(a, true);
    case Op::round_f16: return B.CreateFPExt(B.CreateFPTrunc(a, vec(B.getHalfTy(), w)), a->getType());
    case Op::pow: return math->pow(a, b);
    case Op::fmod: return call_per_lane(x.type == Scalar::f64 ? "fmod" : "fmodf", {a, b});
    case Op::idiv: case Op::irem: {
      if (u) {  // a zero divisor (masked-off lanes) must not reach the divide
        Value* zero = B.CreateICmpEQ(b, llvm::Constant::getNullValue(b->getType()));
        Value* safe = B.CreateSelect(zero, llvm::ConstantInt::get(b->getType(), 1), b);
        return x.op == Op::idiv ? B.CreateUDiv(a, safe) : B.CreateURem(a, safe);
      }
      // Neither a zero divisor (masked-off lanes load 0) nor INT_MIN / -1 may reach the divide, which would
      // trap; a constant divisor folds the selects away.
      llvm::Type* t = a->getType();
      Value* minus_one = B.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(t));
      Value* zero = B.CreateICmpEQ(b, llvm::Constant::getNullValue(t));
      Value* safe = B.CreateSelect(B.CreateOr(minus_one, zero), llvm::ConstantInt::get(t, 1), b);
      Value* q = x.op == Op::idiv ? B.CreateSDiv(a, safe) : B.CreateSRem(a, safe);
      return B.CreateSelect(minus_one, x.op == Op::idiv ? B.CreateNeg(a) : llvm::Constant::getNullValue(t), q);
    }
    case Op::shl: return B.CreateShl(a, b);
    case Op::lshr: return B.CreateLShr(a, b);
    case Op::wrap_s: case Op::wrap_u: {
      Value* low = B.CreateTrunc(a, vec(B.getIntNTy(unsigned(x.imm)), w));
      return x.op == Op::wrap_s ? B.CreateSExt(low, a->getType()) : B.CreateZExt(low, a->getType());
    }
    case Op::floor: return B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a);
    case Op::ceil: return B.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, a);
    case Op::round: return B.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, a);
    case Op::recip: return B.CreateFDiv(fc(a, 1.0), a);
    case Op::logical_not: return B.CreateNot(a);
    case Op::is_nan: return B.CreateFCmpUNO(a, a);
    case Op::is_inf: return B.CreateFCmpOEQ(math->fabs(a), fc(a, std::numeric_limits<double>::infinity()));
    case Op::add: return f ? B.CreateFAdd(a, b) : B.CreateAdd(a, b);
    case Op::sub: return f ? B.CreateFSub(a, b) : B.CreateSub(a, b);
    case Op::mul: return f ? B.CreateFMul(a, b) : B.CreateMul(a, b);
    case Op::div:
      if (rounded_quotient[size_t(&x - K.exprs.data())])
        return quotient_by_constant(a, float(K.exprs[size_t(x.b)].imm));
      return B.CreateFDiv(a, b);
    case Op::max: return minmax(true, a, b, u);
    case Op::min: return minmax(false, a, b, u);
    case Op::lt: return f ? B.CreateFCmpOLT(a, b) : u ? B.CreateICmpULT(a, b) : B.CreateICmpSLT(a, b);
    case Op::le: return f ? B.CreateFCmpOLE(a, b) : u ? B.CreateICmpULE(a, b) : B.CreateICmpSLE(a, b);
    case Op::gt: return f ? B.CreateFCmpOGT(a, b) : u ? B.CreateICmpUGT(a, b) : B.CreateICmpSGT(a, b);
    case Op::ge: return f ? B.CreateFCmpOGE(a, b) : u ? B.CreateICmpUGE(a, b) : B.CreateICmpSGE(a, b);
    case Op::eq: return f ? B.CreateFCmpOEQ(a, b) : B.CreateICmpEQ(a, b);
    case Op::logical_and: return B.CreateAnd(a, b);
    case Op::logical_or: return B.CreateOr(a, b);
    case Op::logical_xor: return B.CreateXor(a, b);
    case Op::select: return B.CreateSelect(a, b, c);
    case Op::cast:
      if (x.type == Scalar::i32 && K.exprs[size_t(x.a)].type == Scalar::f32 && clamped_to_i32(x.a)) {
        // In i32's range (or NaN): one vcvttps2dq, NaN to 0, where the general conversion goes through i64.
        Value* i = B.CreateFPToSI(a, vec(B.getInt32Ty(), w));
        return B.CreateSelect(B.CreateFCmpUNO(a, a), llvm::Constant::getNullValue(i->getType()), i);
      }
      return cast(a, K.exprs[size_t(x.a)].type, x.type, w);
    default: fail_internal("kernel IR op ", op_name(x.op), " reached element-wise emission");
  }
}

}  // namespace cuvil::codegen
