#include "kernels/ref/ref_kernels.h"

#include <array>

namespace cuvil {

// A missing kernel is a link error naming ref_kernel_<Name>.
#define CUVIL_OP(name, family) void ref_kernel_##name(KernelContext& ctx);
#include "ir/ops.def"
#undef CUVIL_OP

KernelFn ref_kernel(OpKind k) {
  static constexpr std::array<KernelFn, kNumOps> table = {
#define CUVIL_OP(name, family) &ref_kernel_##name,
#include "ir/ops.def"
#undef CUVIL_OP
  };
  return table[size_t(k)];
}

}  // namespace cuvil
