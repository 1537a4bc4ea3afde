// Op definitions (arity, attributes, shape inference) of the nn family: convolutions, pooling, matrix products,
// Einsum, Det and quantization.
//
// Differences from ONNX (opset 17):
//   - Conv/ConvTranspose/pools support 1 to 3 spatial dims (the reference loops are written for at most 3).
//   - Float ops also accept bf16 (computed in float), which later opsets allow for most of them.
//   - With ceil_mode, a last pooling window that would start inside the end padding is dropped (PyTorch's rule;
//     the ONNX 1.12 formula would produce an output element that sees no input).
//   - Gemm on integer types requires integral alpha and beta (integer results stay exact).
#include <cmath>

#include "ir/ops/activation.h"
#include "ir/ops/infer_util.h"
#include "ir/ops/layout.h"
#include "ir/ops/nn_einsum.h"
#include "ir/ops/nn_window.h"

namespace cuvil {

namespace {

using nn::Window;
using nn::WindowAttrs;

const std::vector<int64_t> kNoInts;

void expect_float(const InferContext& c, size_t i) {
  infer::expect_dtype(c, i, {DType::f16, DType::bf16, DType::f32, DType::f64});
}
void expect_q8(const InferContext& c, size_t i) { infer::expect_dtype(c, i, {DType::u8, DType::i8}); }
void expect_gemm_type(const InferContext& c, size_t i) {
  infer::expect_dtype(c, i, {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i32, DType::i64, DType::u32,
                             DType::u64});
}

// The dtypes of a QLinear op's inputs (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
// 8-bit a, b and y, zero points of their operand's dtype, f32 scales.
void expect_qlinear_dtypes(const InferContext& c) {
  expect_q8(c, 0);
  expect_q8(c, 3);
  expect_q8(c, 7);
  infer::expect_same_dtype(c, 0, 2);
  infer::expect_same_dtype(c, 3, 5);
  for (size_t i : {1, 4, 6}) infer::expect_dtype(c, i, {DType::f32});
}

bool dim_is(const Dim& d, int64_t v) { return d.is_const() && d.value() == v; }

// Checks that two dims that must be equal are not provably different.
void expect_dims_equal(const InferContext& c, const Dim& a, const Dim& b, const char* what) {
  if (a.is_const() && b.is_const() && a.value() != b.value())
    c.error(what, ": ", a.value(), " vs ", b.value());
}

// The number of spatial dims of an (N, C, spatial...) input.
size_t spatial_rank(const InferContext& c, size_t i) {
  size_t r = c.input_rank(i);
  if (r < 3)
    c.error("input ", i, " must have rank >= 3 (N, C, spatial dims...), got shape ", c.input_shape(i).str());
  if (r - 2 > nn::kMaxSpatialDims)
    c.error("input ", i, " has ", r - 2, " spatial dims; at most ", nn::kMaxSpatialDims, " are supported");
  return r - 2;
}

// A quantization parameter (scale or zero point): a scalar (rank 0, or rank 1 with one element) or, where
// `per_channel` is given, a 1-D tensor of that many elements.
void expect_quant_param(const InferContext& c, size_t i, const Dim* per_channel, const char* what) {
  const Shape& s = c.input_shape(i);
  if (!s.rank_known()) return;
  if (s.rank() == 0 || (s.rank() == 1 && dim_is(s[0], 1))) return;
  if (per_channel && s.rank() == 1) {
    expect_dims_equal(c, s[0], *per_channel, (std::string(what) + " must have one value per channel").c_str());
    return;
  }
  c.error(what, " (input ", i, ") must be a scalar", per_channel ? " or a 1-D tensor with one value per channel" : "",
          ", got shape ", s.str());
}

// Checks that `from` broadcasts one way (numpy rules, never growing `to`) to `to`.
void expect_unidirectional(const InferContext& c, const Shape& from, const Shape& to, const char* what) {
  if (!from.rank_known() || !to.rank_known()) return;
  if (from.rank() > to.rank()) c.error(what, " of shape ", from.str(), " cannot broadcast to ", to.str());
  size_t off = to.rank() - from.rank();
  for (size_t i = 0; i < from.rank(); ++i) {
    const Dim &f = from[i], &t = to[off + i];
    if (f.is_const() && t.is_const() && f.value() != 1 && f.value() != t.value())
      c.error(what, " of shape ", from.str(), " cannot broadcast to ", to.str());
  }
}

// A matrix-product zero point or scale: scalar, 1-D per row of A ([M] -> [M, 1]) or per column of B ([N]), or of
// the operand's rank with a 1 in the reduced dim.
Shape matmul_param_shape(const Shape& s, bool is_a) {
  if (!s.rank_known() || s.rank() != 1 || dim_is(s[0], 1)) return s;
  return is_a ? Shape({s[0], Dim(1)}) : Shape({Dim(1), s[0]});
}

// ---- convolutions

// int8 hints of Conv/FusedConv/MatMul/Gemm/FusedMatMul (issue 28): the scale and zero point of input X's u8 grid
// (quant_x_scale 0: not calibrated; -1: each row quantized symmetrically at run time, products only) and,
// optionally, the weights' s8 scales, one per output channel (or one for all). They change nothing at fp32 or bf16; at int8 the kernel quantizes X to that grid and multiplies u8 x s8
// (kernels/onednn/int8.cpp).
// Inside an int8 executor, FusedConv/FusedMatMul may also pass u8 activations (runtime/int8_links.h): a node with
// quant_y_scale > 0 writes its output as u8 on that grid (quant_y_zero_point), a node with quant_x_scale > 0
// may read X as u8 already on its grid, and one with quant_sum_scale > 0 its residual Sum as u8 on that grid.
void quant_attrs(OpSchema& s) {
  s.attr("quant_x_scale", AttrKind::Float, 0.0)
      .attr("quant_x_zero_point", AttrKind::Int, int64_t(0))
      .attr("quant_w_scales", AttrKind::Floats, std::vector<double>{})
      .attr("quant_y_scale", AttrKind::Float, 0.0)
      .attr("quant_y_zero_point", AttrKind::Int, int64_t(0))
      // A linked residual: Sum (input 3) arrives u8 on this grid (quant_sum_scale > 0; FusedConv only).
      .attr("quant_sum_scale", AttrKind::Float, 0.0)
      .attr("quant_sum_zero_point", AttrKind::Int, int64_t(0))
      // A bf16 link (runtime/bf16_links.h; bf16 executors, FusedConv): 1 writes the output as bf16. Such a
      // node's readers may take X and the residual Sum as bf16 whatever their weights' type.
      .attr("bf16_y", AttrKind::Int, int64_t(0))
      // A per-node precision ("fp32", "bf16"; "" = the model's) and why: set by cuvil.quantize's fallback and by
      // precision="auto". It only raises a node's precision above the executor's, never lowers it; except "int8"
      // with the reason kernels/qdq_precision.h's kQdqReason (fold-quantize-dequantize: a QDQ model's own int8 layer),
      // which runs int8 at fp32 too (runtime/kernel_selection.cpp).
      .attr("precision", AttrKind::String, std::string())
      .attr("precision_reason", AttrKind::String, std::string());
}

// The float type of a FusedConv/FusedMatMul (its weights'), checking X: that type, or u8 on X's int8 grid.
// X may also be bf16 with f32 weights (a bf16 link, runtime/bf16_links.h).
DType linked_float_type(const InferContext& c) {
  bool u8_x = c.input_dtype(0) == DType::u8 && c.has("quant_x_scale") && c.f("quant_x_scale") > 0;
  bool bf16_x = c.input_dtype(0) == DType::bf16 && c.input_dtype(1) == DType::f32;
  if (!u8_x && !bf16_x) infer::expect_same_dtype(c, 0, 1);
  return c.input_dtype(1);
}
// The output type: u8 when the node writes its int8 grid (quant_y_scale > 0), bf16 when it writes a bf16 link
// (bf16_y), else the float type.
DType linked_output_type(const InferContext& c, DType float_type) {
  if (c.has("bf16_y") && c.i("bf16_y") != 0) return DType::bf16;
  return c.has("quant_y_scale") && c.f("quant_y_scale") > 0 ? DType::u8 : float_type;
}

void conv_attrs(OpSchema& s) {
  s.attr("auto_pad", AttrKind::String, "NOTSET")
      .attr("dilations", AttrKind::Ints, kNoInts)
      .attr("group", AttrKind::Int, int64_t(1))
      .attr("kernel_shape", AttrKind::Ints, kNoInts)
      .attr("pads", AttrKind::Ints, kNoInts)
      .attr("strides", AttrKind::Ints, kNoInts);
}

int64_t read_group(const InferContext& c) {
  int64_t g = c.i("group");
  if (g < 1) c.error("group must be >= 1, got ", g);
  return g;
}

// The kernel size along spatial dim i: the weights' dim, checked against kernel_shape when both are known.
Dim kernel_dim(const InferContext& c, const Window& w, const Shape& ws, size_t i) {
  const Dim& k = ws[2 + i];
  if (w.kernel.empty()) return k;
  if (k.is_const() && k.value() != w.kernel[i])
    c.error("kernel_shape[", i, "] = ", w.kernel[i], " but the weights have ", k.value());
  return w.kernel[i];
}

// Output shape of a forward convolution of input xi by weights wi: [N, M, spatial...]. `xs` is the input's shape in
// [N, C, spatial...] order (the input's own shape unless it is channels-last).
Shape conv_shape(InferContext& c, size_t xi, size_t wi, const Shape& xs) {
  size_t S = spatial_rank(c, xi);
  if (c.input_rank(wi) != S + 2)
    c.error("weights (input ", wi, ") must have rank ", S + 2, " like the input, got shape ",
            c.input_shape(wi).str());
  Window w = nn::read_window(c, S, WindowAttrs{});
  int64_t group = read_group(c);
  const Shape& ws = c.input_shape(wi);
  if (xs[1].is_const() && ws[1].is_const() && xs[1].value() != ws[1].value() * group)
    c.error("input has ", xs[1].value(), " channels but the weights expect ", ws[1].value(), " x group ", group);
  if (ws[0].is_const() && ws[0].value() % group != 0)
    c.error("the weights' ", ws[0].value(), " output channels are not divisible by group ", group);
  std::vector<Dim> out{xs[0], ws[0]};
  for (size_t i = 0; i < S; ++i) {
    Dim k = kernel_dim(c, w, ws, i);
    if (k.is_const() && k.value() < 1) c.error("kernel dim ", i, " must be >= 1, got ", k.value());
    out.push_back(nn::window_out_dim(c, w, i, xs[2 + i], k));
  }
  return Shape(out);
}

void expect_bias(const InferContext& c, size_t bi, const Dim& m) {
  if (!c.has_input(bi)) return;
  const Shape& b = c.input_shape(bi);
  if (!b.rank_known()) return;
  if (b.rank() != 1) c.error("bias (input ", bi, ") must be 1-D, got shape ", b.str());
  expect_dims_equal(c, b[0], m, "bias must have one value per output channel");
}

// ---- pooling

void pool_common_attrs(OpSchema& s) {
  s.attr("auto_pad", AttrKind::String, "NOTSET")
      .attr("ceil_mode", AttrKind::Int, int64_t(0))
      .required_attr("kernel_shape", AttrKind::Ints)
      .attr("pads", AttrKind::Ints, kNoInts)
      .attr("strides", AttrKind::Ints, kNoInts);
}

// `xs`: the input's shape in [N, C, spatial...] order.
Shape pool_shape(InferContext& c, bool has_dilations, const Shape& xs) {
  size_t S = spatial_rank(c, 0);
  WindowAttrs which;
  which.has_dilations = has_dilations;
  which.has_ceil_mode = true;
  which.kernel_required = true;
  Window w = nn::read_window(c, S, which);
  std::vector<Dim> out{xs[0], xs[1]};
  for (size_t i = 0; i < S; ++i) out.push_back(nn::window_out_dim(c, w, i, xs[2 + i], w.kernel[i]));
  return Shape(out);
}

// Reads the Cuvil `channels_last` attribute (0 or 1); only 4-D and 5-D activations take it.
bool read_channels_last(const InferContext& c) {
  int64_t v = c.i("channels_last");
  if (v != 0 && v != 1) c.error("channels_last must be 0 or 1, got ", v);
  if (v && c.input_rank(0) < 3) c.error("channels_last needs an input with spatial dims, got shape ", c.input_shape(0).str());
  return v != 0;
}

// The input's shape in [N, C, spatial...] order.
Shape channels_first_shape(const InferContext& c, bool channels_last) {
  const Shape& xs = c.input_shape(0);
  return channels_last ? Shape(layout::to_channels_first(xs.dims())) : xs;
}

Shape maybe_channels_last(const Shape& s, bool channels_last) {
  return channels_last ? Shape(layout::to_channels_last(s.dims())) : s;
}

void infer_global_pool(InferContext& c) {
  expect_float(c, 0);
  size_t r = c.input_rank(0);
  if (r < 2) c.error("input must have rank >= 2 (N, C, spatial dims...), got shape ", c.input_shape(0).str());
  bool cl = read_channels_last(c);
  Shape xs = channels_first_shape(c, cl);
  std::vector<Dim> out(xs.dims().begin(), xs.dims().begin() + 2);
  out.resize(r, Dim(1));
  c.set_output(0, c.input_dtype(0), maybe_channels_last(Shape(out), cl));
}

// ---- matrix products

// numpy matmul: 1-D operands are promoted to matrices and their added dim removed from the result.
Shape matmul_shape(const InferContext& c, size_t ai, size_t bi) {
  const Shape &a = c.input_shape(ai), &b = c.input_shape(bi);
  if (!a.rank_known() || !b.rank_known()) return Shape::unknown_rank();
  if (a.rank() == 0 || b.rank() == 0)
    c.error("matrix product operands must have rank >= 1, got shapes ", a.str(), " and ", b.str());
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  if (ad.size() == 1) ad.insert(ad.begin(), Dim(1));
  if (bd.size() == 1) bd.push_back(Dim(1));
  const Dim &ka = ad[ad.size() - 1], &kb = bd[bd.size() - 2];
  if (ka.is_const() && kb.is_const() && ka.value() != kb.value())
    c.error("inner dims differ: A ", a.str(), " has K = ", ka.value(), ", B ", b.str(), " has K = ", kb.value());
  Shape batch = infer::broadcast(c, Shape(std::vector<Dim>(ad.begin(), ad.end() - 2)),
                                 Shape(std::vector<Dim>(bd.begin(), bd.end() - 2)));
  std::vector<Dim> out = batch.dims();
  if (a.rank() > 1) out.push_back(ad[ad.size() - 2]);
  if (b.rank() > 1) out.push_back(bd.back());
  return Shape(out);
}

void expect_matmul_param(const InferContext& c, size_t pi, size_t oi, bool is_a, const char* what) {
  if (!c.has_input(pi)) return;
  expect_unidirectional(c, matmul_param_shape(c.input_shape(pi), is_a), c.input_shape(oi), what);
}

// ---- quantization

// Checks QuantizeLinear/DequantizeLinear's scale (input 1) and zero point (input 2) against x's shape and axis.
void expect_axis_params(InferContext& c) {
  const Shape& x = c.input_shape(0);
  const Shape& s = c.input_shape(1);
  if (!s.rank_known() || !x.rank_known()) return;
  bool per_axis = !(s.rank() == 0 || (s.rank() == 1 && dim_is(s[0], 1)));
  if (per_axis) {
    if (s.rank() != 1) c.error("scale must be a scalar or 1-D, got shape ", s.str());
    int64_t axis = infer::normalize_axis(c, c.i("axis"), int64_t(x.rank()));
    expect_dims_equal(c, s[0], x[size_t(axis)], "a 1-D scale must have one value per element of x's axis");
  }
  if (c.has_input(2) && c.input_shape(2).rank_known() && c.input_shape(2) != s &&
      !(c.input_shape(2).numel() == Dim(1) && s.numel() == Dim(1)))
    c.error("zero point shape ", c.input_shape(2).str(), " differs from scale shape ", s.str());
}

}  // namespace

CUVIL_DEFINE_OP(Conv) {
  s.inputs(2, 3).outputs(1, 1);
  conv_attrs(s);
  quant_attrs(s);  // hints from a QDQ model, carried into FusedConv
  s.infer_with([](InferContext& c) {
    expect_float(c, 0);
    infer::expect_same_dtype(c, 0, 1);
    if (c.has_input(2)) infer::expect_same_dtype(c, 0, 2);
    Shape out = conv_shape(c, 0, 1, c.input_shape(0));
    expect_bias(c, 2, out[1]);
    c.set_output(0, c.input_dtype(0), out);
  });
}

CUVIL_DEFINE_OP(ConvTranspose) {
  s.inputs(2, 3).outputs(1, 1);
  conv_attrs(s);
  s.attr("output_padding", AttrKind::Ints, kNoInts).attr("output_shape", AttrKind::Ints, kNoInts);
  s.infer_with([](InferContext& c) {
    expect_float(c, 0);
    infer::expect_same_dtype(c, 0, 1);
    if (c.has_input(2)) infer::expect_same_dtype(c, 0, 2);
    size_t S = spatial_rank(c, 0);
    if (c.input_rank(1) != S + 2)
      c.error("weights must have rank ", S + 2, " like the input, got shape ", c.input_shape(1).str());
    Window w = nn::read_window(c, S, WindowAttrs{});
    int64_t group = read_group(c);
    const Shape &xs = c.input_shape(0), &ws = c.input_shape(1);
    expect_dims_equal(c, xs[1], ws[0], "the weights' first dim must equal the input's channels");
    if (ws[0].is_const() && ws[0].value() % group != 0)
      c.error("the weights' ", ws[0].value(), " input channels are not divisible by group ", group);
    std::vector<int64_t> opad = c.ints("output_padding");
    if (opad.empty()) opad.assign(S, 0);
    if (opad.size() != S) c.error("output_padding has ", opad.size(), " values; expected ", S);
    for (int64_t p : opad)
      if (p < 0) c.error("output_padding must be >= 0, got ", p);
    std::vector<int64_t> oshape = c.ints("output_shape");
    if (oshape.size() == S + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (!oshape.empty() && oshape.size() != S)
      c.error("output_shape has ", oshape.size(), " values; expected ", S, " (or ", S + 2, ")");
    for (int64_t d : oshape)
      if (d < 0) c.error("output_shape values must be >= 0, got ", d);
    Dim m = ws[1] * group;
    std::vector<Dim> out{xs[0], m};
    for (size_t i = 0; i < S; ++i) {
      Dim k = kernel_dim(c, w, ws, i);
      if (k.is_const() && k.value() < 1) c.error("kernel dim ", i, " must be >= 1, got ", k.value());
      const Dim& in = xs[2 + i];
      Dim o;
      if (!oshape.empty()) o = oshape[i];
      else if (w.same()) o = in * w.strides[i];
      else
        o = (in - 1) * w.strides[i] + opad[i] + (k - 1) * w.dilations[i] + 1 - w.pads[i] - w.pads[S + i];
      if (o.is_const() && o.value() < 0) c.error("spatial dim ", i, " of the output would be ", o.value());
      out.push_back(o);
    }
    expect_bias(c, 2, m);
    c.set_output(0, c.input_dtype(0), Shape(out));
  });
}

CUVIL_DEFINE_OP(ConvInteger) {
  s.inputs(2, 4).outputs(1, 1);
  conv_attrs(s);
  s.infer_with([](InferContext& c) {
    expect_q8(c, 0);
    expect_q8(c, 1);
    Shape out = conv_shape(c, 0, 1, c.input_shape(0));
    if (c.has_input(2)) {
      infer::expect_same_dtype(c, 0, 2);
      expect_quant_param(c, 2, nullptr, "x_zero_point");
    }
    if (c.has_input(3)) {
      infer::expect_same_dtype(c, 1, 3);
      expect_quant_param(c, 3, &out[1], "w_zero_point");
    }
    c.set_output(0, DType::i32, out);
  });
}

CUVIL_DEFINE_OP(QLinearConv) {
  // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
  s.inputs(8, 9).outputs(1, 1);
  conv_attrs(s);
  s.attr("channels_last", AttrKind::Int, int64_t(0));  // Cuvil's: x and y [N, spatial..., C] (assign-layouts)
  s.infer_with([](InferContext& c) {
    expect_qlinear_dtypes(c);
    bool cl = read_channels_last(c);
    Shape out = conv_shape(c, 0, 3, channels_first_shape(c, cl));
    expect_quant_param(c, 1, nullptr, "x_scale");
    expect_quant_param(c, 2, nullptr, "x_zero_point");
    expect_quant_param(c, 4, &out[1], "w_scale");
    expect_quant_param(c, 5, &out[1], "w_zero_point");
    expect_quant_param(c, 6, nullptr, "y_scale");
    expect_quant_param(c, 7, nullptr, "y_zero_point");
    if (c.has_input(8)) {
      infer::expect_dtype(c, 8, {DType::i32});
      expect_bias(c, 8, out[1]);
    }
    c.set_output(0, c.input_dtype(7), maybe_channels_last(out, cl));
  });
}

CUVIL_DEFINE_OP(MaxPool) {
  s.inputs(1, 1).outputs(1, 2);
  pool_common_attrs(s);
  s.attr("dilations", AttrKind::Ints, kNoInts).attr("storage_order", AttrKind::Int, int64_t(0));
  s.attr("channels_last", AttrKind::Int, int64_t(0));
  s.infer_with([](InferContext& c) {
    infer::expect_dtype(c, 0, {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8, DType::u8});
    int64_t so = c.i("storage_order");
    if (so != 0 && so != 1) c.error("storage_order must be 0 or 1, got ", so);
    bool cl = read_channels_last(c);
    if (cl && c.num_outputs() > 1) c.error("channels_last MaxPool gives no indices output");
    Shape out = maybe_channels_last(pool_shape(c, true, channels_first_shape(c, cl)), cl);
    c.set_output(0, c.input_dtype(0), out);
    if (c.num_outputs() > 1) c.set_output(1, DType::i64, out);
  });
}

CUVIL_DEFINE_OP(AveragePool) {
  s.inputs(1, 1).outputs(1, 1);
  pool_common_attrs(s);
  s.attr("count_include_pad", AttrKind::Int, int64_t(0)).attr("channels_last", AttrKind::Int, int64_t(0));
  s.attr("dilations", AttrKind::Ints, kNoInts);  // opset 19
  s.infer_with([](InferContext& c) {
    expect_float(c, 0);
    int64_t cip = c.i("count_include_pad");
    if (cip != 0 && cip != 1) c.error("count_include_pad must be 0 or 1, got ", cip);
    bool cl = read_channels_last(c);
    c.set_output(0, c.input_dtype(0), maybe_channels_last(pool_shape(c, true, channels_first_shape(c, cl)), cl));
  });
}

CUVIL_DEFINE_OP(GlobalAveragePool) {
  s.attr("channels_last", AttrKind::Int, int64_t(0)).inputs(1, 1).outputs(1, 1).infer_with(infer_global_pool);
}

CUVIL_DEFINE_OP(GlobalMaxPool) {
  s.attr("channels_last", AttrKind::Int, int64_t(0)).inputs(1, 1).outputs(1, 1).infer_with(infer_global_pool);
}

CUVIL_DEFINE_OP(MaxUnpool) {
  // X, I, output_shape
  s.inputs(2, 3).outputs(1, 1);
  s.required_attr("kernel_shape", AttrKind::Ints)
      .attr("pads", AttrKind::Ints, kNoInts)
      .attr("strides", AttrKind::Ints, kNoInts);
  s.infer_with([](InferContext& c) {
    expect_float(c, 0);
    infer::expect_dtype(c, 1, {DType::i64});
    size_t S = spatial_rank(c, 0);
    const Shape &xs = c.input_shape(0), &is = c.input_shape(1);
    if (is.rank_known()) {
      if (is.rank() != xs.rank()) c.error("indices shape ", is.str(), " differs from the input's ", xs.str());
      for (size_t d = 0; d < xs.rank(); ++d) expect_dims_equal(c, is[d], xs[d], "indices shape differs from input's");
    }
    WindowAttrs which;
    which.has_auto_pad = false;
    which.has_dilations = false;
    which.kernel_required = true;
    Window w = nn::read_window(c, S, which);
    std::vector<Dim> natural{xs[0], xs[1]};
    for (size_t i = 0; i < S; ++i) {
      Dim o = (xs[2 + i] - 1) * w.strides[i] + w.kernel[i] - w.pads[i] - w.pads[S + i];
      if (o.is_const() && o.value() < 0) c.error("spatial dim ", i, " of the output would be ", o.value());
      natural.push_back(o);
    }
    if (!c.has_input(2)) {
      c.set_output(0, c.input_dtype(0), Shape(natural));
      return;
    }
    // An explicit output_shape may only pad the unpooled result at the end of each dim.
    infer::expect_dtype(c, 2, {DType::i64});
    const Shape& os = c.input_shape(2);
    if (os.rank_known() && (os.rank() != 1 || (os[0].is_const() && os[0].value() != int64_t(xs.rank()))))
      c.error("output_shape must be a 1-D tensor of ", xs.rank(), " values, got shape ", os.str());
    const std::vector<Dim>* v = c.input_dims_value(2);
    if (!v) {
      c.set_output(0, c.input_dtype(0), infer::fresh_shape(c, xs.rank()));
      return;
    }
    if (v->size() != xs.rank()) c.error("output_shape has ", v->size(), " values; expected ", xs.rank());
    for (size_t d = 0; d < v->size(); ++d) {
      const Dim &o = (*v)[d], &n = natural[d];
      if (o.is_const() && n.is_const() && o.value() < n.value())
        c.error("output_shape[", d, "] = ", o.value(), " is smaller than the unpooled size ", n.value());
    }
    c.set_output(0, c.input_dtype(0), Shape(*v));
  });
}

CUVIL_DEFINE_OP(Gemm) {
  s.inputs(2, 3).outputs(1, 1);
  s.attr("alpha", AttrKind::Float, 1.0)
      .attr("beta", AttrKind::Float, 1.0)
      .attr("transA", AttrKind::Int, int64_t(0))
      .attr("transB", AttrKind::Int, int64_t(0));
  quant_attrs(s);
  s.infer_with([](InferContext& c) {
    expect_gemm_type(c, 0);
    infer::expect_same_dtype(c, 0, 1);
    if (c.has_input(2)) infer::expect_same_dtype(c, 0, 2);
    if (c.input_rank(0) != 2 || c.input_rank(1) != 2)
      c.error("A and B must be matrices, got shapes ", c.input_shape(0).str(), " and ", c.input_shape(1).str());
    bool ta = c.i("transA") != 0, tb = c.i("transB") != 0;
    const Shape &a = c.input_shape(0), &b = c.input_shape(1);
    Dim m = a[ta ? 1 : 0], ka = a[ta ? 0 : 1], kb = b[tb ? 1 : 0], n = b[tb ? 0 : 1];
    if (ka.is_const() && kb.is_const() && ka.value() != kb.value())
      c.error("inner dims differ: A ", a.str(), (ta ? " (transposed)" : ""), " and B ", b.str(),
              (tb ? " (transposed)" : ""));
    Shape out({m, n});
    if (c.has_input(2)) expect_unidirectional(c, c.input_shape(2), out, "C");
    if (is_integer(c.input_dtype(0))) {
      double al = c.f("alpha"), be = c.f("beta");
      auto integral = [](double v) { return std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9e18; };
      if (!integral(al) || !integral(be))
        c.error("alpha and beta must be integral for integer inputs, got ", al, " and ", be);
    }
    c.set_output(0, c.input_dtype(0), out);
  });
}

CUVIL_DEFINE_OP(MatMul) {
  quant_attrs(s);
  s.inputs(2, 2).outputs(1, 1).infer_with([](InferContext& c) {
    expect_gemm_type(c, 0);
    infer::expect_same_dtype(c, 0, 1);
    c.set_output(0, c.input_dtype(0), matmul_shape(c, 0, 1));
  });
}

// A, B, a_zero_point, b_zero_point -> int32 sums, as ONNX. Cuvil's form also takes scale, scale2 and bias (inputs
// 4-6), which only fuse-matmul writes (quantize_dynamic's Cast -> Mul by a_scale * b_scale -> Add after the
// product; ONNX Runtime's MatMulIntegerToFloat): Y = float(sums) * (scale * scale2) + bias in f32, scale and scale2
// f32 scalars or [N] (one per output column) multiplied in f32 first as that Mul did, bias f32 [N].
CUVIL_DEFINE_OP(MatMulInteger) {
  s.inputs(2, 7).outputs(1, 1).infer_with([](InferContext& c) {
    expect_q8(c, 0);
    expect_q8(c, 1);
    Shape out = matmul_shape(c, 0, 1);
    if (c.has_input(2)) infer::expect_same_dtype(c, 0, 2);
    if (c.has_input(3)) infer::expect_same_dtype(c, 1, 3);
    expect_matmul_param(c, 2, 0, true, "a_zero_point");
    expect_matmul_param(c, 3, 1, false, "b_zero_point");
    bool to_float = c.has_input(4) || c.has_input(5) || c.has_input(6);
    if (to_float) {
      if (!c.has_input(4)) c.error("scale (input 4) is required with scale2 or bias");
      if (c.input_shape(1).rank_known() && c.input_shape(1).rank() < 2)
        c.error("B must have rank >= 2 with a scale, got shape ", c.input_shape(1).str());
    }
    for (size_t i : {size_t(4), size_t(5), size_t(6)}) {
      if (!c.has_input(i)) continue;
      infer::expect_dtype(c, i, {DType::f32});
      const Shape& p = c.input_shape(i);
      if (!p.rank_known()) continue;
      bool one = p.rank() == 0 || (p.rank() == 1 && dim_is(p[0], 1));
      if (i == 6 || !one) {
        if (p.rank() != 1) c.error(i == 6 ? "bias" : "scale", " must be 1-D with one value per column, got ", p.str());
        if (out.rank_known()) expect_dims_equal(c, p[0], out[out.rank() - 1], "one value per output column");
      }
    }
    c.set_output(0, to_float ? DType::f32 : DType::i32, out);
  });
}

CUVIL_DEFINE_OP(QLinearMatMul) {
  // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
  s.inputs(8, 8).outputs(1, 1).infer_with([](InferContext& c) {
    expect_qlinear_dtypes(c);
    Shape out = matmul_shape(c, 0, 3);
    expect_matmul_param(c, 1, 0, true, "a_scale");
    expect_matmul_param(c, 2, 0, true, "a_zero_point");
    expect_matmul_param(c, 4, 3, false, "b_scale");
    expect_matmul_param(c, 5, 3, false, "b_zero_point");
    expect_quant_param(c, 6, nullptr, "y_scale");
    expect_quant_param(c, 7, nullptr, "y_zero_point");
    c.set_output(0, c.input_dtype(7), out);
  });
}

CUVIL_DEFINE_OP(Einsum) {
  s.inputs(1, -1).outputs(1, 1);
  s.required_attr("equation", AttrKind::String);
  s.infer_with([](InferContext& c) {
    infer::expect_dtype(c, 0, {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8, DType::i16, DType::i32,
                               DType::i64, DType::u8, DType::u16, DType::u32, DType::u64});
    std::vector<size_t> ranks;
    for (size_t k = 0; k < c.num_inputs(); ++k) {
      infer::expect_same_dtype(c, 0, k);
      ranks.push_back(c.input_rank(k));
    }
    nn::EinsumSpec spec = nn::parse_einsum(c, c.s("equation"), ranks);
    // Each label's size: equal across operands, except that 1 broadcasts (as in numpy).
    std::vector<std::optional<Dim>> size(size_t(spec.num_labels));
    for (size_t k = 0; k < ranks.size(); ++k) {
      for (size_t d = 0; d < ranks[k]; ++d) {
        const Dim& x = c.input_shape(k)[d];
        auto& cur = size[size_t(spec.inputs[k][d])];
        if (!cur || dim_is(*cur, 1)) cur = x;
        else if (dim_is(x, 1) || x == *cur) continue;
        else if (cur->is_const() && x.is_const())
          c.error("equation '", c.s("equation"), "': input ", k, " dim ", d, " is ", x.value(),
                  " but that label has size ", cur->value(), " elsewhere");
        else if (!cur->is_const() && x.is_const()) cur = x;
      }
    }
    std::vector<Dim> out;
    for (int l : spec.output) out.push_back(*size[size_t(l)]);
    c.set_output(0, c.input_dtype(0), Shape(out));
  });
}

CUVIL_DEFINE_OP(Det) {
  s.inputs(1, 1).outputs(1, 1).infer_with([](InferContext& c) {
    expect_float(c, 0);
    size_t r = c.input_rank(0);
    const Shape& x = c.input_shape(0);
    if (r < 2) c.error("input must have rank >= 2 ([*, M, M]), got shape ", x.str());
    expect_dims_equal(c, x[r - 2], x[r - 1], "the matrices must be square");
    c.set_output(0, c.input_dtype(0), Shape(std::vector<Dim>(x.dims().begin(), x.dims().end() - 2)));
  });
}

CUVIL_DEFINE_OP(QuantizeLinear) {
  // x, y_scale, y_zero_point
  s.inputs(2, 3).outputs(1, 1).attr("axis", AttrKind::Int, int64_t(1));
  s.attr("saturate", AttrKind::Int, int64_t(1));  // float8 outputs: clamp (1) or overflow to inf/NaN (0)
  s.infer_with([](InferContext& c) {
    infer::expect_dtype(c, 0, {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32});
    infer::expect_dtype(c, 1, {DType::f32});
    DType out = DType::u8;
    if (c.has_input(2)) {  // 16-bit grids since opset 21, the low-precision ones since 19-25
      if (!is_low_precision(c.input_dtype(2)))
        infer::expect_dtype(c, 2, {DType::u8, DType::i8, DType::u16, DType::i16});
      out = c.input_dtype(2);
    }
    expect_axis_params(c);
    c.set_output(0, out, c.input_shape(0));
  });
}

CUVIL_DEFINE_OP(DequantizeLinear) {
  // x, x_scale, x_zero_point
  s.inputs(2, 3).outputs(1, 1).attr("axis", AttrKind::Int, int64_t(1)).allow_inplace(0, 0);
  s.infer_with([](InferContext& c) {
    // Low-precision x (opsets 19-25) dequantizes to its scale's type, f32 or a 16-bit float.
    bool low = is_low_precision(c.input_dtype(0));
    if (!low) infer::expect_dtype(c, 0, {DType::u8, DType::i8, DType::i32, DType::u16, DType::i16});  // 16-bit: 21
    if (low) infer::expect_dtype(c, 1, {DType::f32, DType::f16, DType::bf16});
    else infer::expect_dtype(c, 1, {DType::f32});
    if (c.has_input(2)) infer::expect_same_dtype(c, 0, 2);
    expect_axis_params(c);
    c.set_output(0, low ? c.input_dtype(1) : DType::f32, c.input_shape(0));
  });
}

CUVIL_DEFINE_OP(DynamicQuantizeLinear) {
  // x -> y, y_scale, y_zero_point
  s.inputs(1, 1).outputs(3, 3).infer_with([](InferContext& c) {
    infer::expect_dtype(c, 0, {DType::f32});
    c.set_output(0, DType::u8, c.input_shape(0));
    c.set_output(1, DType::f32, Shape());
    c.set_output(2, DType::u8, Shape());
  });
}

// ---- fused ops (family "fused" in ops.def; defined here because they share the conv and matmul shape rules)

namespace {

// The optional residual input si must have the output's dtype and shape exactly (no broadcasting).
void expect_sum_input(const InferContext& c, size_t si, const Shape& out) {
  if (!c.has_input(si)) return;
  // the float type (X may be u8 in an int8 executor), or u8 on the linked residual's grid
  bool u8_sum = c.input_dtype(si) == DType::u8 && c.has("quant_sum_scale") && c.f("quant_sum_scale") > 0;
  bool bf16_sum = c.input_dtype(si) == DType::bf16 && c.input_dtype(1) == DType::f32;  // a bf16 link
  if (!u8_sum && !bf16_sum) infer::expect_same_dtype(c, 1, si);
  const Shape& sum = c.input_shape(si);
  if (!sum.rank_known()) return;
  if (sum.rank() != out.rank()) c.error("Sum (input ", si, ") must have the output's shape ", out.str(), ", got ", sum.str());
  for (size_t d = 0; d < out.rank(); ++d) expect_dims_equal(c, sum[d], out[d], "Sum must have the output's shape");
}

}  // namespace

// FusedConv(X, W, B?, Sum?) = activation(Conv(X, W, B) + Sum). With channels_last, X and Y are [N, spatial..., C]
// (W stays [M, C/group, k...]); Sum always has Y's shape.
CUVIL_DEFINE_OP(FusedConv) {
  s.inputs(2, 4).outputs(1, 1);
  conv_attrs(s);
  nn::activation_attrs(s);
  quant_attrs(s);
  s.attr("channels_last", AttrKind::Int, int64_t(0));
  s.allow_inplace(3, 0);
  s.infer_with([](InferContext& c) {
    DType ft = linked_float_type(c);
    expect_float(c, 1);
    if (c.has_input(2)) infer::expect_same_dtype(c, 1, 2);
    nn::read_activation(c);
    bool cl = read_channels_last(c);
    Shape out = conv_shape(c, 0, 1, channels_first_shape(c, cl));
    expect_bias(c, 2, out[1]);
    out = maybe_channels_last(out, cl);
    expect_sum_input(c, 3, out);
    c.set_output(0, linked_output_type(c, ft), out);
  });
}

// FusedMatMul(A, B, Bias?, Sum?) = activation(alpha * MatMul(A, transB ? B^T : B) + Bias + Sum), where B^T swaps
// B's last two dims, Bias is 1-D with one value per output column and Sum has the output's shape. A and B have
// rank >= 2.
CUVIL_DEFINE_OP(FusedMatMul) {
  s.inputs(2, 4).outputs(1, 1);
  s.attr("alpha", AttrKind::Float, 1.0).attr("transB", AttrKind::Int, int64_t(0));
  nn::activation_attrs(s);
  quant_attrs(s);
  s.allow_inplace(3, 0);
  s.infer_with([](InferContext& c) {
    DType ft = linked_float_type(c);
    infer::expect_dtype(c, 1, {DType::f16, DType::bf16, DType::f32, DType::f64});
    nn::read_activation(c);
    if (c.input_rank(0) < 2 || c.input_rank(1) < 2)
      c.error("A and B must have rank >= 2, got shapes ", c.input_shape(0).str(), " and ", c.input_shape(1).str());
    int64_t tb = c.i("transB");
    if (tb != 0 && tb != 1) c.error("transB must be 0 or 1, got ", tb);
    Shape b = c.input_shape(1);
    if (tb) std::swap(b.dims()[b.rank() - 1], b.dims()[b.rank() - 2]);
    const Shape& a = c.input_shape(0);
    const Dim &ka = a[a.rank() - 1], &kb = b[b.rank() - 2];
    if (ka.is_const() && kb.is_const() && ka.value() != kb.value())
      c.error("inner dims differ: A ", a.str(), " has K = ", ka.value(), ", B", (tb ? "^T " : " "), b.str(), " has K = ",
              kb.value());
    Shape batch = infer::broadcast(c, Shape(std::vector<Dim>(a.dims().begin(), a.dims().end() - 2)),
                                   Shape(std::vector<Dim>(b.dims().begin(), b.dims().end() - 2)));
    std::vector<Dim> od = batch.dims();
    od.push_back(a[a.rank() - 2]);
    od.push_back(b[b.rank() - 1]);
    Shape out(od);
    if (c.has_input(2)) {
      infer::expect_same_dtype(c, 1, 2);
      expect_bias(c, 2, out[out.rank() - 1]);
    }
    expect_sum_input(c, 3, out);
    c.set_output(0, linked_output_type(c, ft), out);
  });
}

}  // namespace cuvil

namespace cuvil {

// RotaryEmbedding(X, cos_cache, sin_cache[, position_ids]) -> Y (ONNX opset 23). X is [batch, heads, seq, head]
// or [batch, seq, hidden] (hidden = num_heads * head); the caches are [batch, seq, rot/2], or [max_pos, rot/2]
// indexed by position_ids [batch, seq]. The first rotary_embedding_dim (0: all) channels of each head rotate, as
// halves or (interleaved=1) as even/odd pairs. Y has X's type.
CUVIL_DEFINE_OP(RotaryEmbedding) {
  s.inputs(3, 4)
      .attr("interleaved", AttrKind::Int, int64_t(0))
      .attr("num_heads", AttrKind::Int, int64_t(0))
      .attr("rotary_embedding_dim", AttrKind::Int, int64_t(0))
      .infer_with([](InferContext& c) {
        infer::expect_dtype(c, 0, {DType::f16, DType::bf16, DType::f32, DType::f64});
        infer::expect_same_dtype(c, 0, 1);
        infer::expect_same_dtype(c, 0, 2);
        if (c.has_input(3)) infer::expect_dtype(c, 3, {DType::i64});
        const Shape& x = c.input_shape(0);
        if (x.rank_known() && x.rank() != 3 && x.rank() != 4)
          c.error("input 0 must have rank 3 or 4, got ", x.str());
        if (x.rank_known() && x.rank() == 3 && c.i("num_heads") <= 0)
          c.error("a rank-3 input needs attribute 'num_heads' > 0");
        infer::same_as_input(c);
      });
}

}  // namespace cuvil
