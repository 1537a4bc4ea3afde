// ONNX converters for the elementwise family: version differences and lowerings (see converter.h).
//
// Legacy forms handled here:
//   - consumed_inputs (opset < 6): an in-place hint for old runtimes; dropped.
//   - broadcast / axis on binary ops (opset < 7): broadcast=1 aligns B with A starting at `axis`; B is reshaped
//     with trailing 1s so that numpy broadcasting gives the same result. broadcast=0 (same shapes) is a special
//     case of numpy broadcasting.
//   - PRelu (opset < 7): a 1-D slope applies per channel (axis 1); it gets trailing 1s the same way.
//   - Clip min/max attributes (opset < 11) become scalar inputs of the input's dtype.
//   - Cast's `to` as a type name (opset < 6) becomes the numeric type id.
//   - Cast/CastLike's saturate and round_mode (opsets 19, 24) concern float8 targets only; kept where they are
//     not the defaults (saturate 1, round_mode "up").
//   - Dropout (opset < 12): is_test is dropped (Cuvil runs inference; ONNX Runtime does the same), ratio becomes
//     an input, and the mask of opsets 7-9 (typed like the data, not bool) gets a CastLike.
#include <cctype>

#include "frontend/onnx/converter.h"
#include "ir/low_precision.h"
#include "ir/shape_inference.h"

