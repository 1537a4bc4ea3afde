// ONNX Runtime's contrib ops (domain com.microsoft) that exported and ORT-optimized models carry, written as
// Cuvil ops with the semantics of ONNX Runtime's CPU kernels (onnxruntime/docs/ContribOperators.md):
//
//   FusedMatMul          alpha * op(A) @ op(B), op a transpose of the last two dims (transBatch* refused)
//   Gelu, FastGelu, BiasGelu, QuickGelu, BiasAdd            element-wise (Gelu's erf or tanh form, + bias)
//   SkipLayerNormalization, SkipSimplifiedLayerNormalization LayerNorm / RMSNorm of input + skip (+ bias)
//   EmbedLayerNormalization  LayerNorm(word[ids] + position[ids' positions] + segment[segment ids]), mask index
//   Attention            packed QKV projection, heads, scaled softmax with a key mask / causal mask, merge
//   MultiHeadAttention   3-D query/key/value (+ packed bias, key padding mask)
//   QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearAveragePool,
//   QLinearConcat, QGemm DequantizeLinear -> the float op -> QuantizeLinear (what QOperator-format models mean)
//
// Inputs and outputs these forms do not cover (past key/value caches, rotary embeddings, relative position
// biases, sequence-length masks) are refused by name.
#include <onnx/onnx_pb.h>

#include <cmath>

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

void refuse_inputs_from(ConvertContext& c, size_t first, const char* what) {
  for (size_t i = first; i < c.inputs().size(); ++i)
    if (c.input(i)) c.error("input ", i, " (", what, ") is not supported");
}

void refuse_outputs_from(ConvertContext& c, size_t first, const char* what) {
  const auto& proto = c.proto();
  for (int i = int(first); i < proto.output_size(); ++i)
    if (!proto.output(i).empty()) c.error("output ", i, " (", what, ") is not supported");
}

Value* scalar_like(ConvertContext& c, double v, Value* like, const char* hint) {
  return temp(c, OpKind::CastLike, {c.const_tensor(Tensor::scalar<float>(float(v)), hint), like});
}

// The rank of a value known while importing (graph inputs and constants carry their types), if any.
std::optional<size_t> import_rank(Value* v) {
  if ((v->is_graph_input() || v->is_constant()) && v->shape().rank_known()) return v->shape().rank();
  return std::nullopt;
}

// The rank of a value, inferring the graph built so far when a node computes it (rare nodes only: the cost is one
// inference pass over the graph so far). Unknown inside regions, or when inference cannot tell.
std::optional<size_t> rank_now(ConvertContext& c, Value* v) {
  if (auto r = import_rank(v)) return r;
  if (!v->producer() || c.graph().parent()) return std::nullopt;
  infer_shapes(c.graph());
  if (v->shape().rank_known()) return v->shape().rank();
  return std::nullopt;
}

// ---- FusedMatMul

void convert_fused_matmul(ConvertContext& c) {
  Value* a = required(c, 0, "A");
  Value* b = required(c, 1, "B");
  double alpha = float_attr(c, "alpha", 1.0);
  bool ta = int_attr(c, "transA", 0) != 0, tb = int_attr(c, "transB", 0) != 0;
  if (int_attr(c, "transBatchA", 0) || int_attr(c, "transBatchB", 0))
    c.error("transBatchA/transBatchB are not supported");
  no_more_attrs(c);
  Value* y;
  auto transposed = [&](Value* v) -> Value* {
    auto r = import_rank(v);
    if (!r) return nullptr;
    if (*r < 2) c.error("a transposed operand needs rank >= 2, got ", v->type().str());
    std::vector<int64_t> perm;
    for (size_t i = 0; i < *r; ++i) perm.push_back(int64_t(i));
    std::swap(perm[*r - 1], perm[*r - 2]);
    return temp(c, OpKind::Transpose, {v}, {{"perm", Attribute(perm)}});
  };
  Value* ta_v = ta ? transposed(a) : a;
  Value* tb_v = tb ? transposed(b) : b;
  if (ta_v && tb_v) {
    y = temp(c, OpKind::MatMul, {ta_v, tb_v});
  } else {  // a rank unknown here: an Einsum over "..." transposes whatever the rank
    std::string eq = std::string(ta ? "...ji" : "...ij") + (tb ? ",...kj" : ",...jk") + "->...ik";
    y = temp(c, OpKind::Einsum, {a, b}, {{"equation", Attribute(eq)}});
  }
  if (alpha == 1.0) {
    c.emit_final(OpKind::Identity, {y}, {});
    return;
  }
  c.emit_final(OpKind::Mul, {y, scalar_like(c, alpha, y, "alpha")}, {});
}

