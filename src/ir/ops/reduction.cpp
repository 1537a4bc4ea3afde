// Op definitions (arity, attributes, shape inference) of the reduction family.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(ReduceSum) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceMean) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceMax) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceMin) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceProd) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceL1) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceL2) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceLogSum) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceLogSumExp) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReduceSumSquare) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ArgMax) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ArgMin) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Softmax) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LogSoftmax) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Hardmax) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(CumSum) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(TopK) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LayerNormalization) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(InstanceNormalization) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(BatchNormalization) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LRN) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(MeanVarianceNormalization) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(NegativeLogLikelihoodLoss) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(SoftmaxCrossEntropyLoss) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

}  // namespace cuvil
