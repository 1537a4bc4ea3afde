// ONNX converters for the recurrent family: version differences and lowerings (see converter.h).
//
//   RNN/GRU/LSTM-1: output_sequence only said whether Y is wanted; the outputs the node lists say the same.
//   Resize-10:      (X, scales) with asymmetric coordinates and Resize-10's own nearest rounding.
//   Upsample-1/7/9: lowered to Resize with the same coordinates and rounding as Resize-10.
#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

void convert_rnn_family(ConvertContext& ctx, OpKind op) {
  if (ctx.opset() < 7) ctx.take_attr("output_sequence");
  ctx.emit(op);
}

// Resize-10 and Upsample round a nearest sample down on upsampled axes and up on downsampled ones. Where the
// scales are constants and agree in direction, that is a standard nearest_mode; otherwise the IR's "simple".
std::string legacy_nearest_mode(const Value* scales) {
  if (!scales || !scales->is_constant()) return "simple";
  const Tensor& s = scales->constant();
  bool any_up = false, any_down = false;
  for (int64_t i = 0; i < s.numel(); ++i) {
    double v = s.get_f64(i);
    any_up |= v > 1;
    any_down |= v < 1;
  }
  if (any_up && any_down) return "simple";
  return any_down ? "ceil" : "floor";
}

// Emits Resize(X, roi omitted, scales) with the legacy semantics of Resize-10 / Upsample.
void emit_legacy_resize(ConvertContext& ctx, Value* x, Value* scales, std::string mode) {
  if (mode == "bilinear") mode = "linear";  // Upsample-1's name for it
  if (mode != "nearest" && mode != "linear") ctx.error("mode '", mode, "' must be nearest or linear");
  if (!ctx.attrs().empty()) ctx.error("attribute '", ctx.attrs().begin()->first, "' is not supported");
  AttrMap attrs;
  attrs["mode"] = Attribute(mode);
  attrs["coordinate_transformation_mode"] = Attribute("asymmetric");
  attrs["nearest_mode"] = Attribute(legacy_nearest_mode(scales));
  ctx.emit_final(OpKind::Resize, {x, nullptr, scales}, std::move(attrs));
}

std::string take_mode(ConvertContext& ctx) {
  auto m = ctx.take_attr("mode");
  if (!m) return "nearest";
  if (m->kind() != AttrKind::String) ctx.error("attribute 'mode' must be a string");
  return m->s();
}

Value* temp(ConvertContext& c, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {}) {
  return c.emit_temp(op, std::move(inputs), std::move(attrs))->output(0);
}

AttrMap to_type(DType t) { return {{"to", Attribute(int64_t(dtype_onnx_id(t)))}}; }

// `base` (one value per input dim) with the values of `part` (one per entry of `axes`) written at those dims.
Value* scatter_axes(ConvertContext& ctx, Value* base, const std::vector<int64_t>& axes, Value* part) {
  return temp(ctx, OpKind::ScatterElements, {base, ctx.const_i64(axes, "axes"), part});
}

