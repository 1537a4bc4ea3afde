// Lowering record: Pow. Float bases take any exponent: small constant powers as products (within 1.5 ulp), a float
// exponent or a constant f32 holds through the emitter's pow, the rest through C's pow in f64. Integer bases (i32,
// i64): a float exponent through C's pow, truncated and saturated back as the reference; a constant one of at
// least 0 by squaring (wrapping); an integer exponent tensor by squaring over every bit its type holds. 0 to a
// negative power is an error the reference reports: a signed exponent tensor is checked for negative values
// before the kernel runs (InputRole::exponent), and the base of a negative constant exponent for zeros
// (InputRole::divisor: x^-k = 1 / x^k).
#include <cmath>

#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

bool pow_supports(const Node& n, std::string* why) {
  DType t0 = n.input(0) ? n.input(0)->dtype() : DType::f32;
  if (floating(t0)) return true;
  if (t0 != DType::i32 && t0 != DType::i64) return refuse(why, "base dtype ", dtype_name(t0), " is not generated");
  auto e = scalar_input(n, 1);
  if (e && !floating(n.input(1)->dtype()) && *e < 0 && scalar_input(n, 0) && *scalar_input(n, 0) == 0)
    return refuse(why, "0 to a negative power");  // (the reference reports it)
  return true;
}

InputUse pow_inputs(const Node& n, size_t i) {
  if (!n.input(0) || !is_integer(n.input(0)->dtype())) return {};
  if (i == 0 && !scalar_input(n, 0) && !floating(n.input(1)->dtype())) {
    auto e = scalar_input(n, 1);  // x^-k = 1 / x^k
    if (e && *e < 0) return {InputRole::divisor};
  }
  if (i == 1 && !scalar_input(n, 1)) {
    DType e = n.input(1)->dtype();
    if (is_integer(e) && is_signed(e)) return {InputRole::exponent};
  }
  return {};
}

// An integer base: a float exponent through C's pow truncated back, 1 / x^k for a negative constant k, x^k by
// squaring for a constant k >= 0, or by squaring over the bits of an exponent tensor.
bool integer_pow(ExprBuilder& L, const Node& n, const std::vector<int>& in, std::vector<int>& out) {
  int x = in[0];
  Scalar tx = L.type(x);
  auto e = scalar_input(n, 1);
  auto c_pow = [&] {  // C's pow on the f64 values, as the reference
    return L.bin(Op::pow, L.cast(x, Scalar::f64), L.cast(in[1], Scalar::f64));
  };
  if (is_float(L.type(in[1]))) {
    out[0] = L.cast(c_pow(), tx);
    return true;
  }
  if (e && *e < 0) {  // 1 / x^k, truncated: 1 for 1, +-1 for -1, 0 otherwise (x is checked for zeros)
    int one = L.cst(1, tx), minus_one = L.cst(-1, tx);
    bool odd = std::fmod(-*e, 2) == 1;
    out[0] = L.sel(L.cmp(Op::eq, x, one), one, L.sel(L.cmp(Op::eq, x, minus_one), odd ? minus_one : one, L.cst(0, tx)));
    return true;
  }
  if (e) {  // a constant exponent of at least 0: by squaring, wrapping as the reference's
    int r = -1, b = x;  // r: the product so far (-1: none yet, 1)
    for (auto k = uint64_t(*e); k; k >>= 1) {
      if (k & 1) r = r < 0 ? b : L.bin(Op::mul, r, b);
      if (k > 1) b = L.bin(Op::mul, b, b);
    }
    out[0] = r < 0 ? L.cst(1, tx) : r;
    return true;
  }
  // An integer exponent tensor, at least 0 (a signed one is checked before the kernel runs): by squaring over
  // every bit the exponent's type holds, the product taking the base's power where the bit is set.
  int p = in[1];
  Scalar te = L.type(p);
  int bits = te == Scalar::i32 ? 31 : te == Scalar::i64 ? 63 : 64;
  int r = L.cst(1, tx), b = x;
  for (int k = 0; k < bits; ++k) {
    int bit = L.bin(Op::irem, L.bin(Op::lshr, p, L.cst(k, te)), L.cst(2, te));
    r = L.sel(L.cmp(Op::eq, bit, L.cst(0, te)), r, L.bin(Op::mul, r, b));
    if (k + 1 < bits) b = L.bin(Op::mul, b, b);
  }
  out[0] = r;
  return true;
}

CUVIL_LOWERING(lower_pow) {
  int x = in[0];
  Scalar tx = L.type(x);
  if (!is_float(tx)) return integer_pow(L, n, in, out);
  auto e = scalar_input(n, 1);
  auto c_pow = [&] { return L.bin(Op::pow, L.cast(x, Scalar::f64), L.cast(in[1], Scalar::f64)); };
  // A float exponent, or a constant one f32 holds exactly, meets an f32 base in the emitter's pow; anything else
  // (an f64 value, an integer tensor, a constant f32 would round) through C's.
  bool f32_exponent = e ? double(float(*e)) == *e : L.type(in[1]) == Scalar::f32;
  if (e && *e == 1) out[0] = x;
  else if (e && *e == 2) out[0] = L.bin(Op::mul, x, x);
  else if (e && *e == 3 && tx != Scalar::f64) out[0] = L.bin(Op::mul, L.bin(Op::mul, x, x), x);
  else if (tx == Scalar::f64 || !f32_exponent) out[0] = L.cast(c_pow(), tx);
  else out[0] = L.bin(Op::pow, x, L.cast(in[1], Scalar::f32));
  return true;
}

}  // namespace

void add_power_lowerings(LoweringTable& t) {
  t.add(OpKind::Pow, {.supports = pow_supports, .f64 = true, .input = pow_inputs, .compile_weight = 8,
                      .lower = lower_pow});
}

}  // namespace cuvil::codegen
