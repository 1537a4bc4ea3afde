// ONNX converters for the reduction family: version differences and lowerings (see converter.h).
//
// Ops whose every opset up to 17 matches the op table (ArgMax/ArgMin, CumSum, LayerNormalization, LRN,
// MeanVarianceNormalization, the losses, TopK from opset 10) use the default converter.
#include <onnx/onnx_pb.h>

#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

void reject_leftover_attrs(ConvertContext& ctx) {
  if (!ctx.attrs().empty()) ctx.error("attribute '", ctx.attrs().begin()->first, "' is not supported");
}

// Reduce*: the IR takes axes as an input (opset 18 form); older opsets (< 13 for ReduceSum) have an attribute.
void convert_reduce(ConvertContext& ctx, OpKind op, int axes_input_since) {
  if (ctx.opset() < axes_input_since) {
    if (ctx.inputs().size() > 1) ctx.error("takes one input before opset ", axes_input_since);
    if (auto axes = ctx.take_attr("axes")) {
      if (axes->kind() != AttrKind::Ints) ctx.error("attribute 'axes' must be a list of ints");
      // An empty list means all axes, as does no axes input (noop_with_empty_axes is 0 here).
      ctx.inputs().push_back(ctx.const_i64(axes->ints(), "axes"));
    }
  }
  ctx.emit(op);
}

// Softmax/LogSoftmax/Hardmax before opset 13 work on the input flattened to 2-D at `axis` (default 1): lowered to
// Flatten -> op(axis=-1) -> Reshape(Shape(input)). Where the input's rank is known here and `axis` is its last
// dim, flattening changes nothing and the op is emitted directly.
void convert_softmax_like(ConvertContext& ctx, OpKind op) {
  if (ctx.opset() >= 13) {
    ctx.emit(op);
    return;
  }
  int64_t axis = 1;
  if (auto a = ctx.take_attr("axis")) {
    if (a->kind() != AttrKind::Int) ctx.error("attribute 'axis' must be an int");
    axis = a->i();
  }
  reject_leftover_attrs(ctx);
  Value* x = ctx.input(0);
  if (!x) ctx.error("input 0 is required");
  // Only graph inputs and constants are typed during import.
  if ((x->is_graph_input() || x->is_constant()) && x->shape().rank_known()) {
    int64_t rank = int64_t(x->shape().rank());
    if (axis < -rank || axis >= rank) ctx.error("axis ", axis, " is out of range for rank ", rank);
    if ((axis < 0 ? axis + rank : axis) == rank - 1) {
      ctx.emit_final(op, {x}, {{"axis", int64_t(-1)}});
      return;
    }
  }
  Node* flat = ctx.emit_temp(OpKind::Flatten, {x}, {{"axis", axis}});
  Node* y = ctx.emit_temp(op, {flat->output(0)}, {{"axis", int64_t(-1)}});
  Node* shape = ctx.emit_temp(OpKind::Shape, {x}, {});
  // allowzero: a 0 in the original shape is a real 0, not "copy this dim".
  ctx.emit_final(OpKind::Reshape, {y->output(0), shape->output(0)}, {{"allowzero", int64_t(1)}});
}

// TopK opset 1 has `k` as an attribute; opset 10 made it an input.
void convert_topk(ConvertContext& ctx) {
  if (ctx.opset() < 10) {
    auto k = ctx.take_attr("k");
    if (!k || k->kind() != AttrKind::Int) ctx.error("attribute 'k' (an int) is required before opset 10");
    if (ctx.inputs().size() > 1) ctx.error("takes one input before opset 10");
    ctx.inputs().push_back(ctx.const_i64({k->i()}, "k"));
  }
  ctx.emit(OpKind::TopK);
}

void convert_instance_norm(ConvertContext& ctx) {
  ctx.take_attr("consumed_inputs");  // opset 1 buffer-reuse hint; no semantics
  ctx.emit(OpKind::InstanceNormalization);
}

