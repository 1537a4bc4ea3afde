// Lowering records: ops that convert or move values without arithmetic of their own: Cast, Identity, inference
// Dropout, Expand (the iteration space's broadcast), Transpose (a view: its input read through permuted strides)
// and QuantizeLinear / DequantizeLinear, whose per-axis scales and zero points are views along `axis`.
#include <cmath>

#include "codegen/op_lowering.h"
#include "ir/ops/transpose.h"

namespace cuvil::codegen {

namespace {

CUVIL_LOWERING(lower_identity) {
  out[0] = in[0];
  return true;
}

CUVIL_LOWERING(lower_cast) {
  out[0] = L.cast(in[0], scalar_of(n.output(0)->dtype()));
  return true;
}

// The identity, and a mask of trues, unless training with a ratio above 0 (random).
bool inference_dropout(const Node& n, std::string* why) {
  auto training = scalar_input(n, 2), ratio = scalar_input(n, 1);
  bool identity = !n.input(2) || (training && *training == 0) || (ratio && *ratio == 0);
  return identity || refuse(why, "training-mode dropout is random");
}
CUVIL_LOWERING(lower_dropout) {  // inference (inference_dropout): the input, and a mask of trues
  out[0] = in[0];
  if (out.size() > 1) out[1] = L.cst(1, Scalar::i1);
  return true;
}

// Expand: a broadcast of its input to a shape known at compile time; its value is its input's.
bool constant_shape(const Node& n, std::string* why) {
  return (n.input(1) && n.input(1)->is_constant()) || refuse(why, "the shape is not a constant");
}
InputUse shape_input(const Node&, size_t i) { return {i == 1 ? InputRole::axes : InputRole::element}; }

// Transpose: a strided read of a kernel input (lower_body refuses one of a computed value).
bool valid_permutation(const Node& n, std::string* why) {
  return transpose_perm(n, input_rank(n, 0)).has_value() || refuse(why, "the permutation is not valid");
}
InputUse permuted_input(const Node& n, size_t i) {
  if (i != 0) return {};
  InputUse use{InputRole::permuted};
  if (auto perm = transpose_perm(n, input_rank(n, 0))) use.perm = *perm;
  return use;
}

// (De)QuantizeLinear's scale and zero point: per axis (rank 1) a view along `axis`; per tensor (rank 0) broadcast
// or an immediate.
std::optional<int64_t> quantization_axis(const Node& n, size_t i) {
  if ((i != 1 && i != 2) || !n.input(i) || !n.input(i)->shape().rank_known() || n.input(i)->shape().rank() != 1)
    return std::nullopt;
  int64_t r = input_rank(n, 0);
  auto axis = r > 0 ? normalized_axes({AttrReader(n).i("axis")}, r) : std::nullopt;
  return axis ? std::optional<int64_t>(axis->front()) : std::nullopt;
}
InputUse quantization_inputs(const Node& n, size_t i) {
  auto axis = quantization_axis(n, i);
  return axis ? InputUse{InputRole::along_axis, *axis} : InputUse{};
}
bool quantization_parameters(const Node& n, std::string* why) {
  for (size_t i : {size_t(1), size_t(2)}) {
    const Value* p = n.num_inputs() > i ? n.input(i) : nullptr;
    if (p && (!p->shape().rank_known() || p->shape().rank() > 1))
      return refuse(why, "a scale or zero point of rank above 1");
    if (p && p->shape().rank() == 1 && !quantization_axis(n, i)) return refuse(why, "the axis is out of range");
  }
  return true;
}

// x / scale (f32 for f32 and 16-bit x, f64 for f64 and i32, as the reference divides), rounded half to even (NaN
// to 0), plus the zero point, saturated to the output's range. in[1], in[2]: scale and zero point (per axis:
// views along the axis).
CUVIL_LOWERING(lower_quantize) {
  int x = in[0];
  Scalar tx = L.type(x);
  Scalar t = tx == Scalar::f32 ? Scalar::f32 : Scalar::f64;
  int q = L.bin(Op::div, L.cast(x, t), L.cast(in[1], t));
  int r = L.sel(L.add(Op::is_nan, Scalar::i1, q), L.cst(0, t), L.un(Op::round, q));
  if (in.size() > 2 && in[2] >= 0) r = L.bin(Op::add, r, L.cast(in[2], t));
  DType od = n.output(0)->dtype();  // u8, i8, u16 or i16
  double bits = double(dtype_size(od) * 8);
  double low = is_signed(od) ? -std::exp2(bits - 1) : 0, high = is_signed(od) ? std::exp2(bits - 1) - 1 : std::exp2(bits) - 1;
  int lo = L.cst(low, t), hi = L.cst(high, t);
  out[0] = L.cast(L.sel(L.cmp(Op::lt, r, lo), lo, L.sel(L.cmp(Op::gt, r, hi), hi, r)), Scalar::i32);
  return true;
}

// (x - zero point) as f32, times the scale (per axis: views). In i64 for i32 x (the difference may not fit i32);
// for 8- and 16-bit x and zero point in i32, where it is exact and stays one vector register per 16 lanes.
CUVIL_LOWERING(lower_dequantize) {
  auto narrow = [&](size_t i) {
    return i >= n.num_inputs() || !n.input(i) || (is_integer(n.input(i)->dtype()) && dtype_size(n.input(i)->dtype()) <= 2);
  };
  Scalar t = narrow(0) && narrow(2) ? Scalar::i32 : Scalar::i64;
  int d = L.cast(in[0], t);
  if (in.size() > 2 && in[2] >= 0) d = L.bin(Op::sub, d, L.cast(in[2], t));
  out[0] = L.bin(Op::mul, L.cast(d, Scalar::f32), L.cast(in[1], Scalar::f32));
  return true;
}

}  // namespace

void add_conversion_lowerings(LoweringTable& t) {
  t.add(OpKind::Cast, {.f64 = true, .truncates_bf16 = true, .lower = lower_cast});
  t.add(OpKind::Identity, {.f64 = true, .stores = Stores::passed, .lower = lower_identity});
  t.add(OpKind::Dropout, {.supports = inference_dropout, .lower = lower_dropout});
  t.add(OpKind::Expand, {.supports = constant_shape, .f64 = true, .input = shape_input, .lower = lower_identity});
  t.add(OpKind::Transpose, {.supports = valid_permutation, .f64 = true, .input = permuted_input,
                            .stores = Stores::picked, .lower = lower_identity});
  // (The schema's dtypes: f32, f16, bf16, f64 or i32 to u8, i8, u16 or i16; those or i32 to f32.)
  t.add(OpKind::QuantizeLinear,
        {.supports = quantization_parameters, .f64 = true, .input = quantization_inputs, .lower = lower_quantize});
  t.add(OpKind::DequantizeLinear,
        {.supports = quantization_parameters, .input = quantization_inputs, .lower = lower_dequantize});
}

}  // namespace cuvil::codegen
