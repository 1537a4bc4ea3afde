// Reference kernels of the reduction family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(ReduceSum) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceMean) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceMax) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceMin) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceProd) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceL1) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceL2) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceLogSum) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceLogSumExp) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ReduceSumSquare) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ArgMax) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ArgMin) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Softmax) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LogSoftmax) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Hardmax) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(CumSum) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(TopK) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LayerNormalization) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(InstanceNormalization) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(BatchNormalization) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LRN) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(MeanVarianceNormalization) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(NegativeLogLikelihoodLoss) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(SoftmaxCrossEntropyLoss) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