// ---- element-wise

void convert_gelu(ConvertContext& c, const char* approximate, bool has_bias) {
  Value* x = required(c, 0, "X");
  if (has_bias && c.input(1)) x = temp(c, OpKind::Add, {x, c.input(1)});
  no_more_attrs(c);
  c.emit_final(OpKind::Gelu, {x}, {{"approximate", Attribute(std::string(approximate))}});
}

void convert_quick_gelu(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  double alpha = float_attr(c, "alpha", 1.702);
  no_more_attrs(c);
  Value* s = temp(c, OpKind::Sigmoid, {temp(c, OpKind::Mul, {x, scalar_like(c, alpha, x, "alpha")})});
  c.emit_final(OpKind::Mul, {x, s}, {});
}

void convert_bias_add(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  Value* bias = required(c, 1, "bias");
  Value* skip = required(c, 2, "skip");
  no_more_attrs(c);
  c.emit_final(OpKind::Add, {temp(c, OpKind::Add, {x, bias}), skip}, {});
}

// ---- normalizations

// input + skip (+ bias), normalized over the last axis: LayerNorm (gamma, beta), or RMS (simplified: gamma only).
// Outputs: y, mean (LayerNorm only), inverse std dev, the sum.
void convert_skip_norm(ConvertContext& c, bool simplified) {
  Value* x = required(c, 0, "input");
  Value* skip = required(c, 1, "skip");
  Value* gamma = required(c, 2, "gamma");
  Value* beta = simplified ? nullptr : c.input(3);
  Value* bias = c.input(simplified ? 3 : 4);
  double eps = float_attr(c, "epsilon", 1e-12);
  no_more_attrs(c);
  Value* sum = temp(c, OpKind::Add, {x, skip});
  if (bias) sum = temp(c, OpKind::Add, {sum, bias});
  const auto& outs = c.output_names();
  auto out = [&](size_t i) -> std::string { return i < outs.size() ? outs[i] : ""; };
  Location loc = c.loc();
  Graph& g = c.graph();
  std::string sum_out = out(3);
  if (simplified) {
    if (!out(1).empty()) c.error("output 1 (mean) is not produced by the simplified form");
    Value* sq = temp(c, OpKind::Mul, {sum, sum});
    Value* ms = temp(c, OpKind::ReduceMean, {sq, c.const_i64({-1}, "axis")}, {{"keepdims", Attribute(int64_t(1))}});
    Value* inv = temp(c, OpKind::Reciprocal,
                      {temp(c, OpKind::Sqrt, {temp(c, OpKind::Add, {ms, scalar_like(c, eps, sum, "epsilon")})})});
    g.add_node(OpKind::Mul, {temp(c, OpKind::Mul, {sum, inv}), gamma}, {out(0)}, {}, loc);
    if (!out(2).empty()) g.add_node(OpKind::Identity, {inv}, {out(2)}, {}, loc);
  } else {
    std::vector<std::string> names = {out(0)};
    if (!out(1).empty() || !out(2).empty()) {
      names.push_back(out(1).empty() ? g.unique_name(out(0) + "_mean") : out(1));
      names.push_back(out(2).empty() ? g.unique_name(out(0) + "_inv_std") : out(2));
    }
    std::vector<Value*> ln_in = {sum, gamma};
    if (beta) ln_in.push_back(beta);
    g.add_node(OpKind::LayerNormalization, ln_in, names,
               {{"axis", Attribute(int64_t(-1))}, {"epsilon", Attribute(eps)}}, loc);
  }
  if (!sum_out.empty()) g.add_node(OpKind::Identity, {sum}, {sum_out}, {}, loc);
}

