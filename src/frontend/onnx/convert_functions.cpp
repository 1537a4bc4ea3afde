// ONNX ops that ONNX itself defines as functions of other ops (opsets 17-24), imported as those expansions: the
// passes and generated kernels then see ops they already fuse, and no op-table row or kernel is needed.
//
//   GroupNormalization-18/21  Reshape [N, G, -1] -> InstanceNormalization -> per-channel scale and bias (21) or
//                             per-group ones (18, as InstanceNormalization's own)
//   RMSNormalization-23       x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale, in stash_type (f32)
//   Swish-24                  x * sigmoid(alpha * x)
//   LpNormalization-1         Where(norm == 0, 0, x / norm), norm = ReduceL1|L2(x, axis, keepdims)
//   HannWindow, HammingWindow, BlackmanWindow-17  sums of cosines of 2 pi n / N (N - 1 when not periodic)
//   CenterCropPad-18          Slice of the centred window where the target is smaller, Pad (18, with axes) where
//                             it is larger
//   Attention-23/24           (3-D inputs split into heads) [past ++] K, V; K, V repeated for grouped heads;
//                             softcap(q k^T * scale) + mask (bool: -inf where false; padded to the keys' length)
//                             + causal bias (offset by the past length); softmax, rows masked whole giving 0; @ V.
//                             nonpad_kv_seqlen (24: per-row key lengths, causal offset per row) and sliding windows
//                             (25) are further additive -inf biases.
//   LpPool-18                 (prod(kernel) * AveragePool(|x|^p, count_include_pad=1))^(1/p): the windowed sum
//   CausalConvWithState       depthwise Conv over [past_state or zeros ++ input] [* Sigmoid]; present_state
//                             the last k-1 steps
//   SwiGLU                    A * sigmoid(alpha * A) * B
//   TensorScatter             ScatterElements at (write_indices[b] + step) [mod cache length] along axis
//   AffineGrid-20             normalized coordinates (Range) in homogeneous form @ theta^T, in f64
//   FlexAttention (preview)   softmax(score_mod((Q s)(K s)^T)) [prob_mod] V, s = sqrt(scale), in softmax_precision;
//                             the mod graphs as one-step Scan bodies
//   LinearAttention-26        a Scan over time of the state update (decay, delta rule) and read-out, in f32
//   MelWeightMatrix-17        triangular filters between mel-spaced bin edges, by Where over [bins, mels] grids
#include <cmath>
#include <limits>
#include <numbers>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/converter.h"
#include "ir/shape_inference.h"

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
  // A zero norm gives 0, not 0/0 (onnx's reference and function body since 1.23).
  Value* zero = scalar_like(c, 0.0, x, "zero");
  Value* is_zero = temp(c, OpKind::Equal, {norm, zero});
  c.emit_final(OpKind::Where, {is_zero, zero, temp(c, OpKind::Div, {x, norm})}, {});
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

// The element type of a value: graph inputs and constants carry theirs; others need the graph inferred so far
// (top-level graphs only; rare nodes, one inference pass). Unknown: nullopt.
std::optional<DType> dtype_now(ConvertContext& c, Value* v) {
  if (v->is_graph_input() || v->is_constant()) return v->dtype();
  if (!v->producer() || c.graph().parent()) return std::nullopt;
  infer_shapes(c.graph());
  return v->dtype();
}

Value* dim_of(ConvertContext& c, Value* v, int64_t axis) {
  return temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {v}), c.const_i64({axis}, "axis")});
}