// Resize-18's `axes`: scales, sizes and roi name only those dims. Imported as the full-rank inputs of Resize-13
// (scale 1, the input's size and the roi [0, 1] on the other dims), which needs the input's rank here.
void expand_resize_axes(ConvertContext& ctx, const Attribute& axes_attr) {
  Value* x = ctx.input(0);
  if (axes_attr.kind() != AttrKind::Ints) ctx.error("attribute 'axes' must be a list of ints");
  if (!x || !(x->is_graph_input() || x->is_constant()) || !x->shape().rank_known())
    ctx.error("attribute 'axes' needs the input's rank, which is not known at import");
  const int64_t rank = int64_t(x->shape().rank());
  std::vector<int64_t> axes;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : axes_attr.ints()) {
    if (a < -rank || a >= rank) ctx.error("axis ", a, " in 'axes' is out of range for rank ", rank);
    if (a < 0) a += rank;
    if (seen[size_t(a)]) ctx.error("axis ", a, " is given more than once in 'axes'");
    seen[size_t(a)] = true;
    axes.push_back(a);
  }
  bool identity = int64_t(axes.size()) == rank;
  for (size_t i = 0; identity && i < axes.size(); ++i) identity = axes[i] == int64_t(i);
  if (identity) return;
  auto& in = ctx.inputs();
  in.resize(std::max<size_t>(in.size(), 4), nullptr);
  // With sizes given, scales is absent or empty and stays so (but for keep_aspect_ratio_policy's form).
  bool both = ctx.attrs().count("scales_with_sizes") != 0;
  if (Value* sizes = in[3]) in[3] = scatter_axes(ctx, temp(ctx, OpKind::Shape, {x}), axes, sizes);
  if (Value* scales = in[2]; scales && (both || !in[3])) {
    Value* ones = ctx.const_tensor(Tensor::from_vector<float>(std::vector<float>(size_t(rank), 1.f), {rank}), "ones");
    in[2] = scatter_axes(ctx, temp(ctx, OpKind::CastLike, {ones, scales}), axes, scales);
  }
  if (Value* roi = in[1]) {  // [starts..., ends...] over the named axes
    std::vector<float> full(size_t(2 * rank), 0.f);
    std::fill(full.begin() + rank, full.end(), 1.f);
    std::vector<int64_t> both = axes;
    for (int64_t a : axes) both.push_back(a + rank);
    Value* base = ctx.const_tensor(Tensor::from_vector<float>(full, {2 * rank}), "roi");
    in[1] = scatter_axes(ctx, temp(ctx, OpKind::CastLike, {base, roi}), both, roi);
  }
}

// keep_aspect_ratio_policy not_larger / not_smaller: one scale for the resized axes, the smallest (largest) of
// sizes / input dims, and sizes = floor(scale * dim + 0.5) on those axes (ONNX's rounding). The interpolation maps
// coordinates by that scale, not by sizes / dims: Resize's scales_with_sizes form takes both (scales on the axes
// named, before expand_resize_axes widens both to every dim).
void keep_aspect_ratio(ConvertContext& ctx, const std::optional<Attribute>& axes_attr, bool not_larger) {
  Value* x = ctx.input(0);
  Value* sizes = ctx.input(3);
  if (!x || !sizes) ctx.error("keep_aspect_ratio_policy needs the sizes input");
  std::vector<int64_t> axes;
  if (axes_attr) {
    if (axes_attr->kind() != AttrKind::Ints) ctx.error("attribute 'axes' must be ints");
    axes = axes_attr->ints();
  } else {
    if (!(x->is_graph_input() || x->is_constant()) || !x->shape().rank_known())
      ctx.error("keep_aspect_ratio_policy without axes needs X's rank while importing, got ", x->type().str());
    for (int64_t a = 0; a < int64_t(x->shape().rank()); ++a) axes.push_back(a);
  }
  // In f64 as ONNX's reference (sizes / dims of int64 arrays), and so to Resize: in f32 the scale moves
  // nearest-mode ties.
  Value* dims = temp(ctx, OpKind::Cast, {temp(ctx, OpKind::Gather, {temp(ctx, OpKind::Shape, {x}), ctx.const_i64(axes, "axes")})},
                     to_type(DType::f64));
  Value* ratio = temp(ctx, OpKind::Div, {temp(ctx, OpKind::Cast, {sizes}, to_type(DType::f64)), dims});
  Value* scale = temp(ctx, not_larger ? OpKind::ReduceMin : OpKind::ReduceMax, {ratio}, {{"keepdims", Attribute(int64_t(0))}});
  Value* half = ctx.const_tensor(Tensor::scalar<double>(0.5), "half");
  Value* scaled = temp(ctx, OpKind::Mul, {scale, dims});
  Value* rounded = temp(ctx, OpKind::Floor, {temp(ctx, OpKind::Add, {scaled, half})});
  ctx.inputs().resize(std::max<size_t>(ctx.inputs().size(), 4), nullptr);
  Value* ones = ctx.const_tensor(Tensor::from_vector<double>(std::vector<double>(axes.size(), 1.0), {int64_t(axes.size())}), "ones");
  ctx.inputs()[2] = temp(ctx, OpKind::Mul, {scale, ones});
  ctx.inputs()[3] = temp(ctx, OpKind::Cast, {rounded}, to_type(DType::i64));
  ctx.attrs()["scales_with_sizes"] = Attribute(int64_t(1));
}