void convert_simplified_layer_norm(ConvertContext& c) {
  Value* x = required(c, 0, "X");
  Value* scale = required(c, 1, "scale");
  int64_t axis = int_attr(c, "axis", -1);
  double eps = float_attr(c, "epsilon", 1e-5);
  c.take_attr("stash_type");
  no_more_attrs(c);
  if (axis != -1) c.error("axis other than -1 is not supported");
  refuse_outputs_from(c, 1, "inverse std dev");
  Value* xf = temp(c, OpKind::Cast, {x}, {{"to", Attribute(int64_t(dtype_onnx_id(DType::f32)))}});
  Value* ms = temp(c, OpKind::ReduceMean, {temp(c, OpKind::Mul, {xf, xf}), c.const_i64({-1}, "axis")},
                   {{"keepdims", Attribute(int64_t(1))}});
  Value* rms = temp(c, OpKind::Sqrt, {temp(c, OpKind::Add, {ms, scalar_like(c, eps, xf, "epsilon")})});
  Value* y = temp(c, OpKind::CastLike, {temp(c, OpKind::Div, {xf, rms}), x});
  c.emit_final(OpKind::Mul, {y, scale}, {});
}

void convert_embed_layer_norm(ConvertContext& c) {
  Value* ids = required(c, 0, "input_ids");
  Value* segment_ids = c.input(1);
  Value* word = required(c, 2, "word_embedding");
  Value* position = required(c, 3, "position_embedding");
  Value* segment = c.input(4);
  Value* gamma = required(c, 5, "gamma");
  Value* beta = required(c, 6, "beta");
  Value* mask = c.input(7);
  Value* position_ids = c.input(8);
  double eps = float_attr(c, "epsilon", 1e-12);
  c.take_attr("mask_index_type");
  no_more_attrs(c);
  if (segment_ids && !segment) c.error("segment_ids without segment_embedding");
  Value* emb = temp(c, OpKind::Gather, {word, ids});
  if (!position_ids) {  // positions 0 .. seq-1, the same for every batch row
    Value* seq = temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {ids}), c.const_tensor(Tensor::scalar<int64_t>(1), "one")});
    position_ids = temp(c, OpKind::Unsqueeze,
                        {temp(c, OpKind::Range, {c.const_tensor(Tensor::scalar<int64_t>(0), "zero"), seq,
                                                 c.const_tensor(Tensor::scalar<int64_t>(1), "step")}),
                         c.const_i64({0}, "batch_axis")});
  }
  emb = temp(c, OpKind::Add, {emb, temp(c, OpKind::Gather, {position, position_ids})});
  if (segment_ids) emb = temp(c, OpKind::Add, {emb, temp(c, OpKind::Gather, {segment, segment_ids})});
  const auto& outs = c.output_names();
  Graph& g = c.graph();
  g.add_node(OpKind::LayerNormalization, {emb, gamma, beta}, {outs.at(0)},
             {{"axis", Attribute(int64_t(-1))}, {"epsilon", Attribute(eps)}}, c.loc());
  if (outs.size() > 1 && !c.proto().output(1).empty()) {
    // mask_index: the count of unmasked tokens per row (ONNX Runtime's 1-D form); zeros without a mask.
    AttrMap to_i32{{"to", Attribute(int64_t(dtype_onnx_id(DType::i32)))}};
    Value* m = mask ? temp(c, OpKind::Cast, {mask}, to_i32)
                    : temp(c, OpKind::Cast, {temp(c, OpKind::Mul, {ids, c.const_tensor(Tensor::scalar<int64_t>(0), "z")})},
                           to_i32);
    g.add_node(OpKind::ReduceSum, {m, c.const_i64({1}, "axis")}, {outs[1]}, {{"keepdims", Attribute(int64_t(0))}},
               c.loc());
  }
  if (outs.size() > 2 && !c.proto().output(2).empty())
    g.add_node(OpKind::Identity, {emb}, {outs[2]}, {}, c.loc());
}

