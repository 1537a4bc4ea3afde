// ONNX ops that ONNX itself defines as functions of other ops (opsets 17-24), imported as those expansions: the
// passes and generated kernels then see ops they already fuse, and no op-table row or kernel is needed.
//
//   GroupNormalization-18/21  Reshape [N, G, -1] -> InstanceNormalization -> per-channel scale and bias (21) or
//                             per-group ones (18, as InstanceNormalization's own)
//   RMSNormalization-23       x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale, in stash_type (f32)
//   Swish-24                  x * sigmoid(alpha * x)
//   LpNormalization-1         x / ReduceL1|L2(x, axis, keepdims)
//   HannWindow, HammingWindow, BlackmanWindow-17  sums of cosines of 2 pi n / N (N - 1 when not periodic)
//   CenterCropPad-18          Slice of the centred window where the target is smaller, Pad (18, with axes) where
//                             it is larger
#include <cmath>
#include <numbers>

#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

Value* temp(ConvertContext& c, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {}) {
  return c.emit_temp(op, std::move(inputs), std::move(attrs))->output(0);
}

Value* required(ConvertContext& c, size_t i, const char* what) {
  Value* v = c.input(i);
  if (!v) c.error("input ", i, " (", what, ") is required");
  return v;
}

double float_attr(ConvertContext& c, const char* name, double def) {
  auto a = c.take_attr(name);
  if (!a) return def;
  if (a->kind() == AttrKind::Float) return a->f();
  if (a->kind() == AttrKind::Int) return double(a->i());
  c.error("attribute '", name, "' must be a float");
}

int64_t int_attr(ConvertContext& c, const char* name, std::optional<int64_t> def) {
  auto a = c.take_attr(name);
  if (!a) {
    if (!def) c.error("attribute '", name, "' is required");
    return *def;
  }
  if (a->kind() != AttrKind::Int) c.error("attribute '", name, "' must be an int");
  return a->i();
}

void no_more_attrs(ConvertContext& c) {
  if (!c.attrs().empty()) c.error("attribute '", c.attrs().begin()->first, "' is not supported");
}

// A float constant converted to the element type of `like` (known only after inference).
Value* scalar_like(ConvertContext& c, double v, Value* like, const char* hint) {
  return temp(c, OpKind::CastLike, {c.const_tensor(Tensor::scalar<float>(float(v)), hint), like});
}

AttrMap to_type(DType t) { return {{"to", Attribute(int64_t(dtype_onnx_id(t)))}}; }

void convert_group_norm(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  Value* scale = required(c, 1, "scale");
  Value* bias = required(c, 2, "bias");
  int64_t groups = int_attr(c, "num_groups", std::nullopt);
  if (groups < 1) c.error("num_groups must be >= 1, got ", groups);
  double eps = float_attr(c, "epsilon", 1e-5);
  c.take_attr("stash_type");  // InstanceNormalization computes 16-bit inputs in f32 already
  no_more_attrs(c);
  AttrMap eps_attr{{"epsilon", Attribute(eps)}};
  Value* shape = temp(c, OpKind::Shape, {x});
  Value* grouped = temp(c, OpKind::Reshape, {x, c.const_i64({0, groups, -1}, "grouped")});
  if (c.opset() < 21) {  // scale and bias per group: InstanceNormalization's own parameters
    Value* n = temp(c, OpKind::InstanceNormalization, {grouped, scale, bias}, eps_attr);
    c.emit_final(OpKind::Reshape, {n, shape}, {});
    return;
  }
  Value* ones = temp(c, OpKind::CastLike,
                     {c.const_tensor(Tensor::from_vector<float>(std::vector<float>(size_t(groups), 1.f), {groups}),
                                     "ones"), x});
  Value* zeros = temp(c, OpKind::CastLike,
                      {c.const_tensor(Tensor::zeros(DType::f32, {groups}), "zeros"), x});
  Value* n = temp(c, OpKind::InstanceNormalization, {grouped, ones, zeros}, eps_attr);
  // [N, C, -1], so that [C, 1] parameters broadcast whatever X's rank.
  Value* by_channel_shape =
      temp(c, OpKind::Concat, {c.const_i64({0}, "n"), temp(c, OpKind::Shape, {scale}), c.const_i64({-1}, "rest")},
           {{"axis", Attribute(int64_t(0))}});
  Value* by_channel = temp(c, OpKind::Reshape, {n, by_channel_shape});
  Value* axis1 = c.const_i64({1}, "axis1");
  Value* scaled = temp(c, OpKind::Mul, {by_channel, temp(c, OpKind::Unsqueeze, {scale, axis1})});
  Value* shifted = temp(c, OpKind::Add, {scaled, temp(c, OpKind::Unsqueeze, {bias, axis1})});
  c.emit_final(OpKind::Reshape, {shifted, shape}, {});
}

