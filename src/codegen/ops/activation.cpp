// Lowering records: activation functions (Relu, Sigmoid, Softplus, Gelu, the Elu family, Clip, ...), each its
// reference kernel's formula in f32 (f64 tensors: in f64).
#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

CUVIL_LOWERING(lower_relu) {
  int x = in[0];
  auto zero = [&]() { return L.cst(0, L.type(x)); };
  out[0] = L.sel(L.cmp(Op::lt, x, zero()), zero(), x);
  return true;
}

CUVIL_LOWERING(lower_sigmoid) {
  int x = in[0];
  int e = L.un(Op::exp, L.un(Op::neg, L.un(Op::abs, x)));
  int s = L.bin(Op::div, L.cst(1), L.bin(Op::add, L.cst(1), e));
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, e, s), s);
  return true;
}

CUVIL_LOWERING(lower_softplus) {  // max(x, 0) + log1p(e^-|x|)
  int x = in[0];
  int l = L.log1p(L.un(Op::exp, L.un(Op::neg, L.un(Op::abs, x))));
  out[0] = L.sel(L.cmp(Op::gt, x, L.cst(0)), L.bin(Op::add, x, l), l);
  return true;
}

CUVIL_LOWERING(lower_mish) {  // x * tanh(softplus(x)), softplus as above
  int x = in[0];
  int l = L.log1p(L.un(Op::exp, L.un(Op::neg, L.un(Op::abs, x))));
  int sp = L.sel(L.cmp(Op::gt, x, L.cst(0)), L.bin(Op::add, x, l), l);
  out[0] = L.bin(Op::mul, x, L.un(Op::tanh, sp));
  return true;
}

CUVIL_LOWERING(lower_softsign) {
  int x = in[0];
  out[0] = L.bin(Op::div, x, L.bin(Op::add, L.cst(1), L.un(Op::abs, x)));
  return true;
}

CUVIL_LOWERING(lower_hard_sigmoid) {
  AttrReader at(n);
  int x = in[0];
  out[0] = L.clamp01(L.bin(Op::add, L.bin(Op::mul, L.cst(at.f("alpha")), x), L.cst(at.f("beta"))));
  return true;
}

CUVIL_LOWERING(lower_hard_swish) {
  int x = in[0];
  out[0] = L.bin(Op::mul, x, L.clamp01(L.bin(Op::add, L.bin(Op::div, x, L.cst(6)), L.cst(0.5))));
  return true;
}

CUVIL_LOWERING(lower_gelu) {
  AttrReader at(n);
  int x = in[0];
  int half_x = L.bin(Op::mul, L.cst(0.5), x);
  if (at.s("approximate") == "tanh") {
    int x3 = L.bin(Op::mul, L.bin(Op::mul, x, x), x);
    int inner = L.bin(Op::mul, L.cst(0.7978845608028654), L.bin(Op::add, x, L.bin(Op::mul, L.cst(0.044715), x3)));
    out[0] = L.bin(Op::mul, half_x, L.bin(Op::add, L.cst(1), L.un(Op::tanh, inner)));
  } else {
    int e = L.un(Op::erf, L.bin(Op::mul, x, L.cst(0.7071067811865476)));
    out[0] = L.bin(Op::mul, half_x, L.bin(Op::add, L.cst(1), e));
  }
  return true;
}

CUVIL_LOWERING(lower_leaky_relu) {
  AttrReader at(n);
  int x = in[0];
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, L.cst(at.f("alpha")), x), x);
  return true;
}

CUVIL_LOWERING(lower_prelu) {
  int x = in[0];
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, in[1], x), x);
  return true;
}

CUVIL_LOWERING(lower_thresholded_relu) {
  AttrReader at(n);
  int x = in[0];
  out[0] = L.sel(L.cmp(Op::gt, x, L.cst(at.f("alpha"))), x, L.cst(0));
  return true;
}

CUVIL_LOWERING(lower_shrink) {
  AttrReader at(n);
  int x = in[0];
  double lambd = at.f("lambd"), bias = at.f("bias");
  int lo = L.bin(Op::add, x, L.cst(bias)), hi = L.bin(Op::sub, x, L.cst(bias));
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(-lambd)), lo, L.sel(L.cmp(Op::gt, x, L.cst(lambd)), hi, L.cst(0)));
  return true;
}

CUVIL_LOWERING(lower_elu) {
  AttrReader at(n);
  int x = in[0];
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, L.cst(at.f("alpha")), L.expm1(x)), x);
  return true;
}

CUVIL_LOWERING(lower_celu) {
  AttrReader at(n);
  int x = in[0];
  double alpha = at.f("alpha");
  if (alpha == 0) return refuse(why, "Celu alpha 0");
  int neg = L.bin(Op::mul, L.cst(alpha), L.expm1(L.bin(Op::div, x, L.cst(alpha))));
  out[0] = L.sel(L.cmp(Op::gt, x, L.cst(0)), x, neg);
  return true;
}

CUVIL_LOWERING(lower_selu) {
  AttrReader at(n);
  int x = in[0];
  double alpha = at.f("alpha"), gamma = at.f("gamma");
  int neg = L.bin(Op::mul, L.cst(gamma), L.bin(Op::sub, L.bin(Op::mul, L.cst(alpha), L.un(Op::exp, x)), L.cst(alpha)));
  out[0] = L.sel(L.cmp(Op::le, x, L.cst(0)), neg, L.bin(Op::mul, L.cst(gamma), x));
  return true;
}

CUVIL_LOWERING(lower_clip) {  // bounds absent (null inputs) clip nothing
  int v = in[0];
  if (n.input(1)) v = L.sel(L.cmp(Op::lt, v, in[1]), in[1], v);
  if (n.input(2)) v = L.sel(L.cmp(Op::gt, v, in[2]), in[2], v);
  out[0] = v;
  return true;
}

}  // namespace

void add_activation_lowerings(LoweringTable& t) {
  t.add(OpKind::Relu, {.supports = numbers_only, .f64 = true, .stores = Stores::picked, .lower = lower_relu});
  t.add(OpKind::Clip, {.supports = numbers_only, .f64 = true, .stores = Stores::picked, .lower = lower_clip});
  t.add(OpKind::LeakyRelu, {.supports = floats_only, .f64 = true, .lower = lower_leaky_relu});
  t.add(OpKind::PRelu, {.supports = floats_only, .f64 = true, .lower = lower_prelu});
  t.add(OpKind::ThresholdedRelu, {.supports = floats_only, .f64 = true, .lower = lower_thresholded_relu});
  t.add(OpKind::Shrink, {.supports = floats_only, .f64 = true, .lower = lower_shrink});
  t.add(OpKind::HardSigmoid, {.supports = floats_only, .f64 = true, .lower = lower_hard_sigmoid});
  t.add(OpKind::HardSwish, {.supports = floats_only, .f64 = true, .lower = lower_hard_swish});
  t.add(OpKind::Softsign, {.supports = floats_only, .f64 = true, .lower = lower_softsign});
  // Through exp, erf or tanh: polynomial code (weight 8).
  t.add(OpKind::Sigmoid, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_sigmoid});
  t.add(OpKind::Softplus, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_softplus});
  t.add(OpKind::Mish, {.supports = floats_only, .f64 = true, .compile_weight = 16, .lower = lower_mish});
  t.add(OpKind::Gelu, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_gelu});
  t.add(OpKind::Elu, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_elu});
  t.add(OpKind::Celu, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_celu});
  t.add(OpKind::Selu, {.supports = floats_only, .f64 = true, .compile_weight = 8, .lower = lower_selu});
}

}  // namespace cuvil::codegen