// BatchNormalization before opset 14: training is implied by asking for the mean/var outputs (there is no
// training_mode); outputs 3-4 (saved_mean, saved_var) have no IR equivalent; `is_test` and `consumed_inputs` are
// dropped; spatial=0 (per-activation statistics, scale etc. shaped [C, d1, ...]) is lowered as ONNX suggests, by
// flattening X to [N, C*d1*...] around a plain BatchNormalization.
void convert_batch_norm(ConvertContext& ctx) {
  if (ctx.opset() >= 14) {
    ctx.emit(OpKind::BatchNormalization);
    return;
  }
  ctx.take_attr("consumed_inputs");
  bool is_test = false, spatial = true;
  if (auto a = ctx.take_attr("is_test")) is_test = a->kind() == AttrKind::Int && a->i() != 0;
  if (auto a = ctx.take_attr("spatial")) spatial = a->kind() != AttrKind::Int || a->i() != 0;
  const auto& proto = ctx.proto();
  for (int i = 3; i < proto.output_size(); ++i)
    if (!proto.output(i).empty())
      ctx.error("output ", i, " ('", proto.output(i), "', saved_mean/saved_var) is not supported");
  size_t num_outputs = ctx.output_names().size();
  bool training = num_outputs > 1;
  if (training && is_test) ctx.error("is_test=1 cannot produce the training outputs mean/var");
  if (training) ctx.attrs()["training_mode"] = int64_t(1);
  if (ctx.inputs().size() != 5) ctx.error("expects 5 inputs, got ", ctx.inputs().size());
  if (spatial) {
    ctx.emit(OpKind::BatchNormalization);
    return;
  }
  std::vector<Value*> in = ctx.inputs();
  for (Value* v : in)
    if (!v) ctx.error("all 5 inputs are required");
  Value* flat_shape = ctx.const_i64({-1}, "flat");
  std::vector<Value*> bn_in = {ctx.emit_temp(OpKind::Flatten, {in[0]}, {{"axis", int64_t(1)}})->output(0)};
  for (size_t i = 1; i < 5; ++i) bn_in.push_back(ctx.emit_temp(OpKind::Reshape, {in[i], flat_shape}, {})->output(0));
  Node* bn = ctx.emit_temp(OpKind::BatchNormalization, bn_in, ctx.attrs(), num_outputs);
  // Each output goes back to the shape of what it normalizes: Y to X's, running mean/var to the statistics'.
  const auto& names = ctx.output_names();
  for (size_t k = 0; k < num_outputs; ++k) {
    Value* like = k == 0 ? in[0] : in[2 + k];
    Node* shape = ctx.emit_temp(OpKind::Shape, {like}, {});
    ctx.graph().add_node(OpKind::Reshape, {bn->output(k), shape->output(0)}, {names[k]},
                         {{"allowzero", int64_t(1)}}, ctx.loc());
  }
}

}  // namespace

void register_onnx_reduction(OnnxConverterTable& t) {
  struct ReduceRow {
    const char* name;
    OpKind op;
    int axes_input_since;
  };
  // Opset 18 moved `axes` to an input for all but ReduceSum (13); Cuvil imports opsets <= 17.
  for (ReduceRow r : {ReduceRow{"ReduceSum", OpKind::ReduceSum, 13}, ReduceRow{"ReduceMean", OpKind::ReduceMean, 18},
                      ReduceRow{"ReduceMax", OpKind::ReduceMax, 18}, ReduceRow{"ReduceMin", OpKind::ReduceMin, 18},
                      ReduceRow{"ReduceProd", OpKind::ReduceProd, 18}, ReduceRow{"ReduceL1", OpKind::ReduceL1, 18},
                      ReduceRow{"ReduceL2", OpKind::ReduceL2, 18},
                      ReduceRow{"ReduceLogSum", OpKind::ReduceLogSum, 18},
                      ReduceRow{"ReduceLogSumExp", OpKind::ReduceLogSumExp, 18},
                      ReduceRow{"ReduceSumSquare", OpKind::ReduceSumSquare, 18}}) {
    t[r.name] = [r](ConvertContext& ctx) { convert_reduce(ctx, r.op, r.axes_input_since); };
  }
  t["Softmax"] = [](ConvertContext& ctx) { convert_softmax_like(ctx, OpKind::Softmax); };
  t["LogSoftmax"] = [](ConvertContext& ctx) { convert_softmax_like(ctx, OpKind::LogSoftmax); };
  t["Hardmax"] = [](ConvertContext& ctx) { convert_softmax_like(ctx, OpKind::Hardmax); };
  t["TopK"] = convert_topk;
  t["InstanceNormalization"] = convert_instance_norm;
  t["BatchNormalization"] = convert_batch_norm;
}

}  // namespace cuvil
