// Lowering records: arithmetic on two or more values, comparisons, logic, Where, BitShift. Integer Div and Mod
// generate by a constant nonzero scalar or by a divisor the kernel reads as an input and the prepared kernel
// checks for zeros before running (the reference reports a zero divisor, which a kernel cannot).
#include "codegen/op_lowering.h"

namespace cuvil::codegen {

namespace {

template <Op op>
CUVIL_LOWERING(lower_binary) {
  out[0] = L.bin(op, in[0], in[1]);
  return true;
}

template <Op op>
CUVIL_LOWERING(lower_compare) {
  out[0] = L.cmp(op, in[0], in[1]);
  return true;
}

// Every input folded in order: Max, Min, Sum (and Mean's sum).
int fold(ExprBuilder& L, Op op, const std::vector<int>& in) {
  int acc = in[0];
  for (size_t i = 1; i < in.size(); ++i) acc = L.bin(op, acc, in[i]);
  return acc;
}
template <Op op>
CUVIL_LOWERING(lower_fold) {
  out[0] = fold(L, op, in);
  return true;
}
CUVIL_LOWERING(lower_mean) {
  out[0] = L.bin(Op::div, fold(L, Op::add, in), L.cst(double(in.size())));
  return true;
}

CUVIL_LOWERING(lower_where) {
  out[0] = L.sel(in[0], in[1], in[2]);
  return true;
}

// Float Mod is C's fmod, which ONNX allows only with fmod=1 (the reference reports the rest). Integers by a
// constant nonzero scalar, or by a tensor the kernel reads as an input (InputRole::divisor).
template <bool mod>
bool divides(const Node& n, std::string* why) {
  if (all_inputs(n, floating))  // float Mod with fmod=0 (numpy's mod) runs on the reference kernel
    return !mod || AttrReader(n).i("fmod") != 0 || refuse(why, "floating-point Mod with fmod=0");
  if (!all_inputs(n, cuvil::is_integer)) return refuse(why, "generated for floats and integers");
  auto d = scalar_input(n, 1);
  return !(d && *d == 0) || refuse(why, "division by the constant 0");
}

InputUse divisor_role(const Node& n, size_t i) {
  bool integers = n.input(0) && is_integer(n.input(0)->dtype());
  return {integers && i == 1 && !scalar_input(n, 1) ? InputRole::divisor : InputRole::element};
}

template <bool mod>
CUVIL_LOWERING(lower_div_mod) {
  AttrReader at(n);
  int x = in[0];
  Scalar tx = L.type(x);
  if (is_float(tx)) {
    out[0] = L.bin(!mod ? Op::div : Op::fmod, in[0], in[1]);  // Mod with fmod=1 (divides)
    return true;
  }
  // x / -1 wraps at the type's minimum and x % -1 is 0 (idiv and irem do both).
  if (!mod) {
    out[0] = L.bin(Op::idiv, in[0], in[1]);
    return true;
  }
  int r = L.bin(Op::irem, x, in[1]);
  if (at.i("fmod") == 0) {  // Python's %: a nonzero remainder takes the divisor's sign
    int zero = L.cst(0, tx);
    int differ = L.bin(Op::logical_xor, L.cmp(Op::lt, r, zero), L.cmp(Op::lt, in[1], zero));
    int wrong = L.bin(Op::logical_and, L.un(Op::logical_not, L.cmp(Op::eq, r, zero)), differ);
    r = L.sel(wrong, L.bin(Op::add, r, in[1]), r);
  }
  out[0] = r;
  return true;
}

bool shift_direction(const Node& n, std::string* why) {
  if (!all_inputs(n, [](DType t) { return cuvil::is_integer(t) && !is_signed(t); }))  // signed: the reference's
    return refuse(why, "signed shifts");
  AttrReader at(n);
  bool dir = at.has("direction") && (at.s("direction") == "LEFT" || at.s("direction") == "RIGHT");
  return dir || refuse(why, "the direction is not LEFT or RIGHT");  // the reference reports it
}

CUVIL_LOWERING(lower_bit_shift) {  // shifts of the type's width or more give 0; the result wraps at the output
  AttrReader at(n);
  int x = in[0];
  Scalar tx = L.type(x);
  auto zero = [&]() { return L.cst(0, tx); };
  int bits = int(dtype_size(n.output(0)->dtype()) * 8);
  int shifted = L.bin(at.s("direction") == "LEFT" ? Op::shl : Op::lshr, x, in[1]);
  out[0] = L.sel(L.cmp(Op::ge, in[1], L.cst(bits, tx)), zero(), shifted);
  return true;
}

}  // namespace

void add_binary_lowerings(LoweringTable& t) {
  OpLowering numbers{.supports = numbers_only, .f64 = true};
  auto on_numbers = [&](auto lower, Stores stores = Stores::computed) {
    OpLowering r = numbers;
    r.stores = stores;
    r.lower = lower;
    return r;
  };
  t.add(OpKind::Add, on_numbers(lower_binary<Op::add>));
  t.add(OpKind::Sub, on_numbers(lower_binary<Op::sub>));
  t.add(OpKind::Mul, on_numbers(lower_binary<Op::mul>));
  t.add(OpKind::Max, on_numbers(lower_fold<Op::max>, Stores::picked));
  t.add(OpKind::Min, on_numbers(lower_fold<Op::min>, Stores::picked));
  t.add(OpKind::Less, on_numbers(lower_compare<Op::lt>));
  t.add(OpKind::LessOrEqual, on_numbers(lower_compare<Op::le>));
  t.add(OpKind::Greater, on_numbers(lower_compare<Op::gt>));
  t.add(OpKind::GreaterOrEqual, on_numbers(lower_compare<Op::ge>));
  t.add(OpKind::Equal, {.f64 = true, .lower = lower_compare<Op::eq>});
  t.add(OpKind::Sum, {.supports = floats_only, .f64 = true, .lower = lower_fold<Op::add>});
  t.add(OpKind::Mean, {.supports = floats_only, .f64 = true, .lower = lower_mean});
  t.add(OpKind::Div,
        {.supports = divides<false>, .f64 = true, .input = divisor_role, .lower = lower_div_mod<false>});
  t.add(OpKind::Mod, {.supports = divides<true>, .f64 = true, .input = divisor_role, .compile_weight = 8,
                      .lower = lower_div_mod<true>});
  // Logic on bool (by the schema) and selects.
  t.add(OpKind::And, {.lower = lower_binary<Op::logical_and>});
  t.add(OpKind::Or, {.lower = lower_binary<Op::logical_or>});
  t.add(OpKind::Xor, {.lower = lower_binary<Op::logical_xor>});
  t.add(OpKind::Where, {.f64 = true, .stores = Stores::picked, .lower = lower_where});
  t.add(OpKind::BitShift, {.supports = shift_direction, .lower = lower_bit_shift});
}

}  // namespace cuvil::codegen