// ---- attention

// [B, S, N*H] -> [B, N, S, H]
Value* split_heads(ConvertContext& c, Value* x, int64_t heads) {
  Value* r = temp(c, OpKind::Reshape, {x, c.const_i64({0, 0, heads, -1}, "heads")});
  return temp(c, OpKind::Transpose, {r}, {{"perm", Attribute(std::vector<int64_t>{0, 2, 1, 3})}});
}

// softmax(q k^T * scale + bias) v for q, k, v of [B, N, S|L, H]; `key_mask` [B, L] (1 keep, 0 masked) adds
// mask_filter_value where 0; causal masks keys after the query position. Returns [B, S, N*H].
Value* attend(ConvertContext& c, Value* q, Value* k, Value* v, double scale, Value* key_mask, double filter,
              bool causal, Value* attention_bias) {
  Value* kt = temp(c, OpKind::Transpose, {k}, {{"perm", Attribute(std::vector<int64_t>{0, 1, 3, 2})}});
  Value* scores = temp(c, OpKind::MatMul, {q, kt});
  if (scale != 0) {
    scores = temp(c, OpKind::Mul, {scores, scalar_like(c, scale, scores, "scale")});
  } else {  // 1 / sqrt(head size), from q's last dim
    Value* hs = temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {q}), c.const_tensor(Tensor::scalar<int64_t>(3), "h")});
    Value* hsf = temp(c, OpKind::CastLike, {hs, scores});
    scores = temp(c, OpKind::Div, {scores, temp(c, OpKind::Sqrt, {hsf})});
  }
  if (attention_bias) scores = temp(c, OpKind::Add, {scores, attention_bias});
  if (key_mask) {
    Value* m = temp(c, OpKind::CastLike, {key_mask, scores});
    Value* one = scalar_like(c, 1.0, scores, "one");
    Value* add = temp(c, OpKind::Mul, {temp(c, OpKind::Sub, {one, m}), scalar_like(c, filter, scores, "filter")});
    scores = temp(c, OpKind::Add, {scores, temp(c, OpKind::Unsqueeze, {add, c.const_i64({1, 2}, "mask_axes")})});
  }
  if (causal) {  // keys j > i (counted from the end, as past keys come first) get the filter value
    Value* shape = temp(c, OpKind::Shape, {scores});
    Value* s_len = temp(c, OpKind::Gather, {shape, c.const_tensor(Tensor::scalar<int64_t>(2), "s")});
    Value* l_len = temp(c, OpKind::Gather, {shape, c.const_tensor(Tensor::scalar<int64_t>(3), "l")});
    Value* zero = c.const_tensor(Tensor::scalar<int64_t>(0), "zero");
    Value* one = c.const_tensor(Tensor::scalar<int64_t>(1), "one");
    Value* rows = temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Range, {zero, s_len, one}), c.const_i64({1}, "col")});
    Value* cols = temp(c, OpKind::Range, {zero, l_len, one});
    Value* offset = temp(c, OpKind::Sub, {l_len, s_len});
    Value* future = temp(c, OpKind::Greater, {cols, temp(c, OpKind::Add, {rows, offset})});
    Value* filt = scalar_like(c, filter, scores, "causal");
    Value* zf = scalar_like(c, 0.0, scores, "zf");
    scores = temp(c, OpKind::Add, {scores, temp(c, OpKind::Where, {future, filt, zf})});
  }
  Value* p = temp(c, OpKind::Softmax, {scores}, {{"axis", Attribute(int64_t(-1))}});
  Value* y = temp(c, OpKind::MatMul, {p, v});
  Value* yt = temp(c, OpKind::Transpose, {y}, {{"perm", Attribute(std::vector<int64_t>{0, 2, 1, 3})}});
  return temp(c, OpKind::Reshape, {yt, c.const_i64({0, 0, -1}, "merge")});
}