// Resize-18 adds antialias, axes and keep_aspect_ratio_policy; antialias and keep_aspect_ratio_policy import at
// the values that keep Resize-13's meaning, axes as the full-rank inputs.
void drop_resize18_attrs(ConvertContext& ctx) {
  // antialias = 1 is kept (the reference kernel runs it) for linear and cubic; ONNX defines none for nearest.
  if (auto a = ctx.take_attr("antialias"); a && !(a->kind() == AttrKind::Int && a->i() == 0)) {
    auto m = ctx.attrs().find("mode");
    std::string mode = m != ctx.attrs().end() && m->second.kind() == AttrKind::String ? m->second.s() : "nearest";
    if (a->kind() != AttrKind::Int || a->i() != 1 || (mode != "linear" && mode != "cubic"))
      ctx.error("attribute 'antialias' = 1 is only defined for modes linear and cubic (mode is ", mode, ")");
    ctx.attrs()["antialias"] = Attribute(int64_t(1));
  }
  auto axes = ctx.take_attr("axes");
  if (auto k = ctx.take_attr("keep_aspect_ratio_policy");
      k && !(k->kind() == AttrKind::String && k->s() == "stretch")) {
    if (k->kind() != AttrKind::String || (k->s() != "not_larger" && k->s() != "not_smaller"))
      ctx.error("keep_aspect_ratio_policy must be one of stretch, not_larger, not_smaller");
    keep_aspect_ratio(ctx, axes, k->s() == "not_larger");
  }
  if (axes) expand_resize_axes(ctx, *axes);
}

void convert_resize(ConvertContext& ctx) {
  if (ctx.opset() >= 11) {
    if (ctx.opset() >= 18) drop_resize18_attrs(ctx);
    ctx.emit(OpKind::Resize);
    return;
  }
  if (!ctx.input(0) || !ctx.input(1) || ctx.inputs().size() != 2) ctx.error("expects the inputs X and scales");
  std::string mode = take_mode(ctx);
  emit_legacy_resize(ctx, ctx.input(0), ctx.input(1), mode);
}

void convert_upsample(ConvertContext& ctx) {
  if (!ctx.input(0)) ctx.error("input X is required");
  std::string mode = take_mode(ctx);
  Value* scales = nullptr;
  if (ctx.opset() >= 9) {
    if (!ctx.input(1) || ctx.inputs().size() != 2) ctx.error("expects the inputs X and scales");
    scales = ctx.input(1);
  } else {
    if (ctx.inputs().size() != 1) ctx.error("expects one input (scales is an attribute before opset 9)");
    std::vector<float> v;
    if (ctx.opset() >= 7) {
      auto a = ctx.take_attr("scales");
      if (!a || a->kind() != AttrKind::Floats) ctx.error("attribute 'scales' (floats) is required");
      for (double f : a->floats()) v.push_back(float(f));
    } else {
      // Upsample-1 scales the last two dims of an NCHW tensor.
      auto h = ctx.take_attr("height_scale"), w = ctx.take_attr("width_scale");
      if (!h || !w || h->kind() != AttrKind::Float || w->kind() != AttrKind::Float)
        ctx.error("attributes 'height_scale' and 'width_scale' (floats) are required");
      v = {1.f, 1.f, float(h->f()), float(w->f())};
    }
    scales = ctx.const_tensor(Tensor::from_vector<float>(v, {int64_t(v.size())}), "scales");
  }
  emit_legacy_resize(ctx, ctx.input(0), scales, mode);
}

}  // namespace

void register_onnx_recurrent(OnnxConverterTable& t) {
  t["RNN"] = [](ConvertContext& ctx) { convert_rnn_family(ctx, OpKind::RNN); };
  t["GRU"] = [](ConvertContext& ctx) { convert_rnn_family(ctx, OpKind::GRU); };
  t["LSTM"] = [](ConvertContext& ctx) { convert_rnn_family(ctx, OpKind::LSTM); };
  t["Resize"] = convert_resize;
  t["Upsample"] = convert_upsample;
}

}  // namespace cuvil
