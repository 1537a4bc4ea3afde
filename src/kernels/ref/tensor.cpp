// Reference kernels of the tensor family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(Reshape) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Shape) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Size) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Flatten) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Squeeze) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Unsqueeze) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Transpose) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Concat) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Split) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Slice) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Gather) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GatherElements) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GatherND) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ScatterElements) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ScatterND) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Expand) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Tile) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Pad) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Range) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ConstantOfShape) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(EyeLike) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Trilu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(OneHot) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(NonZero) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Compress) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Unique) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(DepthToSpace) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(SpaceToDepth) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReverseSequence) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
