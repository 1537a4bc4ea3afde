// Lowering records: math functions, logic and tests on one value (Exp, Log, Sqrt, Abs, Sign, IsInf, ...).
#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

CUVIL_LOWERING(lower_is_nan) {
  out[0] = L.add(Op::is_nan, Scalar::i1, in[0]);
  return true;
}

CUVIL_LOWERING(lower_is_inf) {
  AttrReader at(n);
  int x = in[0];
  bool neg = at.i("detect_negative") != 0, pos = at.i("detect_positive") != 0;
  int inf = L.add(Op::is_inf, Scalar::i1, x);
  if (pos && neg) out[0] = inf;
  else if (pos) out[0] = L.bin(Op::logical_and, inf, L.cmp(Op::gt, x, L.cst(0)));
  else if (neg) out[0] = L.bin(Op::logical_and, inf, L.cmp(Op::lt, x, L.cst(0)));
  else out[0] = L.cst(0, Scalar::i1);
  return true;
}

CUVIL_LOWERING(lower_sign) {
  int x = in[0];
  Scalar tx = L.type(x);
  auto zero = [&]() { return L.cst(0, tx); };
  int one = L.cst(1, tx), m1 = L.cst(-1, tx);
  int rest = is_float(tx) ? L.sel(L.cmp(Op::eq, x, zero()), zero(), x) : zero();  // NaN stays NaN
  out[0] = L.sel(L.cmp(Op::gt, x, zero()), one, L.sel(L.cmp(Op::lt, x, zero()), m1, rest));
  return true;
}

}  // namespace

void add_unary_lowerings(LoweringTable& t) {
  // Float math: one kernel IR op each; exp, log, tanh and erf are polynomials (weight 8).
  t.add(OpKind::Exp, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_unary<Op::exp>});
  t.add(OpKind::Log, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_unary<Op::log>});
  t.add(OpKind::Tanh, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_unary<Op::tanh>});
  t.add(OpKind::Erf, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_unary<Op::erf>});
  t.add(OpKind::Sqrt, {.supports = floats_only, .f64 = true, .lower = lower_unary<Op::sqrt>});
  t.add(OpKind::Floor, {.supports = floats_only, .f64 = true, .lower = lower_unary<Op::floor>});
  t.add(OpKind::Ceil, {.supports = floats_only, .f64 = true, .lower = lower_unary<Op::ceil>});
  t.add(OpKind::Round, {.supports = floats_only, .f64 = true, .lower = lower_unary<Op::round>});
  t.add(OpKind::Reciprocal, {.supports = floats_only, .f64 = true, .lower = lower_unary<Op::recip>});
  t.add(OpKind::IsNaN, {.supports = floats_only, .f64 = true, .lower = lower_is_nan});
  t.add(OpKind::IsInf, {.supports = floats_only, .f64 = true, .lower = lower_is_inf});
  // Numbers of every type.
  t.add(OpKind::Abs, {.supports = numbers_only, .f64 = true, .lower = lower_unary<Op::abs>});
  t.add(OpKind::Neg, {.supports = numbers_only, .f64 = true, .lower = lower_unary<Op::neg>});
  t.add(OpKind::Sign, {.supports = numbers_only, .f64 = true, .lower = lower_sign});
  t.add(OpKind::Not, {.lower = lower_unary<Op::logical_not>});  // (bool by the schema)
}

}  // namespace cuvil::codegen