namespace cuvil {

namespace {

OpKind kind_of(ConvertContext& ctx) {
  auto k = op_from_name(ctx.op_type());
  if (!k) fail_internal("no op named ", ctx.op_type());
  return *k;
}

void drop_consumed_inputs(ConvertContext& ctx) {
  if (ctx.opset() < 6) ctx.take_attr("consumed_inputs");
}

void drop_legacy_and_emit(ConvertContext& ctx) {
  drop_consumed_inputs(ctx);
  ctx.emit(kind_of(ctx));
}

// The rank of a value at conversion time, for legacy broadcasting. Graph inputs and constants carry their types;
// values computed by nodes are only typed after shape inference, which we then run on the graph built so far
// (only old models take this path, so the repeated work does not matter).
size_t rank_of(ConvertContext& ctx, Value* v, const char* what) {
  auto known = [&]() -> std::optional<size_t> {
    if (v->is_constant()) return v->constant().rank();
    if (!v->producer() && v->shape().rank_known()) return v->shape().rank();
    return std::nullopt;
  };
  if (auto r = known()) return *r;
  if (v->producer()) {
    if (ctx.graph().parent())
      ctx.error("legacy broadcasting inside a subgraph needs the rank of ", what, ", which is not known while importing");
    infer_shapes(ctx.graph());
    if (v->shape().rank_known()) return v->shape().rank();
  }
  ctx.error("legacy broadcasting needs the rank of ", what, " ('", v->name(), "'), which is unknown");
}

// Replaces input i with a view of it that has `pad` more trailing dims of size 1.
void pad_trailing_ones(ConvertContext& ctx, size_t i, int64_t pad) {
  if (pad <= 0) return;
  Value* v = ctx.input(i);
  int64_t rank = int64_t(rank_of(ctx, v, "the padded input"));
  if (v->is_constant()) {
    std::vector<int64_t> shape = v->constant().shape();
    shape.insert(shape.end(), size_t(pad), 1);
    ctx.inputs()[i] = ctx.const_tensor(v->constant().clone().reshaped(shape), "bcast");
    return;
  }
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < pad; ++k) axes.push_back(rank + k);
  ctx.inputs()[i] = ctx.emit_temp(OpKind::Unsqueeze, {v, ctx.const_i64(axes, "axes")}, {})->output(0);
}

// Rewrites opset < 7 `broadcast` / `axis` attributes into numpy broadcasting.
void legacy_broadcast(ConvertContext& ctx) {
  if (ctx.opset() >= 7) return;
  auto bcast = ctx.take_attr("broadcast");
  auto axis = ctx.take_attr("axis");
  if (!bcast || bcast->i() == 0) {
    // broadcast=0 requires equal shapes, which numpy broadcasting accepts unchanged.
    if (axis) ctx.error("attribute 'axis' is only meaningful with broadcast=1");
    return;
  }
  if (bcast->i() != 1) ctx.error("attribute 'broadcast' must be 0 or 1, got ", bcast->i());
  if (!axis) return;  // B aligned with A's trailing dims: numpy broadcasting already does that
  Value* a = ctx.input(0);
  Value* b = ctx.input(1);
  if (!a || !b) ctx.error("needs two inputs");
  int64_t ra = int64_t(rank_of(ctx, a, "input A"));
  int64_t rb = int64_t(rank_of(ctx, b, "input B"));
  int64_t ax = axis->i() < 0 ? axis->i() + ra : axis->i();
  if (ax < 0 || ax + rb > ra)
    ctx.error("axis ", axis->i(), " does not fit B of rank ", rb, " into A of rank ", ra);
  pad_trailing_ones(ctx, 1, ra - ax - rb);  // the trailing dims of A that B does not cover
}

void convert_legacy_binary(ConvertContext& ctx) {
  drop_consumed_inputs(ctx);
  legacy_broadcast(ctx);
  ctx.emit(kind_of(ctx));
}

// Before opset 7 a 1-D slope is per channel (axis 1), not aligned with X's last dim.
void convert_prelu(ConvertContext& ctx) {
  drop_consumed_inputs(ctx);
  Value* x = ctx.input(0);
  Value* slope = ctx.input(1);
  if (ctx.opset() < 7 && x && slope && rank_of(ctx, slope, "slope") == 1)
    pad_trailing_ones(ctx, 1, int64_t(rank_of(ctx, x, "X")) - 2);
  ctx.emit(OpKind::PRelu);
}

// A float attribute as a scalar input with the dtype of `like`.
Value* scalar_like(ConvertContext& ctx, double v, Value* like, const std::string& hint) {
  Value* c = ctx.const_tensor(Tensor::scalar<float>(float(v)), hint);
  return ctx.emit_temp(OpKind::CastLike, {c, like}, {})->output(0);
}

void convert_clip(ConvertContext& ctx) {
  if (ctx.opset() >= 11) {
    ctx.emit(OpKind::Clip);
    return;
  }
  drop_consumed_inputs(ctx);
  Value* x = ctx.input(0);
  if (!x) ctx.error("needs an input");
  auto lo = ctx.take_attr("min");
  auto hi = ctx.take_attr("max");
  ctx.inputs() = {x, lo ? scalar_like(ctx, lo->f(), x, "min") : nullptr,
                  hi ? scalar_like(ctx, hi->f(), x, "max") : nullptr};
  ctx.emit(OpKind::Clip);
}

// TensorProto.DataType names, for Cast's string-typed `to` (opset 1).
std::optional<int64_t> onnx_type_id(const std::string& name) {
  static const std::pair<const char*, int64_t> kTypes[] = {
      {"FLOAT", 1},  {"UINT8", 2},    {"INT8", 3},    {"UINT16", 4},  {"INT16", 5},  {"INT32", 6},
      {"INT64", 7},  {"STRING", 8},   {"BOOL", 9},    {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12},
      {"UINT64", 13}, {"BFLOAT16", 16}, {"FLOAT8E4M3FN", 17}, {"FLOAT8E4M3FNUZ", 18}, {"FLOAT8E5M2", 19},
      {"FLOAT8E5M2FNUZ", 20}, {"UINT4", 21}, {"INT4", 22}, {"FLOAT4E2M1", 23}, {"FLOAT8E8M0", 24}, {"UINT2", 25},
      {"INT2", 26}};
  std::string upper;
  for (char c : name) upper += char(std::toupper(static_cast<unsigned char>(c)));
  for (auto& [n, id] : kTypes)
    if (upper == n) return id;
  return std::nullopt;
}

// Cast-19's `saturate` governs conversions to float8 types only, Cast-24's `round_mode` those to float8e8m0:
// each kept when it is not the default (1, "up"), so other casts' IR is unchanged.
void keep_float8_cast_attrs(ConvertContext& ctx) {
  auto sat = ctx.take_attr("saturate");
  if (sat && sat->kind() == AttrKind::Int && sat->i() == 0) ctx.attrs()["saturate"] = Attribute(int64_t(0));
  auto round = ctx.take_attr("round_mode");
  if (!round || round->kind() != AttrKind::String) return;
  if (!e8m0_rounding_from_name(round->s()))
    ctx.error("attribute 'round_mode' is '", round->s(), "'; ONNX defines 'up', 'down' and 'nearest'");
  if (round->s() != "up") ctx.attrs()["round_mode"] = *round;
}

// Casts to bf16 round to nearest even from opset 19 (onnx 1.14's test data, as ONNX Runtime does); older models'
// test data (onnx 1.12) truncates.
void set_bf16_rounding(ConvertContext& ctx) {
  if (ctx.opset() >= 19) ctx.attrs()["round_bf16"] = Attribute(int64_t(1));
}

void convert_cast(ConvertContext& ctx) {
  keep_float8_cast_attrs(ctx);
  set_bf16_rounding(ctx);
  auto it = ctx.attrs().find("to");
  if (ctx.opset() < 6 && it != ctx.attrs().end() && it->second.kind() == AttrKind::String) {
    auto id = onnx_type_id(it->second.s());
    if (!id) ctx.error("attribute 'to' names an unknown type '", it->second.s(), "'");
    it->second = Attribute(*id);
  }
  ctx.emit(OpKind::Cast);
}

void convert_dropout(ConvertContext& ctx) {
  if (ctx.opset() >= 12) {
    ctx.emit(OpKind::Dropout);
    return;
  }
  drop_consumed_inputs(ctx);
  if (ctx.opset() < 7) ctx.take_attr("is_test");
  auto ratio = ctx.take_attr("ratio");
  Value* x = ctx.input(0);
  if (!x) ctx.error("needs an input");
  std::vector<Value*> inputs = {x};
  if (ratio) inputs.push_back(ctx.const_tensor(Tensor::scalar<float>(float(ratio->f())), "ratio"));
  const auto& outs = ctx.output_names();
  if (outs.size() < 2 || ctx.opset() >= 10) {
    ctx.emit_final(OpKind::Dropout, inputs, ctx.attrs());
    return;
  }
  // Opsets 7-9 type the mask like the data.
  for (auto& [name, a] : ctx.attrs()) ctx.error("attribute '", name, "' is not supported");
  std::string mask = ctx.graph().unique_name(outs[1] + "_bool");
  Node* d = ctx.graph().add_node(OpKind::Dropout, inputs, {outs[0], mask}, {}, ctx.loc());
  ctx.graph().add_node(OpKind::CastLike, {d->output(1), x}, {outs[1]}, {}, ctx.loc());
}

}  // namespace

void register_onnx_elementwise(OnnxConverterTable& t) {
  // Ops whose only legacy attribute is consumed_inputs.
  for (const char* op : {"Abs", "Ceil", "Exp", "Floor", "Log", "Neg", "Reciprocal", "Relu", "Sigmoid", "Sqrt", "Tanh",
                         "Elu", "HardSigmoid", "LeakyRelu", "Selu", "Max", "Min", "Sum", "Mean"})
    t[op] = drop_legacy_and_emit;
  // Binary ops with opset < 7 broadcast/axis attributes.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})
    t[op] = convert_legacy_binary;
  t["PRelu"] = convert_prelu;
  t["Clip"] = convert_clip;
  t["Cast"] = convert_cast;
  t["CastLike"] = [](ConvertContext& ctx) {
    keep_float8_cast_attrs(ctx);
    set_bf16_rounding(ctx);
    ctx.emit(OpKind::CastLike);
  };
  t["Dropout"] = convert_dropout;
}

}  // namespace cuvil