// The axes [axis, rank) as negative numbers, which need no rank; a non-negative axis needs X's rank here.
std::vector<int64_t> axes_to_end(ConvertContext& c, Value* x, int64_t axis) {
  if (axis >= 0) {
    if (!(x->is_graph_input() || x->is_constant()) || !x->shape().rank_known())
      c.error("axis ", axis, " needs the rank of X, which is not known while importing; use a negative axis");
    axis -= int64_t(x->shape().rank());
    if (axis >= 0) c.error("axis is out of range for ", x->type().str());
  }
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
  return axes;
}

void convert_rms_norm(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  Value* scale = required(c, 1, "scale");
  int64_t axis = int_attr(c, "axis", -1);
  double eps = float_attr(c, "epsilon", 1e-5);
  int64_t stash = int_attr(c, "stash_type", int64_t(dtype_onnx_id(DType::f32)));
  no_more_attrs(c);
  std::optional<DType> st = dtype_from_onnx_id(int(stash));
  if (!st || !is_float(*st)) c.error("stash_type ", stash, " is not a float type");
  Value* xs = temp(c, OpKind::Cast, {x}, to_type(*st));
  Value* sq = temp(c, OpKind::Mul, {xs, xs});
  Value* ms = temp(c, OpKind::ReduceMean, {sq, c.const_i64(axes_to_end(c, x, axis), "axes")},
                   {{"keepdims", Attribute(int64_t(1))}});
  Value* rms = temp(c, OpKind::Sqrt, {temp(c, OpKind::Add, {ms, scalar_like(c, eps, xs, "epsilon")})});
  Value* normalized = temp(c, OpKind::CastLike, {temp(c, OpKind::Div, {xs, rms}), x});
  c.emit_final(OpKind::Mul, {normalized, scale}, {});
}

void convert_swish(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  double alpha = float_attr(c, "alpha", 1.0);
  no_more_attrs(c);
  Value* ax = alpha == 1.0 ? x : temp(c, OpKind::Mul, {x, scalar_like(c, alpha, x, "alpha")});
  c.emit_final(OpKind::Mul, {x, temp(c, OpKind::Sigmoid, {ax})}, {});
}

void convert_lp_norm(ConvertContext& c) {
  Value* x = required(c, 0, "input");
  int64_t axis = int_attr(c, "axis", -1);
  int64_t p = int_attr(c, "p", 2);
  no_more_attrs(c);
  if (p != 1 && p != 2) c.error("p must be 1 or 2, got ", p);
  Value* norm = temp(c, p == 1 ? OpKind::ReduceL1 : OpKind::ReduceL2, {x, c.const_i64({axis}, "axis")},
                     {{"keepdims", Attribute(int64_t(1))}});
  c.emit_final(OpKind::Div, {x, norm}, {});
}