void convert_attention(ConvertContext& c) {
  Value* x = required(c, 0, "input");
  Value* w = required(c, 1, "weights");
  Value* bias = c.input(2);
  Value* mask = c.input(3);
  if (c.input(4)) c.error("input 4 (past) is not supported");
  Value* attention_bias = c.input(5);
  refuse_inputs_from(c, 6, "past_sequence_length");
  int64_t heads = int_attr(c, "num_heads", std::nullopt);
  bool causal = int_attr(c, "unidirectional", 0) != 0;
  double filter = float_attr(c, "mask_filter_value", -10000.0);
  double scale = float_attr(c, "scale", 0.0);
  std::vector<int64_t> sizes;
  if (auto q = c.take_attr("qkv_hidden_sizes")) sizes = q->ints();
  if (int_attr(c, "do_rotary", 0)) c.error("do_rotary is not supported");
  c.take_attr("past_present_share_buffer");
  no_more_attrs(c);
  refuse_outputs_from(c, 1, "present");
  std::optional<size_t> mask_rank = mask ? rank_now(c, mask) : std::nullopt;
  if (mask && !mask_rank) c.error("mask_index needs a rank known while importing");
  if (mask && *mask_rank == 1) {
    // [batch] (EmbedLayerNormalization's mask_index): keys at positions below each row's length attend.
    if (rank_now(c, x) != 3) c.error("a 1-D mask_index needs a 3-D input");
    Value* seq = temp(c, OpKind::Gather, {temp(c, OpKind::Shape, {x}), c.const_tensor(Tensor::scalar<int64_t>(1), "s")});
    Value* pos = temp(c, OpKind::Range, {c.const_tensor(Tensor::scalar<int64_t>(0), "zero"), seq,
                                         c.const_tensor(Tensor::scalar<int64_t>(1), "one")});
    Value* len = temp(c, OpKind::Unsqueeze, {temp(c, OpKind::Cast, {mask}, {{"to", Attribute(int64_t(dtype_onnx_id(DType::i64)))}}),
                                             c.const_i64({1}, "col")});
    mask = temp(c, OpKind::Less, {pos, len});
  } else if (mask && *mask_rank != 2) {
    c.error("mask_index of rank ", *mask_rank, " is not supported (1: lengths, 2: 1 = attend)");
  }
  Value* qkv = temp(c, OpKind::MatMul, {x, w});
  if (bias) qkv = temp(c, OpKind::Add, {qkv, bias});
  Node* split;
  if (!sizes.empty()) {
    if (sizes.size() != 3) c.error("qkv_hidden_sizes must have 3 entries");
    split = c.emit_temp(OpKind::Split, {qkv, c.const_i64(sizes, "qkv_sizes")}, {{"axis", Attribute(int64_t(-1))}}, 3);
  } else {
    split = c.emit_temp(OpKind::Split, {qkv}, {{"axis", Attribute(int64_t(-1))}}, 3);
  }
  Value* q = split_heads(c, split->output(0), heads);
  Value* k = split_heads(c, split->output(1), heads);
  Value* v = split_heads(c, split->output(2), heads);
  Value* y = attend(c, q, k, v, scale, mask, filter, causal, attention_bias);
  c.emit_final(OpKind::Identity, {y}, {});
}

