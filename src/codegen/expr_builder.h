// Builds a kernel's expression DAG (kernel_ir.h) while the op lowerings (codegen/ops/*.cpp) write their formulas:
// appends expressions in SSA order, widens the f32 constants and row sizes a lowering writes where they meet f64
// values, and holds the small formulas several ops share (expm1, log1p, the normalizations' moments, ...).
#pragma once

#include "codegen/kernel_ir.h"

namespace cuvil::codegen {

class ExprBuilder {
 public:
  Kernel k;  // the kernel being built: its operands are set before any expression is added

  int add(Op op, Scalar t, int a = -1, int b = -1, int c = -1, double imm = 0) {
    Expr e;
    e.op = op;
    e.type = t;
    e.a = a, e.b = b, e.c = c, e.imm = imm;
    k.exprs.push_back(e);
    return int(k.exprs.size()) - 1;
  }
  // A load of operand `operand` (shifted `shift` positions along the row: a window's neighbour).
  int load(int operand, Scalar t, int64_t shift = 0) {
    int e = add(Op::load, t, -1, -1, -1, double(shift));
    k.exprs[size_t(e)].operand = operand;
    return e;
  }
  Scalar type(int e) const { return k.exprs[size_t(e)].type; }
  int cst(double v, Scalar t = Scalar::f32) { return add(Op::constant, t, -1, -1, -1, v); }
  // An f64 value meets the f32 constants and row sizes the op lowerings write: those become f64 (a constant
  // keeps its exact value). Anything else of another type is the caller's to cast.
  int widen(int e, Scalar t) {
    if (t != Scalar::f64 || type(e) != Scalar::f32) return e;
    const Expr x = k.exprs[size_t(e)];
    if (x.op == Op::constant) return cst(x.imm, t);
    if (x.op == Op::row_size) return add(Op::row_size, t);
    return e;
  }
  Scalar common(int a, int b) const {
    return type(a) == Scalar::f64 || type(b) == Scalar::f64 ? Scalar::f64 : type(a);
  }
  int bin(Op op, int a, int b) {
    Scalar t = common(a, b);
    return add(op, t, widen(a, t), widen(b, t));
  }
  int cmp(Op op, int a, int b) {
    Scalar t = common(a, b);
    return add(op, Scalar::i1, widen(a, t), widen(b, t));
  }
  int un(Op op, int a) { return add(op, type(a), a); }
  int sel(int c, int a, int b) {
    Scalar t = common(a, b);
    return add(Op::select, t, c, widen(a, t), widen(b, t));
  }
  int cast(int a, Scalar t) { return type(a) == t ? a : add(Op::cast, t, a); }

  // clamp to [0, 1] keeping NaN (the reference's clamp01)
  int clamp01(int v) {
    v = sel(cmp(Op::lt, v, cst(0)), cst(0), v);
    return sel(cmp(Op::gt, v, cst(1)), cst(1), v);
  }
  // e^x - 1 without cancellation near 0: the Taylor series to x^9/9! for |x| < 0.5 (truncation < 3e-10
  // relative), else exp(x) - 1. f64: the C library's expm1.
  int expm1(int x) {
    if (type(x) == Scalar::f64) return un(Op::expm1, x);
    int p = cst(1.0 / 362880);
    for (double c : {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0})
      p = bin(Op::add, bin(Op::mul, p, x), cst(c));
    int small = bin(Op::mul, p, x);
    int large = bin(Op::sub, un(Op::exp, x), cst(1));
    return sel(cmp(Op::lt, un(Op::abs, x), cst(0.5)), small, large);
  }
  // log(1 + t) for t >= 0 without losing small t: log(u) * t / (u - 1) with u = 1 + t (exact where u == 1).
  int log1p(int t) {
    int u = bin(Op::add, cst(1), t);
    int general = bin(Op::div, bin(Op::mul, un(Op::log, u), t), bin(Op::sub, u, cst(1)));
    return sel(cmp(Op::eq, u, cst(1)), t, general);
  }
  // Odd functions built on |x|: sign(x) * f(|x|), keeping -0 and NaN (f(NaN) is NaN).
  int odd(int x, int f_of_abs) {
    return sel(cmp(Op::lt, x, cst(0)), un(Op::neg, f_of_abs), sel(cmp(Op::eq, x, cst(0)), x, f_of_abs));
  }
  // The mean over the row, x - mean and the variance (the mean of the squares of that): the normalizations'
  // statistics.
  struct Moments {
    int mean, centred, variance;
  };
  Moments moments(int x) {
    int count = add(Op::row_size, type(x));
    int mean = bin(Op::div, add(Op::row_sum, type(x), x), count);
    int d = bin(Op::sub, x, mean);
    return {mean, d, bin(Op::div, add(Op::row_sum, type(x), bin(Op::mul, d, d)), count)};
  }
  // e^|x| / 2 for |x| > 20 without overflowing before the result does: (e^(|x|/2))^2 / 2.
  int half_exp_large(int a) {
    int t = un(Op::exp, bin(Op::mul, a, cst(0.5)));
    return bin(Op::mul, t, bin(Op::mul, t, cst(0.5)));
  }
};

}  // namespace cuvil::codegen
