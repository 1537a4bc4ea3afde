// Op definitions (arity, attributes, shape inference) of the tensor family.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(Reshape) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Shape) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Size) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Flatten) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Squeeze) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Unsqueeze) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Transpose) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Concat) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Split) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Slice) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Gather) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(GatherElements) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(GatherND) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ScatterElements) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ScatterND) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Expand) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Tile) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Pad) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Range) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ConstantOfShape) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(EyeLike) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Trilu) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(OneHot) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(NonZero) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Compress) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(Unique) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(DepthToSpace) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(SpaceToDepth) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

CUVIL_DEFINE_OP(ReverseSequence) {
  s.inputs(0, -1).outputs(0, -1).infer_with([](InferContext& c) { c.error("TODO: not implemented"); });
}

}  // namespace cuvil
