// ONNX converters for the nn family: version differences and lowerings (see converter.h).
//
// Opsets 18-28 add: AveragePool's dilations (19, the op table's own), Quantize/DequantizeLinear's saturate,
// block_size, output_dtype and precision (19-23), imported where they keep the older meaning, and their
// float8e8m0 scales (24, the MX formats). The other ops of the family (Conv, ConvTranspose, pools, MatMul, the
// quantized ops, Einsum, Det) have the same inputs and attributes in every opset up to 28 (later versions only add
// element types), apart from attributes later versions added with defaults that keep the older behaviour, so the
// default converter handles them.
#include <cmath>

#include "frontend/onnx/converter.h"
#include "ir/low_precision.h"

namespace cuvil {

namespace {

// Drops attribute `name` when it holds the value that means "as before"; any other value is refused by name.
void drop_if_default(ConvertContext& ctx, const char* name, int64_t neutral, const char* why) {
  auto a = ctx.take_attr(name);
  if (!a) return;
  if (a->kind() == AttrKind::Int && a->i() == neutral) return;
  ctx.error("attribute '", name, "' = ", a->kind() == AttrKind::Int ? std::to_string(a->i()) : "?",
            " is not supported (", why, ")");
}

// QuantizeLinear / DequantizeLinear: saturate (19) concerns float8 outputs; block_size (21, blocked quantization)
// and precision (23) keep the older behaviour at 0. output_dtype (21/23) names the result type: QuantizeLinear's
// u8 or i8 without a zero point become the zero point of that type (what the older opsets read it from), the
// zero point's own type is redundant; DequantizeLinear's result is cast to it (convert_dequantize).
Value* temp(ConvertContext& c, OpKind op, std::vector<Value*> inputs, AttrMap attrs = {}) {
  return c.emit_temp(op, std::move(inputs), std::move(attrs))->output(0);
}
AttrMap to_type(DType t) { return {{"to", Attribute(int64_t(dtype_onnx_id(t)))}}; }

// DequantizeLinear's output_dtype (23), a float type, or nullopt where absent (0): the scale's type then.
std::optional<DType> take_dequantized_type(ConvertContext& ctx) {
  auto od = ctx.take_attr("output_dtype");
  if (!od || od->kind() != AttrKind::Int || od->i() == 0) return std::nullopt;
  std::optional<DType> out = dtype_from_onnx_id(int(od->i()));
  if (!out || !is_float(*out))
    ctx.error("attribute 'output_dtype' = ", od->i(), " is not a float type (f32, f16, bf16, f64)");
  return out;
}
// Only graph inputs and constants carry their types at import; computed values are typed by inference later.
bool typed_at_import(const Value* v) { return v && (v->is_graph_input() || v->is_constant()); }

// Blocked quantization (block_size > 0, opset 21): scale and zero point have x's rank, with ceil(n / block_size)
// entries along `axis` where x has n. Written out elementwise in f32 (onnx's reference arithmetic): each parameter
// gathered to x's shape at index i / block_size along the axis, then DequantizeLinear (x - zp) * scale, or
// QuantizeLinear saturate(round_half_even(x / scale) + zp). The output dtype is the zero point's, output_dtype's
// or u8; DequantizeLinear's the scale's.
void convert_blocked_quant(ConvertContext& ctx, OpKind op, int64_t block) {
  Value* x = ctx.input(0);
  Value* scale = ctx.input(1);
  Value* zp = ctx.input(2);
  if (!x || !scale) ctx.error("inputs x and scale are required");
  bool no_saturate = ctx.take_attr("saturate").has_value();  // only ever kept as 0 (convert_quant_linear)
  auto ax = ctx.take_attr("axis");
  int64_t axis = ax && ax->kind() == AttrKind::Int ? ax->i() : 1;
  // (Only graph inputs and constants carry their shapes at import.)
  auto known = [](Value* v) { return (v->is_graph_input() || v->is_constant()) && v->shape().rank_known(); };
  Value* ranked = known(x) ? x : known(scale) ? scale : nullptr;
  if (!ranked) ctx.error("blocked quantization needs the rank of x or scale at import");
  int64_t rank = int64_t(ranked->shape().rank());
  if (axis < -rank || axis >= rank) ctx.error("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  AttrMap on_axis{{"axis", Attribute(axis)}};
  Value* n = temp(ctx, OpKind::Gather, {temp(ctx, OpKind::Shape, {x}), ctx.const_i64({axis}, "axis")});
  Value* zero = ctx.const_tensor(Tensor::scalar<int64_t>(0), "zero");
  Value* one = ctx.const_tensor(Tensor::scalar<int64_t>(1), "one");
  Value* count = temp(ctx, OpKind::Squeeze, {n, ctx.const_i64({0}, "axes")});
  Value* idx = temp(ctx, OpKind::Div, {temp(ctx, OpKind::Range, {zero, count, one}),
                                       ctx.const_tensor(Tensor::scalar<int64_t>(block), "block")});
  auto full = [&](Value* p) {
    return temp(ctx, OpKind::Cast, {temp(ctx, OpKind::Gather, {p, idx}, on_axis)}, to_type(DType::f32));
  };
  Value* s = full(scale);
  Value* xf = temp(ctx, OpKind::Cast, {x}, to_type(DType::f32));
  // float8 and float4e2m1 dequantize without their zero point (the onnx reference; float8's must be 0).
  // (x's type from the zero point, which has it, when x is computed: only inputs and constants are typed yet)
  DType xt = !typed_at_import(x) && typed_at_import(zp) ? zp->dtype() : x->dtype();
  bool low_float = is_low_precision(xt) && is_low_precision_float(xt);
  if (op == OpKind::DequantizeLinear) {
    std::optional<DType> out = take_dequantized_type(ctx);
    Value* d = zp && !low_float ? temp(ctx, OpKind::Sub, {xf, full(zp)}) : xf;
    Value* y = temp(ctx, OpKind::Mul, {d, s});
    if (out) ctx.emit_final(OpKind::Cast, {y}, to_type(*out));
    else ctx.emit_final(OpKind::CastLike, {y, scale}, {});
    return;
  }
  auto od = ctx.take_attr("output_dtype");
  std::optional<DType> out = zp && zp->is_constant() ? std::optional<DType>(zp->constant().dtype())
                             : od && od->i() != 0    ? dtype_from_onnx_id(int(od->i()))
                             : zp                     ? std::optional<DType>(zp->dtype())
                                                      : std::optional<DType>(DType::u8);
  if (!out || !(*out == DType::u8 || *out == DType::i8 || *out == DType::u16 || *out == DType::i16 ||
                is_low_precision(*out)))
    ctx.error("blocked quantization to this output type is not supported (u8, i8, u16, i16 and the "
              "low-precision types are)");
  if (is_low_precision(*out) && is_low_precision_float(*out)) {
    // float8: x / scale cast with `saturate` (no zero point); float4e2m1: plus the zero point, saturated.
    Value* q = temp(ctx, OpKind::Div, {xf, s});
    AttrMap cast = to_type(*out);
    if (*out == DType::f4e2m1) {
      if (zp) q = temp(ctx, OpKind::Add, {q, full(zp)});
    } else if (no_saturate) {
      cast["saturate"] = Attribute(int64_t(0));
    }
    ctx.emit_final(OpKind::Cast, {q}, cast);
    return;
  }
  double bits = is_low_precision(*out) ? double(low_precision_bits(*out)) : double(dtype_size(*out) * 8);
  bool sgn = *out == DType::i8 || *out == DType::i16 || *out == DType::i4 || *out == DType::i2;
  float lo = sgn ? -float(std::exp2(bits - 1)) : 0.f;
  float hi = sgn ? float(std::exp2(bits - 1) - 1) : float(std::exp2(bits) - 1);
  Value* q = temp(ctx, OpKind::Round, {temp(ctx, OpKind::Div, {xf, s})});
  if (zp) q = temp(ctx, OpKind::Add, {q, full(zp)});
  q = temp(ctx, OpKind::Clip, {q, ctx.const_tensor(Tensor::scalar<float>(lo), "lo"),
                                ctx.const_tensor(Tensor::scalar<float>(hi), "hi")});
  ctx.emit_final(OpKind::Cast, {q}, to_type(*out));
}

// DequantizeLinear computes (x - zp) * scale in f32 and rounds once to its result type: output_dtype (opset 23)
// or else the scale's (the onnx reference). The op's own form has an f32 scale and result (low-precision x: or a
// 16-bit float scale and result); other scales (float8e8m0 for the MX formats, 16-bit floats) are cast to f32
// before it, exactly, and other result types cast after it.
void convert_dequantize(ConvertContext& ctx) {
  std::optional<DType> out = take_dequantized_type(ctx);
  Value* scale = ctx.input(1);
  bool cast_scale = typed_at_import(scale) && scale->dtype() != DType::f32;
  DType result = out ? *out : cast_scale ? scale->dtype() : DType::f32;
  if (!cast_scale && result == DType::f32) return void(ctx.emit(OpKind::DequantizeLinear));
  std::vector<Value*> in = ctx.inputs();
  if (cast_scale) in[1] = temp(ctx, OpKind::Cast, {scale}, to_type(DType::f32));
  if (result == DType::f32) return void(ctx.emit_final(OpKind::DequantizeLinear, in, ctx.attrs()));
  ctx.emit_final(OpKind::Cast, {temp(ctx, OpKind::DequantizeLinear, in, ctx.attrs())}, to_type(result));
}

void convert_quant_linear(ConvertContext& ctx, OpKind op) {
  // saturate (float8 outputs) is kept where it is not the default, so other models' IR is unchanged.
  if (auto sat = ctx.take_attr("saturate"); sat && sat->kind() == AttrKind::Int && sat->i() == 0 &&
                                            op == OpKind::QuantizeLinear)
    ctx.attrs()["saturate"] = Attribute(int64_t(0));
  // (blocked quantization reads it back from the attributes)
  if (auto b = ctx.attrs().find("block_size");
      b != ctx.attrs().end() && b->second.kind() == AttrKind::Int && b->second.i() > 0) {
    int64_t block = b->second.i();
    ctx.attrs().erase("block_size");
    drop_if_default(ctx, "precision", 0, "a computation precision other than the scale's type");
    return convert_blocked_quant(ctx, op, block);
  }
  drop_if_default(ctx, "block_size", 0, "blocked quantization");
  drop_if_default(ctx, "precision", 0, "a computation precision other than the scale's type");
  if (op == OpKind::DequantizeLinear) return convert_dequantize(ctx);
  auto od = ctx.take_attr("output_dtype");
  int64_t want = od && od->kind() == AttrKind::Int ? od->i() : 0;
  // A float8e8m0 scale (the MX formats') is a power of two: in f32 exactly, where the op takes its scales.
  if (Value* scale = ctx.input(1); typed_at_import(scale) && scale->dtype() == DType::f8e8m0)
    ctx.inputs()[1] = temp(ctx, OpKind::Cast, {scale}, to_type(DType::f32));
  if (want == 0) return void(ctx.emit(op));
  Value* zp = ctx.input(2);
  std::optional<DType> type = dtype_from_onnx_id(int(want));
  if (zp) {
    if (zp->is_constant() && type != zp->constant().dtype())
      ctx.error("attribute 'output_dtype' = ", want, " differs from the zero point's type");
  } else if (type == DType::u8 || type == DType::i8 || (type && is_low_precision(*type))) {
    ctx.inputs().resize(3, nullptr);
    ctx.inputs()[2] = ctx.const_tensor(Tensor::zeros(*type, {}), "zero_point");
  } else {
    ctx.error("attribute 'output_dtype' = ", want, " is not supported (u8, i8 and the low-precision types are)");
  }
  ctx.emit(op);
}

std::vector<int64_t> ints_attr(ConvertContext& ctx, const char* name, std::vector<int64_t> def) {
  auto a = ctx.take_attr(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Ints) ctx.error("attribute '", name, "' must be ints");
  return a->ints();
}

void convert_deform_conv(ConvertContext& ctx) {
  Value* x = ctx.input(0);
  Value* w = ctx.input(1);
  Value* offset = ctx.input(2);
  Value* bias = ctx.input(3);
  Value* mask = ctx.input(4);
  if (!x || !w || !offset) ctx.error("inputs X, W and offset are required");
  if (!(w->is_graph_input() || w->is_constant()) || !w->shape().is_static() || w->shape().rank() != 4)
    ctx.error("W needs a static 4-D shape while importing (2-D deformable convolution), got ", w->type().str());
  std::vector<int64_t> ws = w->shape().static_dims();
  std::vector<int64_t> ks = ints_attr(ctx, "kernel_shape", {ws[2], ws[3]});
  std::vector<int64_t> dil = ints_attr(ctx, "dilations", {1, 1}), str = ints_attr(ctx, "strides", {1, 1});
  std::vector<int64_t> pads = ints_attr(ctx, "pads", {0, 0, 0, 0});
  auto group_attr = ctx.take_attr("group"), og_attr = ctx.take_attr("offset_group");
  int64_t group = group_attr && group_attr->kind() == AttrKind::Int ? group_attr->i() : 1;
  int64_t og = og_attr && og_attr->kind() == AttrKind::Int ? og_attr->i() : 1;
  if (!ctx.attrs().empty()) ctx.error("attribute '", ctx.attrs().begin()->first, "' is not supported");
  if (ks.size() != 2 || dil.size() != 2 || str.size() != 2 || pads.size() != 4 || ks[0] != ws[2] || ks[1] != ws[3])
    ctx.error("only 2-D deformable convolutions are supported (kernel_shape, dilations, strides, pads of a 2-D one)");
  if (group < 1 || og < 1) ctx.error("group and offset_group must be >= 1");
  int64_t taps = ks[0] * ks[1], cin = ws[1] * group, oc = ws[0];
  if (cin % og != 0 || oc % group != 0) ctx.error("channels do not divide into group ", group, " / offset_group ", og);
  auto i64s = [&](std::vector<int64_t> v, const char* hint) { return ctx.const_i64(v, hint); };
  auto f64 = [&](double v, const char* hint) { return ctx.const_tensor(Tensor::scalar<double>(v), hint); };
  auto dim = [&](Value* v, int64_t d) {
    return temp(ctx, OpKind::Gather, {temp(ctx, OpKind::Shape, {v}), ctx.const_tensor(Tensor::scalar<int64_t>(d), "dim")});
  };
  Value* h_in = temp(ctx, OpKind::Cast, {dim(x, 2)}, to_type(DType::f64));
  Value* w_in = temp(ctx, OpKind::Cast, {dim(x, 3)}, to_type(DType::f64));
  Value* zero = ctx.const_tensor(Tensor::scalar<int64_t>(0), "zero");
  Value* one = ctx.const_tensor(Tensor::scalar<int64_t>(1), "one");
  // Output positions' base coordinates: oh * stride - pad, as [oH, 1] and [1, oW].
  Value* oy = temp(ctx, OpKind::Cast, {temp(ctx, OpKind::Range, {zero, dim(offset, 2), one})}, to_type(DType::f64));
  Value* ox = temp(ctx, OpKind::Cast, {temp(ctx, OpKind::Range, {zero, dim(offset, 3), one})}, to_type(DType::f64));
  Value* base_y = temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Sub, {temp(ctx, OpKind::Mul, {oy, f64(double(str[0]), "sh")}),
                                                                      f64(double(pads[0]), "pt")}), i64s({-1, 1}, "col")});
  Value* base_x = temp(ctx, OpKind::Sub, {temp(ctx, OpKind::Mul, {ox, f64(double(str[1]), "sw")}), f64(double(pads[1]), "pl")});
  // offset [N, og * taps * 2, oH, oW] -> [N * og, taps, 2, oH, oW] in f32; mask -> [N, og, taps, 1, oH, oW].
  Value* off = temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Cast, {offset}, to_type(DType::f64)),
                                    temp(ctx, OpKind::Concat, {i64s({-1, taps, 2}, "lead"),
                                                               temp(ctx, OpKind::Slice, {temp(ctx, OpKind::Shape, {offset}),
                                                                                         i64s({2}, "s"), i64s({4}, "e")})},
                                         {{"axis", Attribute(int64_t(0))}})});
  Value* xg = temp(ctx, OpKind::Reshape, {x, temp(ctx, OpKind::Concat, {i64s({-1, cin / og}, "grouped"),
                                                                         temp(ctx, OpKind::Slice, {temp(ctx, OpKind::Shape, {x}),
                                                                                                   i64s({2}, "s"), i64s({4}, "e")})},
                                                   {{"axis", Attribute(int64_t(0))}})});
  Value* xg32 = temp(ctx, OpKind::Cast, {xg}, to_type(DType::f32));
  Value* two = f64(2.0, "two");
  Value* onef = f64(1.0, "one_f");
  Value* mk = mask ? temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Cast, {mask}, to_type(DType::f32)),
                                                 temp(ctx, OpKind::Concat, {i64s({-1, taps, 1}, "lead"),
                                                                            temp(ctx, OpKind::Slice, {temp(ctx, OpKind::Shape, {mask}),
                                                                                                      i64s({2}, "s"), i64s({4}, "e")})},
                                                      {{"axis", Attribute(int64_t(0))}})})
                   : nullptr;  // [N*og, taps, 1, oH, oW]
  std::vector<Value*> columns;
  for (int64_t i = 0; i < ks[0]; ++i)
    for (int64_t j = 0; j < ks[1]; ++j) {
      int64_t k = i * ks[1] + j;
      Value* tap = temp(ctx, OpKind::Gather, {off, ctx.const_tensor(Tensor::scalar<int64_t>(k), "tap")},
                        {{"axis", Attribute(int64_t(1))}});  // [N*og, 2, oH, oW]
      Value* dy = temp(ctx, OpKind::Gather, {tap, zero}, {{"axis", Attribute(int64_t(1))}});
      Value* dx = temp(ctx, OpKind::Gather, {tap, one}, {{"axis", Attribute(int64_t(1))}});
      Value* py = temp(ctx, OpKind::Add, {temp(ctx, OpKind::Add, {base_y, f64(double(i * dil[0]), "ty")}), dy});
      Value* px = temp(ctx, OpKind::Add, {temp(ctx, OpKind::Add, {base_x, f64(double(j * dil[1]), "tx")}), dx});
      // align_corners=0: p = ((g + 1) * size - 1) / 2, so g = (2 p + 1) / size - 1.
      Value* gy = temp(ctx, OpKind::Sub, {temp(ctx, OpKind::Div, {temp(ctx, OpKind::Add, {temp(ctx, OpKind::Mul, {py, two}), onef}), h_in}), onef});
      Value* gx = temp(ctx, OpKind::Sub, {temp(ctx, OpKind::Div, {temp(ctx, OpKind::Add, {temp(ctx, OpKind::Mul, {px, two}), onef}), w_in}), onef});
      Value* last = i64s({-1}, "last");
      Value* grid = temp(ctx, OpKind::Concat, {temp(ctx, OpKind::Unsqueeze, {gx, last}), temp(ctx, OpKind::Unsqueeze, {gy, last})},
                         {{"axis", Attribute(int64_t(-1))}});
      Value* sampled = temp(ctx, OpKind::GridSample, {xg32, grid}, {{"mode", Attribute("linear")}});  // [N*og, C/og, oH, oW]
      if (mk) {
        sampled = temp(ctx, OpKind::Mul, {sampled, temp(ctx, OpKind::Gather, {mk, ctx.const_tensor(Tensor::scalar<int64_t>(k), "tap")},
                                                         {{"axis", Attribute(int64_t(1))}})});
      }
      columns.push_back(temp(ctx, OpKind::Unsqueeze, {sampled, i64s({2}, "tap_axis")}));  // [N*og, C/og, 1, oH, oW]
    }
  Value* cols = temp(ctx, OpKind::Concat, columns, {{"axis", Attribute(int64_t(2))}});  // [N*og, C/og, taps, oH, oW]
  Value* n = temp(ctx, OpKind::Reshape, {dim(x, 0), i64s({1}, "one_dim")});
  Value* cols_g = temp(ctx, OpKind::Reshape, {cols, temp(ctx, OpKind::Concat, {n, i64s({group, cin / group * taps, -1}, "cols")},
                                                                       {{"axis", Attribute(int64_t(0))}})});
  Value* wg = temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Cast, {w}, to_type(DType::f32)), i64s({1, group, oc / group, -1}, "w")});
  Value* y = temp(ctx, OpKind::MatMul, {wg, cols_g});  // [N, group, oC/group, oH*oW]
  y = temp(ctx, OpKind::Reshape, {y, temp(ctx, OpKind::Concat, {n, i64s({oc}, "oc"), temp(ctx, OpKind::Slice, {temp(ctx, OpKind::Shape, {offset}),
                                                                                                     i64s({2}, "s"), i64s({4}, "e")})},
                                         {{"axis", Attribute(int64_t(0))}})});
  if (bias) y = temp(ctx, OpKind::Add, {y, temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Cast, {bias}, to_type(DType::f32)), i64s({1, -1, 1, 1}, "bias")})});
  ctx.emit_final(OpKind::CastLike, {y, x}, {});
}

}  // namespace

