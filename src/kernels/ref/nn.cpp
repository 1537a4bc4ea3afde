// Reference kernels of the nn family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(Conv) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ConvTranspose) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ConvInteger) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(QLinearConv) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(MaxPool) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(AveragePool) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GlobalAveragePool) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GlobalMaxPool) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(MaxUnpool) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Gemm) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(MatMul) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(MatMulInteger) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(QLinearMatMul) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Einsum) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Det) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(QuantizeLinear) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(DequantizeLinear) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(DynamicQuantizeLinear) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