// sum_k a_k cos(2 pi k n / N), n = 0 .. size-1, N = size (periodic) or size - 1; computed in f32 and cast to
// output_datatype, as ONNX's function bodies do.
void convert_window(ConvertContext& c, std::vector<double> coeffs) {
  Value* size = required(c, 0, "size");
  int64_t periodic = int_attr(c, "periodic", 1);
  int64_t out_type = int_attr(c, "output_datatype", int64_t(dtype_onnx_id(DType::f32)));
  no_more_attrs(c);
  std::optional<DType> ot = dtype_from_onnx_id(int(out_type));
  if (!ot) c.error("output_datatype ", out_type, " is not a supported type");
  Value* n_f = temp(c, OpKind::Cast, {size}, to_type(DType::f32));
  Value* zero = c.const_tensor(Tensor::scalar<float>(0.f), "zero");
  Value* one = c.const_tensor(Tensor::scalar<float>(1.f), "one");
  Value* n = temp(c, OpKind::Range, {zero, n_f, one});
  Value* denom = periodic ? n_f : temp(c, OpKind::Sub, {n_f, one});
  Value* phase = temp(c, OpKind::Div,
                      {temp(c, OpKind::Mul, {n, c.const_tensor(Tensor::scalar<float>(float(2 * std::numbers::pi)),
                                                               "two_pi")}),
                       denom});
  Value* sum = c.const_tensor(Tensor::scalar<float>(float(coeffs[0])), "a0");
  for (size_t k = 1; k < coeffs.size(); ++k) {
    Value* kphase = k == 1 ? phase
                           : temp(c, OpKind::Mul, {phase, c.const_tensor(Tensor::scalar<float>(float(k)), "k")});
    Value* term = temp(c, OpKind::Mul,
                       {temp(c, OpKind::Cos, {kphase}), c.const_tensor(Tensor::scalar<float>(float(coeffs[k])), "a")});
    sum = temp(c, OpKind::Add, {sum, term});
  }
  c.emit_final(OpKind::Cast, {sum}, to_type(*ot));
}

void convert_center_crop_pad(ConvertContext& c) {
  Value* x = required(c, 0, "input_data");
  Value* target = required(c, 1, "shape");
  std::optional<Attribute> axes_attr = c.take_attr("axes");
  no_more_attrs(c);
  Value* axes;
  if (axes_attr) {
    if (axes_attr->kind() != AttrKind::Ints) c.error("attribute 'axes' must be ints");
    axes = c.const_i64(axes_attr->ints(), "axes");
  } else {
    Value* rank = temp(c, OpKind::Size, {temp(c, OpKind::Shape, {x})});
    axes = temp(c, OpKind::Range, {c.const_tensor(Tensor::scalar<int64_t>(0), "zero"), rank,
                                   c.const_tensor(Tensor::scalar<int64_t>(1), "one")});
  }
  Value* target64 = temp(c, OpKind::Cast, {target}, to_type(DType::i64));
  Value* dims = temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {x}), axes});
  Value* zero = c.const_i64({0}, "zero");
  Value* two = c.const_i64({2}, "two");
  // Crop: the centred window, starting at (dim - target) / 2 where the target is smaller.
  Value* start = temp(c, OpKind::Div, {temp(c, OpKind::Max, {temp(c, OpKind::Sub, {dims, target64}), zero}), two});
  Value* end = temp(c, OpKind::Add, {start, temp(c, OpKind::Min, {dims, target64})});
  Value* cropped = temp(c, OpKind::Slice, {x, start, end, axes});
  // Pad: (target - dim) / 2 before, the rest after, where the target is larger.
  Value* grow = temp(c, OpKind::Max, {temp(c, OpKind::Sub, {target64, dims}), zero});
  Value* before = temp(c, OpKind::Div, {grow, two});
  Value* after = temp(c, OpKind::Sub, {grow, before});
  Value* pads = temp(c, OpKind::Concat, {before, after}, {{"axis", Attribute(int64_t(0))}});
  c.emit_final(OpKind::Pad, {cropped, pads, nullptr, axes}, {});
}

}  // namespace

void register_onnx_functions(OnnxConverterTable& t) {
  t["GroupNormalization"] = convert_group_norm;
  t["RMSNormalization"] = convert_rms_norm;
  t["Swish"] = convert_swish;
  t["LpNormalization"] = convert_lp_norm;
  t["HannWindow"] = [](ConvertContext& c) { convert_window(c, {0.5, -0.5}); };
  t["HammingWindow"] = [](ConvertContext& c) { convert_window(c, {25.0 / 46.0, -21.0 / 46.0}); };
  t["BlackmanWindow"] = [](ConvertContext& c) { convert_window(c, {0.42, -0.5, 0.08}); };
  t["CenterCropPad"] = convert_center_crop_pad;
}

}  // namespace cuvil