void convert_multi_head_attention(ConvertContext& c) {
  Value* q = required(c, 0, "query");
  Value* k = required(c, 1, "key");
  Value* v = required(c, 2, "value");
  Value* bias = c.input(3);
  Value* key_padding_mask = c.input(4);
  Value* attention_bias = c.input(5);
  refuse_inputs_from(c, 6, "past key/value");
  int64_t heads = int_attr(c, "num_heads", std::nullopt);
  bool causal = int_attr(c, "unidirectional", 0) != 0;
  double filter = float_attr(c, "mask_filter_value", -10000.0);
  double scale = float_attr(c, "scale", 0.0);
  no_more_attrs(c);
  refuse_outputs_from(c, 1, "present key/value");
  for (Value* t : {q, k, v})
    if (auto r = import_rank(t); r && *r != 3) c.error("only 3-D query, key and value are supported");
  if (key_padding_mask && import_rank(key_padding_mask) && *import_rank(key_padding_mask) != 2)
    c.error("key_padding_mask must be 2-D [batch, kv length]");
  if (bias) {  // [3 * D]: the q, k and v biases packed
    Node* parts = c.emit_temp(OpKind::Split, {bias}, {{"axis", Attribute(int64_t(0))}}, 3);
    q = temp(c, OpKind::Add, {q, parts->output(0)});
    k = temp(c, OpKind::Add, {k, parts->output(1)});
    v = temp(c, OpKind::Add, {v, parts->output(2)});
  }
  Value* y = attend(c, split_heads(c, q, heads), split_heads(c, k, heads), split_heads(c, v, heads), scale,
                    key_padding_mask, filter, causal, attention_bias);
  c.emit_final(OpKind::Identity, {y}, {});
}

// ---- QOperator-format quantized ops: dequantize, compute in float, quantize

Value* dequant(ConvertContext& c, size_t x, size_t scale, size_t zp) {
  return temp(c, OpKind::DequantizeLinear, {required(c, x, "quantized input"), required(c, scale, "scale"), c.input(zp)});
}

void quantize_final(ConvertContext& c, Value* y, size_t scale, size_t zp) {
  c.emit_final(OpKind::QuantizeLinear, {y, required(c, scale, "output scale"), c.input(zp)}, {});
}

void convert_qlinear_binary(ConvertContext& c, OpKind op) {
  // A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp
  Value* a = dequant(c, 0, 1, 2);
  Value* b = dequant(c, 3, 4, 5);
  no_more_attrs(c);
  quantize_final(c, temp(c, op, {a, b}), 6, 7);
}

void convert_qlinear_unary(ConvertContext& c, OpKind op, AttrMap attrs) {
  // X, X_scale, X_zp, Y_scale, Y_zp
  Value* x = dequant(c, 0, 1, 2);
  quantize_final(c, temp(c, op, {x}, std::move(attrs)), 3, 4);
}

void convert_qlinear_concat(ConvertContext& c) {
  // Y_scale, Y_zp, then (X, X_scale, X_zp) per input
  int64_t axis = int_attr(c, "axis", std::nullopt);
  no_more_attrs(c);
  if (c.inputs().size() < 5 || (c.inputs().size() - 2) % 3 != 0) c.error("expects Y_scale, Y_zp and triples");
  std::vector<Value*> parts;
  for (size_t i = 2; i + 2 < c.inputs().size(); i += 3) parts.push_back(dequant(c, i, i + 1, i + 2));
  quantize_final(c, temp(c, OpKind::Concat, parts, {{"axis", Attribute(axis)}}), 0, 1);
}

// QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C (int32, scale a_scale * b_scale), y_scale, y_zp. The product of
// the dequantized operands, plus C dequantized, quantized again when y_scale is given.
void convert_qgemm(ConvertContext& c) {
  double alpha = float_attr(c, "alpha", 1.0);
  int64_t ta = int_attr(c, "transA", 0), tb = int_attr(c, "transB", 0);
  no_more_attrs(c);
  Value* a = temp(c, OpKind::DequantizeLinear, {required(c, 0, "A"), required(c, 1, "a_scale"), c.input(2)});
  // Per-channel b_scale runs along N: B's axis 1, or 0 when B is stored transposed.
  Value* b = temp(c, OpKind::DequantizeLinear, {required(c, 3, "B"), required(c, 4, "b_scale"), c.input(5)},
                  {{"axis", Attribute(int64_t(tb ? 0 : 1))}});
  std::vector<Value*> ins = {a, b};
  if (Value* bias = c.input(6)) {
    Value* scale = temp(c, OpKind::Mul, {c.input(1), c.input(4)});
    ins.push_back(temp(c, OpKind::DequantizeLinear, {bias, scale}, {{"axis", Attribute(int64_t(0))}}));
  }
  AttrMap gemm{{"alpha", Attribute(alpha)}, {"transA", Attribute(ta)}, {"transB", Attribute(tb)}};
  if (!c.input(7)) {
    c.emit_final(OpKind::Gemm, ins, gemm);
    return;
  }
  quantize_final(c, temp(c, OpKind::Gemm, ins, gemm), 7, 8);
}

}  // namespace

void register_onnx_contrib(OnnxConverterTable& t) {
  t["com.microsoft:QGemm"] = convert_qgemm;
  const std::string ms = "com.microsoft:";
  t[ms + "FusedMatMul"] = convert_fused_matmul;
  t[ms + "Gelu"] = [](ConvertContext& c) { convert_gelu(c, "none", false); };
  t[ms + "BiasGelu"] = [](ConvertContext& c) { convert_gelu(c, "none", true); };
  t[ms + "FastGelu"] = [](ConvertContext& c) { convert_gelu(c, "tanh", true); };
  t[ms + "QuickGelu"] = convert_quick_gelu;
  t[ms + "BiasAdd"] = convert_bias_add;
  t[ms + "SkipLayerNormalization"] = [](ConvertContext& c) { convert_skip_norm(c, false); };
  t[ms + "SkipSimplifiedLayerNormalization"] = [](ConvertContext& c) { convert_skip_norm(c, true); };
  t[ms + "SimplifiedLayerNormalization"] = convert_simplified_layer_norm;
  // ONNX Runtime's optimizer writes SimplifiedLayerNormalization in the default domain too.
  t["SimplifiedLayerNormalization"] = convert_simplified_layer_norm;
  t[ms + "EmbedLayerNormalization"] = convert_embed_layer_norm;
  t[ms + "Attention"] = convert_attention;
  t[ms + "MultiHeadAttention"] = convert_multi_head_attention;
  t[ms + "QLinearAdd"] = [](ConvertContext& c) { convert_qlinear_binary(c, OpKind::Add); };
  t[ms + "QLinearMul"] = [](ConvertContext& c) { convert_qlinear_binary(c, OpKind::Mul); };
  t[ms + "QLinearSigmoid"] = [](ConvertContext& c) { convert_qlinear_unary(c, OpKind::Sigmoid, {}); };
  t[ms + "QLinearLeakyRelu"] = [](ConvertContext& c) {
    double alpha = float_attr(c, "alpha", 0.01);
    no_more_attrs(c);
    convert_qlinear_unary(c, OpKind::LeakyRelu, {{"alpha", Attribute(alpha)}});
  };
  t[ms + "QLinearGlobalAveragePool"] = [](ConvertContext& c) {
    if (int_attr(c, "channels_last", 0)) c.error("channels_last = 1 is not supported");
    no_more_attrs(c);
    convert_qlinear_unary(c, OpKind::GlobalAveragePool, {});
  };
  t[ms + "QLinearAveragePool"] = [](ConvertContext& c) {
    if (int_attr(c, "channels_last", 0)) c.error("channels_last = 1 is not supported");
    AttrMap attrs = c.attrs();
    c.attrs().clear();
    convert_qlinear_unary(c, OpKind::AveragePool, std::move(attrs));
  };
  t[ms + "QLinearConcat"] = convert_qlinear_concat;
}

}  // namespace cuvil