void convert_attention(ConvertContext& c) {
  Value* q = required(c, 0, "Q");
  Value* k = required(c, 1, "K");
  Value* v = required(c, 2, "V");
  Value* mask = c.input(3);
  Value* past_k = c.input(4);
  Value* past_v = c.input(5);
  Value* nonpad = c.input(6);  // per batch row: how many keys are real (an external cache), the rest padding
  if (bool(past_k) != bool(past_v)) c.error("past_key and past_value must be given together");
  if (nonpad && past_k) c.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  bool causal = int_attr(c, "is_causal", 0) != 0;
  std::optional<int64_t> q_heads, kv_heads;
  if (c.has_attr("q_num_heads")) q_heads = int_attr(c, "q_num_heads", std::nullopt);
  if (c.has_attr("kv_num_heads")) kv_heads = int_attr(c, "kv_num_heads", std::nullopt);
  std::optional<double> scale;
  if (c.has_attr("scale")) scale = float_attr(c, "scale", 1.0);
  double softcap = float_attr(c, "softcap", 0.0);
  int64_t qk_mode = int_attr(c, "qk_matmul_output_mode", 0);
  c.take_attr("softmax_precision");  // Cuvil's Softmax computes 16-bit inputs in f32 already
  int64_t left = int_attr(c, "left_window_size", -1), right = int_attr(c, "right_window_size", -1);
  if (left < -1 || right < -1) c.error("window sizes must be -1 or >= 0");
  no_more_attrs(c);
  bool three_d = q_heads.has_value();
  if (three_d != kv_heads.has_value()) c.error("3-D inputs need both q_num_heads and kv_num_heads");
  auto heads = [&](Value* x, int64_t n) {
    Value* r = temp(c, OpKind::Reshape, {x, c.const_i64({0, 0, n, -1}, "heads")});
    return temp(c, OpKind::Transpose, {r}, {{"perm", Attribute(std::vector<int64_t>{0, 2, 1, 3})}});
  };
  if (three_d) {
    q = heads(q, *q_heads);
    k = heads(k, *kv_heads);
    v = heads(v, *kv_heads);
  }
  AttrMap axis2{{"axis", Attribute(int64_t(2))}};
  Value* present_k = past_k ? temp(c, OpKind::Concat, {past_k, k}, axis2) : k;
  Value* present_v = past_v ? temp(c, OpKind::Concat, {past_v, v}, axis2) : v;
  // Grouped heads: each K/V head serves q_heads / kv_heads query heads ([B, kvh, L, H] -> [B, qh, L, H]).
  bool same_heads = three_d ? *q_heads == *kv_heads : false;
  if (!three_d && q->is_graph_input() && k->is_graph_input() && q->shape().rank_known() && k->shape().rank_known() &&
      q->shape().rank() == 4 && k->shape().rank() == 4)
    same_heads = q->shape()[1] == k->shape()[1];
  Value* kk = present_k;
  Value* vv = present_v;
  if (!same_heads) {
    Value* qh = dim_of(c, q, 1);
    auto repeat = [&](Value* x) {
      Value* shape = temp(c, OpKind::Shape, {x});
      Value* b = temp(c, OpKind::Slice, {shape, c.const_i64({0}, "s0"), c.const_i64({1}, "e1")});
      Value* kvh = temp(c, OpKind::Slice, {shape, c.const_i64({1}, "s1"), c.const_i64({2}, "e2")});
      Value* lh = temp(c, OpKind::Slice, {shape, c.const_i64({2}, "s2"), c.const_i64({4}, "e4")});
      Value* reps = temp(c, OpKind::Div, {qh, kvh});
      Value* wide = temp(c, OpKind::Concat, {b, kvh, reps, lh}, {{"axis", Attribute(int64_t(0))}});
      Value* x5 = temp(c, OpKind::Unsqueeze, {x, c.const_i64({2}, "group")});
      Value* spread = temp(c, OpKind::Expand, {x5, wide});
      Value* merged = temp(c, OpKind::Concat, {b, qh, lh}, {{"axis", Attribute(int64_t(0))}});
      return temp(c, OpKind::Reshape, {spread, merged});
    };
    kk = repeat(present_k);
    vv = repeat(present_v);
  }
  Value* kt = temp(c, OpKind::Transpose, {kk}, {{"perm", Attribute(std::vector<int64_t>{0, 1, 3, 2})}});
  Value* qk = temp(c, OpKind::MatMul, {q, kt});
  if (scale) {
    qk = temp(c, OpKind::Mul, {qk, scalar_like(c, *scale, qk, "scale")});
  } else {
    Value* hs = temp(c, OpKind::CastLike, {dim_of(c, q, 3), qk});
    qk = temp(c, OpKind::Div, {qk, temp(c, OpKind::Sqrt, {hs})});
  }
  Value* qk_scaled = qk;
  if (softcap > 0) {
    Value* cap = scalar_like(c, softcap, qk, "softcap");
    qk = temp(c, OpKind::Mul, {temp(c, OpKind::Tanh, {temp(c, OpKind::Div, {qk, cap})}), cap});
  }
  // The additive bias: the mask (bool: 0 or -inf), padded with -inf to the keys' length, then the causal part.
  Value* bias = nullptr;
  Value* neg_inf = scalar_like(c, -INFINITY, qk, "neg_inf");
  Value* zero = scalar_like(c, 0.0, qk, "zero");
  if (mask) {
    std::optional<DType> mt = dtype_now(c, mask);
    if (!mt) c.error("attn_mask needs an element type known while importing");
    Value* add = *mt == DType::boolean ? temp(c, OpKind::Where, {mask, zero, neg_inf})
                                       : temp(c, OpKind::CastLike, {mask, qk});
    Value* missing = temp(c, OpKind::Sub, {dim_of(c, kk, 2), dim_of(c, add, -1)});
    Value* pads = temp(c, OpKind::Concat, {c.const_i64({0}, "none"), missing}, {{"axis", Attribute(int64_t(0))}});
    bias = temp(c, OpKind::Pad, {add, pads, neg_inf, c.const_i64({-1}, "last")});
  }
  bool windowed = left >= 0 || right >= 0;
  if (causal || windowed || nonpad) {
    // Query i sits at position i + offset among the keys: offset = the past's length, or per batch row
    // nonpad_kv_seqlen - S (an external cache), else 0.
    Value* s_len = temp(c, OpKind::Squeeze, {dim_of(c, q, 2), c.const_i64({0}, "sq")});
    Value* l_len = temp(c, OpKind::Squeeze, {dim_of(c, kk, 2), c.const_i64({0}, "sq")});
    Value* zero_i = c.const_tensor(Tensor::scalar<int64_t>(0), "zero_i");
    Value* one_i = c.const_tensor(Tensor::scalar<int64_t>(1), "one_i");
    Value* rows = temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Range, {zero_i, s_len, one_i}), c.const_i64({1}, "col")});
    Value* cols = temp(c, OpKind::Range, {zero_i, l_len, one_i});
    Value* lens = nonpad ? temp(c, OpKind::Cast, {nonpad}, to_type(DType::i64)) : nullptr;
    Value* offset = past_k ? temp(c, OpKind::Squeeze, {dim_of(c, past_k, 2), c.const_i64({0}, "sq")})
                  : nonpad ? temp(c, OpKind::Reshape, {temp(c, OpKind::Sub, {lens, s_len}), c.const_i64({-1, 1, 1}, "b11")})
                           : zero_i;
    Value* pos = temp(c, OpKind::Add, {rows, offset});  // [S, 1], or [B, S, 1] per batch row
    Value* allowed = nullptr;
    auto both = [&](Value* a) { allowed = allowed ? temp(c, OpKind::And, {allowed, a}) : a; };
    if (causal) both(temp(c, OpKind::LessOrEqual, {cols, pos}));
    if (windowed) {
      Value* diff = temp(c, OpKind::Sub, {pos, cols});
      if (left >= 0) both(temp(c, OpKind::LessOrEqual, {diff, c.const_tensor(Tensor::scalar<int64_t>(left), "left")}));
      if (right >= 0)
        both(temp(c, OpKind::LessOrEqual,
                  {temp(c, OpKind::Neg, {diff}), c.const_tensor(Tensor::scalar<int64_t>(right), "right")}));
    }
    if (nonpad) {  // keys past a row's length are padding: [B, 1, L]
      Value* real = temp(c, OpKind::Less, {cols, temp(c, OpKind::Reshape, {lens, c.const_i64({-1, 1, 1}, "b11")})});
      both(real);
    }
    Value* part = temp(c, OpKind::Where, {allowed, zero, neg_inf});
    if (nonpad) part = temp(c, OpKind::Unsqueeze, {part, c.const_i64({1}, "heads_axis")});  // [B, 1, S|1, L]
    bias = bias ? temp(c, OpKind::Add, {bias, part}) : part;
  }
  Value* with_bias = bias ? temp(c, OpKind::Add, {qk, bias}) : qk;
  Value* p = temp(c, OpKind::Softmax, {with_bias}, {{"axis", Attribute(int64_t(-1))}});
  if (bias) {  // a row whose keys are all masked attends to nothing: 0, not NaN
    Value* row_max = temp(c, OpKind::ReduceMax, {bias, c.const_i64({-1}, "last")}, {{"keepdims", Attribute(int64_t(1))}});
    p = temp(c, OpKind::Where, {temp(c, OpKind::Equal, {row_max, neg_inf}), zero, p});
  }
  Value* y = temp(c, OpKind::MatMul, {p, vv});
  if (three_d) {
    Value* t = temp(c, OpKind::Transpose, {y}, {{"perm", Attribute(std::vector<int64_t>{0, 2, 1, 3})}});
    y = temp(c, OpKind::Reshape, {t, c.const_i64({0, 0, -1}, "merge")});
  }
  const auto& outs = c.output_names();
  const auto& proto = c.proto();
  auto wanted = [&](int i) { return i < proto.output_size() && !proto.output(i).empty(); };
  Graph& g = c.graph();
  g.add_node(OpKind::Identity, {y}, {outs.at(0)}, {}, c.loc());
  if (wanted(1)) g.add_node(OpKind::Identity, {present_k}, {outs[1]}, {}, c.loc());
  if (wanted(2)) g.add_node(OpKind::Identity, {present_v}, {outs[2]}, {}, c.loc());
  if (wanted(3)) {
    Value* qk_out = qk_mode == 0 ? qk_scaled : qk_mode == 1 ? qk : qk_mode == 2 ? with_bias : p;
    if (qk_mode < 0 || qk_mode > 3) c.error("qk_matmul_output_mode must be 0..3, got ", qk_mode);
    g.add_node(OpKind::Identity, {qk_out}, {outs[3]}, {}, c.loc());
  }
}

