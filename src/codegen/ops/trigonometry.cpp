// Lowering records: trigonometric, hyperbolic and inverse functions. Sin, Cos, Tan and Atan are kernel IR ops (f64
// arithmetic on the f32 argument, rounded once). The rest compose them in f32 (within 4 ulp over their domains,
// tests CompositeMathErrorBounds): asin = atan(x / sqrt((1-x)(1+x))), acos = 2 atan(sqrt((1-x)/(1+x))), sinh and
// cosh from exp with a Taylor series near 0 and e^(|x|/2)^2 / 2 past 20, asinh, acosh and atanh through a
// cancellation-free log1p. f64 tensors call the C library's function per lane (the reference's bits).
#include <limits>

#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

// The C library's f64 function (`libm`) for f64 inputs, else the f32 composition `f32`.
template <Op libm, bool (*f32)(ExprBuilder&, int, std::vector<int>&)>
CUVIL_LOWERING(lower_composite) {
  if (L.type(in[0]) == Scalar::f64) {
    out[0] = L.un(libm, in[0]);
    return true;
  }
  return f32(L, in[0], out);
}

bool asin_f32(ExprBuilder& L, int x, std::vector<int>& out) {  // NaN beyond [-1, 1], +-pi/2 at +-1
  int d = L.un(Op::sqrt, L.bin(Op::mul, L.bin(Op::sub, L.cst(1), x), L.bin(Op::add, L.cst(1), x)));
  out[0] = L.un(Op::atan, L.bin(Op::div, x, d));
  return true;
}

bool acos_f32(ExprBuilder& L, int x, std::vector<int>& out) {  // exact 1 - x near 1 and 1 + x near -1 (pi at -1)
  int ratio = L.bin(Op::div, L.bin(Op::sub, L.cst(1), x), L.bin(Op::add, L.cst(1), x));
  out[0] = L.bin(Op::mul, L.cst(2), L.un(Op::atan, L.un(Op::sqrt, ratio)));
  return true;
}

// The odd Taylor series below |x| = 0.5 (to x^11: below 1e-10 relative), else (e - 1/e) / 2.
bool sinh_f32(ExprBuilder& L, int x, std::vector<int>& out) {
  int a = L.un(Op::abs, x);
  int z = L.bin(Op::mul, a, a);
  int p = L.cst(1.0 / 39916800);
  for (double c : {1.0 / 362880, 1.0 / 5040, 1.0 / 120, 1.0 / 6}) p = L.bin(Op::add, L.bin(Op::mul, p, z), L.cst(c));
  int small = L.bin(Op::add, a, L.bin(Op::mul, L.bin(Op::mul, a, z), p));
  int e = L.un(Op::exp, a);
  int mid = L.bin(Op::mul, L.bin(Op::sub, e, L.bin(Op::div, L.cst(1), e)), L.cst(0.5));
  int r = L.sel(L.cmp(Op::lt, a, L.cst(0.5)), small, L.sel(L.cmp(Op::lt, a, L.cst(20)), mid, L.half_exp_large(a)));
  out[0] = L.odd(x, r);
  return true;
}

bool cosh_f32(ExprBuilder& L, int x, std::vector<int>& out) {  // (e + 1/e) / 2 up to |x| = 20, then e^|x| / 2
  int a = L.un(Op::abs, x);
  int e = L.un(Op::exp, a);
  int mid = L.bin(Op::mul, L.bin(Op::add, e, L.bin(Op::div, L.cst(1), e)), L.cst(0.5));
  out[0] = L.sel(L.cmp(Op::lt, a, L.cst(20)), mid, L.half_exp_large(a));
  return true;
}

// log1p(a + a^2 / (1 + sqrt(1 + a^2))), log(a) + ln 2 once a^2 swamps 1.
bool asinh_f32(ExprBuilder& L, int x, std::vector<int>& out) {
  int a = L.un(Op::abs, x);
  int z = L.bin(Op::mul, a, a);
  int t = L.bin(Op::add, a, L.bin(Op::div, z, L.bin(Op::add, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, L.cst(1), z)))));
  int large = L.bin(Op::add, L.un(Op::log, a), L.cst(0.69314718055994531));
  out[0] = L.odd(x, L.sel(L.cmp(Op::lt, a, L.cst(4096)), L.log1p(t), large));
  return true;
}

// log1p((x - 1) + sqrt((x - 1)(x + 1))), log(x) + ln 2 for large x; NaN below 1.
bool acosh_f32(ExprBuilder& L, int x, std::vector<int>& out) {
  int xm1 = L.bin(Op::sub, x, L.cst(1));
  int t = L.bin(Op::add, xm1, L.un(Op::sqrt, L.bin(Op::mul, xm1, L.bin(Op::add, x, L.cst(1)))));
  int large = L.bin(Op::add, L.un(Op::log, x), L.cst(0.69314718055994531));
  int r = L.sel(L.cmp(Op::lt, x, L.cst(4096)), L.log1p(t), large);
  out[0] = L.sel(L.cmp(Op::lt, x, L.cst(1)), L.cst(std::numeric_limits<double>::quiet_NaN()), r);
  return true;
}

bool atanh_f32(ExprBuilder& L, int x, std::vector<int>& out) {  // log1p(2a / (1 - a)) / 2: +-inf at +-1, NaN beyond
  int a = L.un(Op::abs, x);
  int t = L.bin(Op::div, L.bin(Op::add, a, a), L.bin(Op::sub, L.cst(1), a));
  int r = L.bin(Op::mul, L.cst(0.5), L.log1p(t));
  r = L.sel(L.cmp(Op::eq, a, L.cst(1)), L.cst(std::numeric_limits<double>::infinity()), r);
  out[0] = L.odd(x, r);
  return true;
}

}  // namespace

void add_trigonometry_lowerings(LoweringTable& t) {
  OpLowering math{.supports = floats_only, .f64 = true, .compile_weight = 8};
  auto with = [&](auto lower) {
    OpLowering r = math;
    r.lower = lower;
    return r;
  };
  t.add(OpKind::Sin, with(lower_unary<Op::sin>));
  t.add(OpKind::Cos, with(lower_unary<Op::cos>));
  t.add(OpKind::Tan, with(lower_unary<Op::tan>));
  t.add(OpKind::Atan, with(lower_unary<Op::atan>));
  t.add(OpKind::Asin, with(lower_composite<Op::asin, asin_f32>));
  t.add(OpKind::Acos, with(lower_composite<Op::acos, acos_f32>));
  t.add(OpKind::Sinh, with(lower_composite<Op::sinh, sinh_f32>));
  t.add(OpKind::Cosh, with(lower_composite<Op::cosh, cosh_f32>));
  t.add(OpKind::Asinh, with(lower_composite<Op::asinh, asinh_f32>));
  t.add(OpKind::Acosh, with(lower_composite<Op::acosh, acosh_f32>));
  t.add(OpKind::Atanh, with(lower_composite<Op::atanh, atanh_f32>));
}

}  // namespace cuvil::codegen
