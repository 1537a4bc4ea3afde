// Op definitions (arity, attributes, shape inference) of the recurrent family.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(RNN) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(GRU) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(LSTM) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Resize) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

}  // namespace cuvil