// LpPool-18: (sum over the window of |x|^p)^(1/p), padding adding nothing: the sum is prod(kernel_shape) times
// AveragePool(|x|^p) with count_include_pad=1 (which divides by the kernel size wherever the window lies).
void convert_lp_pool(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  double p = double(int_attr(c, "p", 2));
  if (p <= 0) c.error("p must be > 0, got ", p);
  auto ks = c.attrs().find("kernel_shape");
  if (ks == c.attrs().end() || ks->second.kind() != AttrKind::Ints) c.error("attribute 'kernel_shape' is required");
  double count = 1;
  for (int64_t k : ks->second.ints()) count *= double(k);
  AttrMap pool = c.attrs();
  pool["count_include_pad"] = Attribute(int64_t(1));
  c.attrs().clear();
  Value* powered = temp(c, OpKind::Pow, {temp(c, OpKind::Abs, {x}), scalar_like(c, p, x, "p")});
  Value* avg = temp(c, OpKind::AveragePool, {powered}, std::move(pool));
  Value* sum = temp(c, OpKind::Mul, {avg, scalar_like(c, count, x, "kernel_size")});
  c.emit_final(OpKind::Pow, {sum, scalar_like(c, 1.0 / p, x, "inverse_p")}, {});
}

// CausalConvWithState: a depthwise 1-D convolution over [past_state (zeros when absent) ++ input] with no padding,
// optionally followed by SiLU; present_state is the last k-1 steps of that concatenation. Conv keeps the fast
// kernels.
void convert_causal_conv_with_state(ConvertContext& c) {
  Value* x = required(c, 0, "input");
  Value* w = required(c, 1, "weight");
  Value* bias = c.input(2);
  Value* past = c.input(3);
  std::string act = "none";
  if (auto a = c.take_attr("activation")) {
    if (a->kind() != AttrKind::String) c.error("attribute 'activation' must be a string");
    act = a->s();
  }
  no_more_attrs(c);
  if (act != "none" && act != "silu" && act != "swish") c.error("activation '", act, "' is not one of none, silu, swish");
  if (!(w->is_graph_input() || w->is_constant()) || !w->shape().is_static() || w->shape().rank() != 3)
    c.error("weight must have a static shape [channels, 1, k] while importing, got ", w->type().str());
  std::vector<int64_t> ws = w->shape().static_dims();
  int64_t channels = ws[0], k = ws[2];
  if (ws[1] != 1 || k < 1) c.error("weight must be [channels, 1, k >= 1], got ", w->type().str());
  Value* padded = past ? temp(c, OpKind::Concat, {past, x}, {{"axis", Attribute(int64_t(2))}})
                       : temp(c, OpKind::Pad, {x, c.const_i64({0, 0, k - 1, 0, 0, 0}, "causal_pads")});
  std::vector<Value*> conv_in = {padded, w};
  if (bias) conv_in.push_back(bias);
  Value* y = temp(c, OpKind::Conv, conv_in, {{"group", Attribute(channels)}});
  if (act != "none") y = temp(c, OpKind::Mul, {y, temp(c, OpKind::Sigmoid, {y})});
  // The last k-1 steps; k = 1 keeps none (a start past the end).
  int64_t start = k > 1 ? -(k - 1) : std::numeric_limits<int64_t>::max();
  Value* present = temp(c, OpKind::Slice, {padded, c.const_i64({start}, "state_start"),
                                           c.const_i64({std::numeric_limits<int64_t>::max()}, "state_end"),
                                           c.const_i64({2}, "time_axis")});
  const auto& outs = c.output_names();
  const auto& proto = c.proto();
  Graph& g = c.graph();
  g.add_node(OpKind::Identity, {y}, {outs.at(0)}, {}, c.loc());
  if (proto.output_size() > 1 && !proto.output(1).empty()) g.add_node(OpKind::Identity, {present}, {outs[1]}, {}, c.loc());
}