void register_onnx_nn(OnnxConverterTable& t) {
  // Gemm-1 and Gemm-6 carry `broadcast`: 1 lets C broadcast one way to [M, N], 0 requires C to be [M, N] already.
  // Since Gemm-7, C always broadcasts one way, which accepts every valid older model with the same result.
  t["Gemm"] = [](ConvertContext& ctx) {
    auto b = ctx.take_attr("broadcast");
    if (b && ctx.opset() >= 7) ctx.error("attribute 'broadcast' was removed in opset 7");
    ctx.emit(OpKind::Gemm);
  };
  // QLinearMatMul-21's f16/bf16 scales: cast to the f32 the op table's QLinearMatMul reads (exactly; the
  // products and the requantization then compute in f32, as ONNX Runtime does).
  t["QLinearMatMul"] = [](ConvertContext& ctx) {
    for (size_t i : {size_t(1), size_t(4), size_t(6)}) {
      Value* s = ctx.input(i);
      if (s && (s->is_graph_input() || s->is_constant()) && (s->dtype() == DType::f16 || s->dtype() == DType::bf16))
        ctx.inputs()[i] = temp(ctx, OpKind::Cast, {s}, to_type(DType::f32));
    }
    ctx.emit(OpKind::QLinearMatMul);
  };
  t["QuantizeLinear"] = [](ConvertContext& ctx) { convert_quant_linear(ctx, OpKind::QuantizeLinear); };
  t["DequantizeLinear"] = [](ConvertContext& ctx) { convert_quant_linear(ctx, OpKind::DequantizeLinear); };
  // GridSample-16 names its modes "bilinear"/"bicubic" (default "bilinear"); opset 20 renamed them.
  t["GridSample"] = [](ConvertContext& ctx) {
    auto m = ctx.take_attr("mode");
    std::string mode = m && m->kind() == AttrKind::String ? m->s() : (ctx.opset() < 20 ? "bilinear" : "linear");
    if (mode == "bilinear") mode = "linear";
    if (mode == "bicubic") mode = "cubic";
    ctx.attrs()["mode"] = Attribute(mode);
    ctx.emit(OpKind::GridSample);
  };
  // DeformConv-19 (2-D): for each kernel tap, the input bilinearly sampled (zeros outside) at the tap's position
  // plus its learned offset (coordinates in f64, so whole positions stay whole), by GridSample over
  // [N * offset_group, C / offset_group, H, W]; times the tap's mask;
  // the taps stacked as im2col columns [N, group, C/group * taps, oH * oW] and multiplied by the weights
  // [group, oC/group, C/group * taps]. The products stay on the fast kernels.
  t["DeformConv"] = [](ConvertContext& ctx) { convert_deform_conv(ctx); };
  // DFT-17 takes `axis` as an attribute (default 1); DFT-20 as an optional input (default -2).
  t["DFT"] = [](ConvertContext& ctx) {
    if (ctx.opset() < 20) {
      auto a = ctx.take_attr("axis");
      int64_t axis = a && a->kind() == AttrKind::Int ? a->i() : 1;
      ctx.inputs().resize(2, nullptr);
      Value* av = ctx.const_tensor(Tensor::scalar<int64_t>(axis), "axis");
      ctx.inputs().push_back(av);
    }
    ctx.emit(OpKind::DFT);
  };
  // STFT-17 as frames gathered from the signal (frame f: steps f*frame_step + [0, window length)), times the
  // window, then a DFT of frame_length along each frame; frames = 1 + (signal length - frame_length) / frame_step.
  t["STFT"] = [](ConvertContext& ctx) {
    Value* x = ctx.input(0);
    Value* step = ctx.input(1);
    Value* window = ctx.input(2);
    Value* frame_length = ctx.input(3);
    if (!x || !step) ctx.error("inputs 0 (signal) and 1 (frame_step) are required");
    auto os = ctx.take_attr("onesided");
    int64_t onesided = os && os->kind() == AttrKind::Int ? os->i() : 1;
    if (!ctx.attrs().empty()) ctx.error("attribute '", ctx.attrs().begin()->first, "' is not supported");
    auto scalar_i64 = [&](Value* v) {
      return temp(ctx, OpKind::Reshape, {temp(ctx, OpKind::Cast, {v}, to_type(DType::i64)), ctx.const_i64({}, "scalar")});
    };
    auto dim = [&](Value* v, int64_t d) {
      return temp(ctx, OpKind::Gather, {temp(ctx, OpKind::Shape, {v}), ctx.const_tensor(Tensor::scalar<int64_t>(d), "dim")});
    };
    Value* zero = ctx.const_tensor(Tensor::scalar<int64_t>(0), "zero");
    Value* one = ctx.const_tensor(Tensor::scalar<int64_t>(1), "one");
    Value* hop = scalar_i64(step);
    Value* len = frame_length ? scalar_i64(frame_length) : window ? dim(window, 0) : dim(x, 1);
    Value* width = window ? dim(window, 0) : len;
    Value* frames = temp(ctx, OpKind::Add, {temp(ctx, OpKind::Div, {temp(ctx, OpKind::Sub, {dim(x, 1), len}), hop}), one});
    Value* starts = temp(ctx, OpKind::Mul, {temp(ctx, OpKind::Range, {zero, frames, one}), hop});
    Value* idx = temp(ctx, OpKind::Add, {temp(ctx, OpKind::Unsqueeze, {starts, ctx.const_i64({1}, "axis")}),
                                         temp(ctx, OpKind::Range, {zero, width, one})});
    Value* framed = temp(ctx, OpKind::Gather, {x, idx}, {{"axis", Attribute(int64_t(1))}});  // [B, F, W, C]
    if (window) framed = temp(ctx, OpKind::Mul, {framed, temp(ctx, OpKind::Reshape, {window, ctx.const_i64({1, 1, -1, 1}, "window")})});
    ctx.emit_final(OpKind::DFT, {framed, len, ctx.const_tensor(Tensor::scalar<int64_t>(2), "axis")},
                   {{"onesided", Attribute(onesided)}});
  };
}

}  // namespace cuvil
