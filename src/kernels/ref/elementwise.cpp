// Reference kernels of the elementwise family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(Abs) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Acos) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Acosh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Asin) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Asinh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Atan) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Atanh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Ceil) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Cos) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Cosh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Erf) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Exp) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Floor) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Log) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Neg) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Reciprocal) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Round) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sign) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sin) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sinh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sqrt) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Tan) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Tanh) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Not) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(IsInf) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(IsNaN) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Relu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sigmoid) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Softplus) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Softsign) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Elu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Selu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Celu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LeakyRelu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(HardSigmoid) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(HardSwish) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(ThresholdedRelu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Shrink) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(PRelu) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Clip) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Add) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sub) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Mul) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Div) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Pow) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Mod) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(BitShift) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(And) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Or) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Xor) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Equal) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Greater) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GreaterOrEqual) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Less) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LessOrEqual) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Where) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Max) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Min) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Sum) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Mean) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Cast) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(CastLike) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Identity) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Dropout) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