// SwiGLU: A * sigmoid(alpha * A) * B (A and B of one shape).
void convert_swiglu(ConvertContext& c) {
  Value* a = required(c, 0, "A");
  Value* b = required(c, 1, "B");
  double alpha = float_attr(c, "alpha", 1.0);
  no_more_attrs(c);
  Value* ax = alpha == 1.0 ? a : temp(c, OpKind::Mul, {a, scalar_like(c, alpha, a, "alpha")});
  c.emit_final(OpKind::Mul, {temp(c, OpKind::Mul, {a, temp(c, OpKind::Sigmoid, {ax})}), b}, {});
}

// The rank of an input, which these expansions need while importing (graph inputs and constants are typed).
int64_t import_rank(ConvertContext& c, Value* v, const char* what) {
  if (!(v->is_graph_input() || v->is_constant()) || !v->shape().rank_known())
    c.error(what, " needs a known rank while importing, got ", v->type().str());
  return int64_t(v->shape().rank());
}

// TensorScatter (a KV-cache write): present = past with update's steps written along `axis` from
// write_indices[batch] on (circular: modulo the cache length), as one ScatterElements whose indices are
// (write_indices[b] + step) broadcast over update's shape.
void convert_tensor_scatter(ConvertContext& c) {
  Value* past = required(c, 0, "past_cache");
  Value* update = required(c, 1, "update");
  Value* write = c.input(2);
  int64_t axis = int_attr(c, "axis", -2);
  std::string mode = "linear";
  if (auto m = c.take_attr("mode")) {
    if (m->kind() != AttrKind::String) c.error("attribute 'mode' must be a string");
    mode = m->s();
  }
  no_more_attrs(c);
  if (mode != "linear" && mode != "circular") c.error("mode '", mode, "' is not one of linear, circular");
  int64_t r = import_rank(c, past, "past_cache");
  if (axis < -r || axis >= r) c.error("axis ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  if (axis == 0) c.error("axis must not be the batch axis 0");
  Value* ushape = temp(c, OpKind::Shape, {update});
  Value* steps = temp(c, OpKind::Gather, {ushape, c.const_tensor(Tensor::scalar<int64_t>(axis), "axis")});
  Value* range = temp(c, OpKind::Range, {c.const_tensor(Tensor::scalar<int64_t>(0), "zero"), steps,
                                          c.const_tensor(Tensor::scalar<int64_t>(1), "one")});
  std::vector<int64_t> along(size_t(r), 1), per_batch(size_t(r), 1);
  along[size_t(axis)] = -1;
  per_batch[0] = -1;
  Value* idx = temp(c, OpKind::Reshape, {range, c.const_i64(along, "along_axis")});
  if (write) idx = temp(c, OpKind::Add, {idx, temp(c, OpKind::Reshape, {temp(c, OpKind::Cast, {write},
                                                                                 to_type(DType::i64)),
                                                                        c.const_i64(per_batch, "per_batch")})});
  if (mode == "circular") {
    Value* len = temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {past}),
                                          c.const_tensor(Tensor::scalar<int64_t>(axis), "axis")});
    idx = temp(c, OpKind::Mod, {idx, len});
  }
  idx = temp(c, OpKind::Expand, {idx, ushape});
  c.emit_final(OpKind::ScatterElements, {past, idx, update}, {{"axis", Attribute(axis)}});
}

