// Op definitions (arity, attributes, shape inference) of the elementwise family.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(Abs) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Acos) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Acosh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Asin) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Asinh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Atan) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Atanh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Ceil) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Cos) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Cosh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Erf) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Exp) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Floor) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Log) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Neg) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Reciprocal) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Round) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sign) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sin) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sinh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sqrt) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Tan) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Tanh) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Not) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(IsInf) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(IsNaN) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Relu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sigmoid) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Softplus) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Softsign) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Elu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Selu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Celu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LeakyRelu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(HardSigmoid) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(HardSwish) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ThresholdedRelu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Shrink) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(PRelu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Clip) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Add) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sub) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Mul) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Div) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Pow) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Mod) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(BitShift) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(And) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Or) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Xor) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Equal) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Greater) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(GreaterOrEqual) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Less) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LessOrEqual) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Where) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Max) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Min) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Sum) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Mean) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Cast) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(CastLike) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Identity) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Dropout) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

}  // namespace cuvil
