// Reference kernels of the control family.
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(If) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Loop) { ctx.error("TODO: not implemented"); }
CUVIL_REF_KERNEL(Scan) { ctx.error("TODO: not implemented"); }

}  // namespace cuvil