// AffineGrid-20: theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D) applied to the normalized coordinates of an image of
// `size` ([N, C, H, W] or [N, C, D, H, W]): grid [N, (D,) H, W, 2|3], (x, y[, z]) innermost first. Computed in
// f64 (as ONNX's reference does) and cast back to theta's type.
void convert_affine_grid(ConvertContext& c) {
  Value* theta = required(c, 0, "theta");
  Value* size = required(c, 1, "size");
  int64_t align = int_attr(c, "align_corners", 0);
  no_more_attrs(c);
  int64_t n = -1;
  if ((size->is_graph_input() || size->is_constant()) && size->shape().is_static() && size->shape().rank() == 1)
    n = size->shape().static_dims()[0];
  if (n != 4 && n != 5) c.error("size must be a 1-D tensor of 4 or 5 values with a static shape, got ", size->type().str());
  int64_t sd = n - 2;  // spatial dims
  Value* size64 = temp(c, OpKind::Cast, {size}, to_type(DType::i64));
  Value* one_f = c.const_tensor(Tensor::scalar<double>(1.0), "one");
  Value* two_f = c.const_tensor(Tensor::scalar<double>(2.0), "two");
  // The normalized coordinates of each spatial dim (outermost first), each shaped to broadcast over [D, H, W].
  std::vector<Value*> dims, coords;
  for (int64_t d = 0; d < sd; ++d)
    dims.push_back(temp(c, OpKind::Slice, {size64, c.const_i64({d + 2}, "start"), c.const_i64({d + 3}, "end")}));
  for (int64_t d = 0; d < sd; ++d) {
    Value* len = temp(c, OpKind::Cast, {temp(c, OpKind::Squeeze, {dims[size_t(d)], c.const_i64({0}, "axis0")})},
                      to_type(DType::f64));
    Value* i = temp(c, OpKind::Range, {c.const_tensor(Tensor::scalar<double>(0.0), "zero"), len, one_f});
    Value* v = align ? temp(c, OpKind::Sub, {temp(c, OpKind::Div, {temp(c, OpKind::Mul, {i, two_f}),
                                                                    temp(c, OpKind::Sub, {len, one_f})}), one_f})
                     : temp(c, OpKind::Sub, {temp(c, OpKind::Div, {temp(c, OpKind::Add, {temp(c, OpKind::Mul, {i, two_f}),
                                                                                         one_f}), len}), one_f});
    std::vector<int64_t> shape(size_t(sd), 1);
    shape[size_t(d)] = -1;
    coords.push_back(temp(c, OpKind::Reshape, {v, c.const_i64(shape, "coord_shape")}));
  }
  Value* spatial = temp(c, OpKind::Concat, dims, {{"axis", Attribute(int64_t(0))}});
  // Homogeneous coordinates [D, H, W, sd + 1]: x (innermost) first, then y (, z), then 1.
  std::vector<Value*> parts;
  Value* last = c.const_i64({-1}, "last");
  for (int64_t d = sd; d-- > 0;)
    parts.push_back(temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Expand, {coords[size_t(d)], spatial}), last}));
  parts.push_back(temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Expand, {one_f, spatial}), last}));
  Value* homo = temp(c, OpKind::Concat, parts, {{"axis", Attribute(int64_t(-1))}});
  Value* flat = temp(c, OpKind::Reshape, {homo, c.const_i64({-1, sd + 1}, "points")});
  Value* theta_t = temp(c, OpKind::Transpose, {temp(c, OpKind::Cast, {theta}, to_type(DType::f64))},
                        {{"perm", Attribute(std::vector<int64_t>{0, 2, 1})}});
  Value* grid = temp(c, OpKind::MatMul, {flat, theta_t});  // [N, points, sd]
  Value* out_shape = temp(c, OpKind::Concat, {temp(c, OpKind::Slice, {size64, c.const_i64({0}, "start"),
                                                                      c.const_i64({1}, "end")}),
                                              spatial, c.const_i64({sd}, "coords")},
                          {{"axis", Attribute(int64_t(0))}});
  c.emit_final(OpKind::CastLike, {temp(c, OpKind::Reshape, {grid, out_shape}), theta}, {});
}

// FlexAttention (ai.onnx.preview): prob_mod(softmax(score_mod((Q s)(K s)^T))) V with s = sqrt(scale) (default
// scale 1/sqrt(E)), K and V heads repeated for grouped queries, the softmax and the product with V in
// softmax_precision (default f32 for 16-bit inputs, else the input type), the result in V's type.
void convert_flex_attention(ConvertContext& c) {
  Value* q = required(c, 0, "Q");
  Value* k = required(c, 1, "K");
  Value* v = required(c, 2, "V");
  // score_mod / prob_mod: a graph of one input and one output applied to the whole [B, H, L, S] tensor, run as the
  // body of a one-step Scan over a new leading axis (so it keeps its own scope and may use any op).
  auto take_mod = [&](const char* name) -> GraphPtr {
    auto a = c.take_attr(name);
    if (!a) return nullptr;
    if (a->kind() != AttrKind::Graph) c.error("attribute '", name, "' must be a graph");
    GraphPtr g = a->g();
    if (g->inputs().size() != 1 || g->outputs().size() != 1)
      c.error("attribute '", name, "' must take one input and yield one output, it takes ", g->inputs().size(),
              " and yields ", g->outputs().size());
    return g;
  };
  GraphPtr score_mod = take_mod("score_mod"), prob_mod = take_mod("prob_mod");
  std::optional<double> scale;
  if (c.has_attr("scale")) scale = float_attr(c, "scale", 0.0);
  std::optional<int64_t> precision;
  if (c.has_attr("softmax_precision")) precision = int_attr(c, "softmax_precision", std::nullopt);
  no_more_attrs(c);
  for (Value* x : {q, k, v})
    if (!(x->is_graph_input() || x->is_constant()) || !x->shape().is_static() || x->shape().rank() != 4)
      c.error("Q, K and V need static rank-4 shapes while importing, got ", x->type().str());
  std::vector<int64_t> qs = q->shape().static_dims(), ks = k->shape().static_dims();
  if (!scale) scale = 1.0 / std::sqrt(double(qs[3]));
  DType compute = q->dtype() == DType::f16 || q->dtype() == DType::bf16 ? DType::f32 : q->dtype();
  if (precision) {
    std::optional<DType> p = dtype_from_onnx_id(int(*precision));
    if (!p || !is_float(*p)) c.error("softmax_precision ", *precision, " is not a float type");
    compute = *p;
  }
  Value* s = scalar_like(c, std::sqrt(double(float(*scale))), q, "sqrt_scale");
  auto repeat_heads = [&](Value* x) {
    if (qs[1] == ks[1]) return x;
    if (ks[1] <= 0 || qs[1] % ks[1] != 0) c.error("Q's ", qs[1], " heads are not a multiple of K's ", ks[1]);
    std::vector<int64_t> xs = x->shape().static_dims();
    Value* e = temp(c, OpKind::Expand, {temp(c, OpKind::Unsqueeze, {x, c.const_i64({2}, "axis")}),
                                        c.const_i64({xs[0], xs[1], qs[1] / ks[1], xs[2], xs[3]}, "repeated")});
    return temp(c, OpKind::Reshape, {e, c.const_i64({xs[0], qs[1], xs[2], xs[3]}, "heads")});
  };
  Value* kt = temp(c, OpKind::Transpose, {temp(c, OpKind::Mul, {repeat_heads(k), s})},
                   {{"perm", Attribute(std::vector<int64_t>{0, 1, 3, 2})}});
  Value* scores = temp(c, OpKind::MatMul, {temp(c, OpKind::Mul, {q, s}), kt});
  Value* lead = c.const_i64({0}, "lead");
  auto apply_mod = [&](Value* x, const GraphPtr& body) {
    Node* scan = c.emit_temp(OpKind::Scan, {temp(c, OpKind::Unsqueeze, {x, lead})},
                             {{"body", Attribute(body)}, {"num_scan_inputs", Attribute(int64_t(1))}});
    return temp(c, OpKind::Cast, {temp(c, OpKind::Squeeze, {scan->output(0), lead})}, to_type(compute));
  };
  Value* sc = temp(c, OpKind::Cast, {scores}, to_type(compute));
  if (score_mod) sc = apply_mod(sc, score_mod);
  Value* p = temp(c, OpKind::Softmax, {sc}, {{"axis", Attribute(int64_t(-1))}});
  if (prob_mod) p = apply_mod(p, prob_mod);
  Value* out = temp(c, OpKind::MatMul, {p, temp(c, OpKind::Cast, {repeat_heads(v)}, to_type(compute))});
  c.emit_final(OpKind::Cast, {out}, to_type(v->dtype()));
}

