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
#include <cmath>
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
}

}  // namespace cuvil
