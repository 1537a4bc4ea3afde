// Op definitions (arity, attributes, shape inference) of the control family.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(If) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Loop) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Scan) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

}  // namespace cuvil