// LinearAttention (opset 26): a recurrent state S [B, Hkv, dk, dv] in f32, one step per position t:
//   gated: S *= exp(decay_t);  delta: v_t = beta_t * (v_t - k_t S);  S += k_t^T v_t;  o_t = scale * q_t S
// (S's heads repeated for grouped queries). Imported as a Scan over the time axis whose body is those ops.
void convert_linear_attention(ConvertContext& c) {
  Value* q = required(c, 0, "query");
  Value* k = required(c, 1, "key");
  Value* v = required(c, 2, "value");
  Value* past = c.input(3);
  Value* decay = c.input(4);
  Value* beta = c.input(5);
  std::string rule = "gated_delta";
  if (auto r = c.take_attr("update_rule")) {
    if (r->kind() != AttrKind::String) c.error("attribute 'update_rule' must be a string");
    rule = r->s();
  }
  int64_t hq = int_attr(c, "q_num_heads", std::nullopt), hkv = int_attr(c, "kv_num_heads", std::nullopt);
  double scale = float_attr(c, "scale", 0.0);
  c.take_attr("chunk_size");  // a tuning hint: no effect on the result
  no_more_attrs(c);
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    c.error("update_rule '", rule, "' is not one of linear, gated, delta, gated_delta");
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0) c.error("q_num_heads ", hq, " must be a positive multiple of kv_num_heads ", hkv);
  bool gating = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (gating != (decay != nullptr)) c.error("update_rule '", rule, gating ? "' needs" : "' forbids", " the decay input");
  if (delta != (beta != nullptr)) c.error("update_rule '", rule, delta ? "' needs" : "' forbids", " the beta input");
  for (Value* x : {q, k, v})
    if (!(x->is_graph_input() || x->is_constant()) || !x->shape().rank_known() || x->shape().rank() != 3 ||
        !x->shape()[2].is_const())
      c.error("query, key and value need rank 3 with a known last dim while importing, got ", x->type().str());
  int64_t dk = q->shape()[2].value() / hq;
  if (dk * hq != q->shape()[2].value()) c.error("query's last dim is not a multiple of q_num_heads ", hq);
  if (scale == 0.0) scale = 1.0 / std::sqrt(double(dk));
  const Location& loc = c.loc();
  // [B, T, H*D] -> [B, H, T, D] in f32.
  auto heads = [&](Value* x, int64_t h, int64_t d) {
    Value* r = temp(c, OpKind::Reshape, {x, c.const_i64({0, 0, h, d}, "heads")});
    return temp(c, OpKind::Cast, {temp(c, OpKind::Transpose, {r}, {{"perm", Attribute(std::vector<int64_t>{0, 2, 1, 3})}})},
                to_type(DType::f32));
  };
  std::vector<Value*> scanned = {heads(q, hq, -1), heads(k, hkv, -1), heads(v, hkv, -1)};
  if (decay) {
    if (!(decay->is_graph_input() || decay->is_constant()) || !decay->shape().rank_known() ||
        decay->shape().rank() != 3 || !decay->shape()[2].is_const())
      c.error("decay needs rank 3 with a known last dim while importing, got ", decay->type().str());
    int64_t last = decay->shape()[2].value();
    if (last != hkv && last != hkv * dk) c.error("decay's last dim ", last, " must be kv_num_heads or kv_num_heads * d_k");
    scanned.push_back(heads(decay, hkv, last == hkv ? 1 : -1));
  }
  if (beta) {
    if (!(beta->is_graph_input() || beta->is_constant()) || !beta->shape().rank_known() || beta->shape().rank() != 3 ||
        !beta->shape()[2].is_const() || (beta->shape()[2].value() != hkv && beta->shape()[2].value() != 1))
      c.error("beta must be [B, T, kv_num_heads or 1], got ", beta->type().str());
    scanned.push_back(heads(beta, beta->shape()[2].value(), 1));
  }
  Value* init;
  if (past) {
    init = temp(c, OpKind::Cast, {past}, to_type(DType::f32));
  } else {  // zeros [B, Hkv, dk, dv]
    Value* ks = temp(c, OpKind::Shape, {scanned[1]}), *vs = temp(c, OpKind::Shape, {scanned[2]});
    Value* shape = temp(c, OpKind::Concat, {temp(c, OpKind::Slice, {ks, c.const_i64({0}, "s"), c.const_i64({2}, "e")}),
                                            temp(c, OpKind::Slice, {ks, c.const_i64({3}, "s"), c.const_i64({4}, "e")}),
                                            temp(c, OpKind::Slice, {vs, c.const_i64({3}, "s"), c.const_i64({4}, "e")})},
                        {{"axis", Attribute(int64_t(0))}});
    init = temp(c, OpKind::ConstantOfShape, {shape}, {{"value", Attribute(Tensor::from_vector<float>({0.f}, {1}))}});
  }
  // The body: (S, q_t, k_t, v_t[, g_t][, b_t]) -> (S', o_t).
  auto body = std::make_shared<Graph>(c.graph().unique_name("linear_attention_step"));
  body->set_parent(&c.graph());
  auto in = [&](const char* name) { return body->add_input(body->unique_name(name), {DType::f32, Shape::unknown_rank()}); };
  Value* st = in("state");
  Value* qt = in("q_t");
  Value* kt = in("k_t");
  Value* vt = in("v_t");
  Value* gt = decay ? in("decay_t") : nullptr;
  Value* bt = beta ? in("beta_t") : nullptr;
  auto op = [&](OpKind o, std::vector<Value*> ins, AttrMap attrs = {}) {
    return body->add_node(o, std::move(ins), {body->unique_name("la_" + std::string(op_name(o)))}, std::move(attrs), loc)
        ->output(0);
  };
  Value* ax2 = c.const_i64({2}, "axis2");
  Value* axm1 = c.const_i64({-1}, "axis_last");
  if (gt) st = op(OpKind::Mul, {st, op(OpKind::Unsqueeze, {op(OpKind::Exp, {gt}), axm1})});
  if (bt) {
    Value* got = op(OpKind::Squeeze, {op(OpKind::MatMul, {op(OpKind::Unsqueeze, {kt, ax2}), st}), ax2});
    vt = op(OpKind::Mul, {bt, op(OpKind::Sub, {vt, got})});
  }
  st = op(OpKind::Add, {st, op(OpKind::Mul, {op(OpKind::Unsqueeze, {kt, axm1}), op(OpKind::Unsqueeze, {vt, ax2})})});
  Value* read = st;
  if (hq != hkv) {
    Value* rep = op(OpKind::Expand, {op(OpKind::Unsqueeze, {st, ax2}), c.const_i64({1, 1, hq / hkv, 1, 1}, "repeat")});
    Value* ss = op(OpKind::Shape, {st});
    Value* shape = op(OpKind::Concat, {op(OpKind::Slice, {ss, c.const_i64({0}, "s"), c.const_i64({1}, "e")}),
                                       c.const_i64({hq}, "hq"),
                                       op(OpKind::Slice, {ss, c.const_i64({2}, "s"), c.const_i64({4}, "e")})},
                      {{"axis", Attribute(int64_t(0))}});
    read = op(OpKind::Reshape, {rep, shape});
  }
  Value* ot = op(OpKind::Squeeze, {op(OpKind::MatMul, {op(OpKind::Unsqueeze, {qt, ax2}), read}), ax2});
  ot = op(OpKind::Mul, {ot, c.const_tensor(Tensor::scalar<float>(float(scale)), "scale")});
  body->set_outputs({st, ot});
  std::vector<Value*> scan_in = {init};
  scan_in.insert(scan_in.end(), scanned.begin(), scanned.end());
  int64_t m = int64_t(scanned.size());
  Node* scan = c.emit_temp(OpKind::Scan, scan_in, {{"body", Attribute(GraphPtr(body))}, {"num_scan_inputs", Attribute(m)},
                                                  {"scan_input_axes", Attribute(std::vector<int64_t>(size_t(m), 2))},
                                                  {"scan_output_axes", Attribute(std::vector<int64_t>{1})}},
                           2);
  // [B, T, Hq, dv] -> [B, T, Hq * dv] in the query's type; the state in past_state's (else the query's) type.
  Value* y = temp(c, OpKind::Reshape, {scan->output(1), c.const_i64({0, 0, -1}, "merge")});
  const auto& outs = c.output_names();
  const auto& proto = c.proto();
  Graph& g = c.graph();
  g.add_node(OpKind::Cast, {y}, {outs.at(0)}, to_type(q->dtype()), loc);
  if (proto.output_size() > 1 && !proto.output(1).empty())
    g.add_node(OpKind::Cast, {scan->output(0)}, {outs[1]}, to_type(past ? past->dtype() : q->dtype()), loc);
}

