// Reference kernels of the recurrent family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(RNN) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(GRU) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(LSTM) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Resize) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
