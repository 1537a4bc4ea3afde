// Kernel selection: generated code for fused element-wise groups (FusedKernel), Cuvil's GEMM for products with a
// constant B, oneDNN for convolutions, the other matrix products and pooling; the hand-written CPU kernels for what
// they cover; the reference kernels for everything else (and for everything when fast kernels are off).
#include "runtime/kernel_selection.h"

#include "codegen/generated_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// "i64[3], f32[5, 3]": the types a kernel was asked for, for fallback reasons.
std::string input_types(const std::vector<PrepareInput>& inputs) {
  std::string s;
  for (const PrepareInput& in : inputs) {
    if (!s.empty()) s += ", ";
    if (!in.present) {
      s += "-";
      continue;
    }
    s += std::string(dtype_name(in.dtype)) + "[";
    for (size_t d = 0; d < in.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(in.shape[d]);
    s += "]";
  }
  return s;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                               const KernelOptions& options,
                                               const std::shared_ptr<codegen::KernelCodeSource>& code) {
  std::string why;
  if (!options.fast) {
    why = "fast kernels are off (reference kernels only)";
  } else if (options.reference_ops.count(n.op())) {
    why = str_cat("KernelOptions::reference_ops holds ", op_name(n.op()));
  } else {
    if (auto k = codegen::prepare_generated_kernel(n, inputs, options, code, &why)) return k;
    if (options.cpu_gemm)
      if (auto k = cpu::prepare_matmul(n, inputs)) return k;
    if (auto k = onednn::prepare_onednn_kernel(n, inputs, options)) return k;
    if (auto k = cpu::prepare_cpu_kernel(n, inputs)) return k;
    if (n.op() == OpKind::FusedKernel) why = "generated code: " + why + "; the body runs op by op";
    else why = str_cat("no fast kernel covers ", op_name(n.op()), " at ", input_types(inputs));
  }
  auto k = wrap_kernel(ref_kernel(n.op()), "ref:" + std::string(op_name(n.op())));
  k->set_fallback(std::move(why));
  return k;
}

std::unique_ptr<PreparedKernel> prepare_shape_generic_kernel(const Node& n, const KernelOptions& options) {
  if (!options.fast || !options.shape_generic || options.reference_ops.count(n.op())) return nullptr;
  if (options.cpu_gemm)
    if (auto k = cpu::prepare_shape_generic_matmul(n)) return k;
  return onednn::prepare_shape_generic_onednn_kernel(n);
}

}  // namespace cuvil