// MelWeightMatrix-17: triangular filters between mel-spaced bin edges b_0..b_{M+1} (floor((dft_length + 1) * f /
// sample_rate) of frequencies evenly spaced in mel), [dft_length/2 + 1, M]: rising (j - b_i)/(b_{i+1} - b_i) on
// [b_i, b_{i+1}] (1 at b_{i+1} when they meet), falling (b_{i+2} - j)/(b_{i+2} - b_{i+1}) on [b_{i+1}, b_{i+2}).
// The edge mels in f32 and the rest in f64, as ONNX's reference computes them (the floors depend on it).
void convert_mel_weight_matrix(ConvertContext& c) {
  Value* bins = required(c, 0, "num_mel_bins");
  Value* dft_length = required(c, 1, "dft_length");
  Value* rate = required(c, 2, "sample_rate");
  Value* lo = required(c, 3, "lower_edge_hertz");
  Value* hi = required(c, 4, "upper_edge_hertz");
  int64_t out_type = int_attr(c, "output_datatype", int64_t(dtype_onnx_id(DType::f32)));
  no_more_attrs(c);
  std::optional<DType> ot = dtype_from_onnx_id(int(out_type));
  if (!ot) c.error("output_datatype ", out_type, " is not a supported type");
  auto f64 = [&](double v, const char* h) { return c.const_tensor(Tensor::scalar<double>(v), h); };
  auto as = [&](Value* v, DType t) { return temp(c, OpKind::Cast, {v}, to_type(t)); };
  auto scalar = [&](Value* v) { return temp(c, OpKind::Reshape, {v, c.const_i64({}, "scalar")}); };
  auto mel = [&](Value* hz) {  // 2595 * log1p(hz / 700) in f32, then / ln 10 in f64
    Value* x = temp(c, OpKind::Div, {as(scalar(hz), DType::f32), c.const_tensor(Tensor::scalar<float>(700.f), "k700")});
    Value* l1p = as(temp(c, OpKind::Log, {temp(c, OpKind::Add, {as(x, DType::f64), f64(1.0, "one")})}), DType::f32);
    Value* m = temp(c, OpKind::Mul, {l1p, c.const_tensor(Tensor::scalar<float>(2595.f), "k2595")});
    return temp(c, OpKind::Div, {as(m, DType::f64), f64(std::log(10.0), "ln10")});
  };
  Value* m64 = as(scalar(bins), DType::i64);
  Value* zero = c.const_tensor(Tensor::scalar<int64_t>(0), "zero");
  Value* one = c.const_tensor(Tensor::scalar<int64_t>(1), "one");
  Value* edges_n = temp(c, OpKind::Add, {m64, c.const_tensor(Tensor::scalar<int64_t>(2), "two")});
  Value* low = mel(lo);
  Value* step = temp(c, OpKind::Div, {temp(c, OpKind::Sub, {mel(hi), low}), as(edges_n, DType::f64)});
  Value* k = as(temp(c, OpKind::Range, {zero, edges_n, one}), DType::f64);
  Value* f = temp(c, OpKind::Add, {temp(c, OpKind::Mul, {k, step}), low});
  f = temp(c, OpKind::Mul, {f64(700.0, "k700d"),
                            temp(c, OpKind::Sub, {temp(c, OpKind::Exp, {temp(c, OpKind::Mul, {temp(c, OpKind::Div, {f, f64(2595.0, "k2595d")}),
                                                                                             f64(std::log(10.0), "ln10")})}),
                                                  f64(1.0, "one")})});
  Value* len64 = as(scalar(dft_length), DType::i64);
  Value* edges = temp(c, OpKind::Floor, {temp(c, OpKind::Div, {temp(c, OpKind::Mul, {as(temp(c, OpKind::Add, {len64, one}), DType::f64), f}),
                                                               as(scalar(rate), DType::f64)})});
  // Columns i: L = edges[i], C = edges[i+1], H = edges[i+2] as [1, M]; rows j = 0 .. dft_length/2 as [S, 1].
  auto part = [&](int64_t from, const char* h) {
    return temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Slice, {edges, c.const_i64({from}, h),
                                                               c.const_i64({-2 + from}, "end")}),
                                       c.const_i64({0}, "row")});
  };
  Value* L = part(0, "l"), *C = part(1, "c");
  Value* H = temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Slice, {edges, c.const_i64({2}, "h"),
                                                                 c.const_i64({std::numeric_limits<int64_t>::max()}, "end")}),
                                         c.const_i64({0}, "row")});
  Value* rows = temp(c, OpKind::Add, {temp(c, OpKind::Div, {len64, c.const_tensor(Tensor::scalar<int64_t>(2), "two")}), one});
  Value* J = temp(c, OpKind::Unsqueeze, {as(temp(c, OpKind::Range, {zero, rows, one}), DType::f64), c.const_i64({1}, "col")});
  Value* zero_d = f64(0.0, "zero_d");
  Value* rise = temp(c, OpKind::Where, {temp(c, OpKind::Equal, {C, L}), f64(1.0, "one"),
                                        temp(c, OpKind::Div, {temp(c, OpKind::Sub, {J, L}), temp(c, OpKind::Sub, {C, L})})});
  Value* in_rise = temp(c, OpKind::And, {temp(c, OpKind::GreaterOrEqual, {J, L}), temp(c, OpKind::LessOrEqual, {J, C})});
  Value* fall = temp(c, OpKind::Div, {temp(c, OpKind::Sub, {H, J}), temp(c, OpKind::Sub, {H, C})});
  Value* in_fall = temp(c, OpKind::And, {temp(c, OpKind::GreaterOrEqual, {J, C}), temp(c, OpKind::Less, {J, H})});
  Value* w = temp(c, OpKind::Where, {in_fall, fall, temp(c, OpKind::Where, {in_rise, rise, zero_d})});
  c.emit_final(OpKind::Cast, {w}, to_type(*ot));
}

}  // namespace

void register_onnx_functions(OnnxConverterTable& t) {
  t["Attention"] = convert_attention;
  t["GroupNormalization"] = convert_group_norm;
  t["RMSNormalization"] = convert_rms_norm;
  t["Swish"] = convert_swish;
  t["LpNormalization"] = convert_lp_norm;
  t["HannWindow"] = [](ConvertContext& c) { convert_window(c, {0.5, -0.5}); };
  t["HammingWindow"] = [](ConvertContext& c) { convert_window(c, {25.0 / 46.0, -21.0 / 46.0}); };
  t["BlackmanWindow"] = [](ConvertContext& c) { convert_window(c, {0.42, -0.5, 0.08}); };
  t["CenterCropPad"] = convert_center_crop_pad;
  t["LpPool"] = convert_lp_pool;
  t["CausalConvWithState"] = convert_causal_conv_with_state;
  t["SwiGLU"] = convert_swiglu;
  t["TensorScatter"] = convert_tensor_scatter;
  t["AffineGrid"] = convert_affine_grid;
  t["ai.onnx.preview:FlexAttention"] = convert_flex_attention;
  t["LinearAttention"] = convert_linear_attention;
  t["MelWeightMatrix"] = convert_mel_weight_matrix;
}

}  // namespace cuvil
