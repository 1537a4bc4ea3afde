// Kernel selection: generated code for fused element-wise groups (FusedKernel), Cuvil's GEMM for products with a
// constant B, oneDNN for convolutions, the other matrix products and pooling; the hand-written CPU kernels for what
// they cover; the reference kernels for everything else (and for everything when fast kernels are off).
#include "runtime/kernel_selection.h"

#include "codegen/generated_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

std::unique_ptr<PreparedKernel> prepare_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                               const KernelOptions& options,
                                               const std::shared_ptr<codegen::KernelCodeSource>& code) {
  if (options.fast && !options.reference_ops.count(n.op())) {
    if (auto k = codegen::prepare_generated_kernel(n, inputs, options, code)) return k;
    if (options.cpu_gemm)
      if (auto k = cpu::prepare_matmul(n, inputs)) return k;
    if (auto k = onednn::prepare_onednn_kernel(n, inputs, options)) return k;
    if (auto k = cpu::prepare_cpu_kernel(n, inputs)) return k;
  }
  return wrap_kernel(ref_kernel(n.op()), "ref:" + std::string(op_name(n.op())));
}

std::unique_ptr<PreparedKernel> prepare_shape_generic_kernel(const Node& n, const KernelOptions& options) {
  if (!options.fast || !options.shape_generic || options.reference_ops.count(n.op())) return nullptr;
  if (options.cpu_gemm)
    if (auto k = cpu::prepare_shape_generic_matmul(n)) return k;
  return onednn::prepare_shape_generic_onednn_kernel(n);
}

}  // namespace cuvil
