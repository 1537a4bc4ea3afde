// Kernel selection: generated code for fused element-wise groups (FusedKernel), Cuvil's GEMM for products with a
// constant B, oneDNN for convolutions, the other matrix products and pooling; the hand-written CPU kernels for what
// they cover; the reference kernels for everything else (and for everything when fast kernels are off).
#include "codegen/generated_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/prepared_kernel.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

class FunctionKernel final : public PreparedKernel {
 public:
  FunctionKernel(KernelFn fn, std::string name) : fn_(fn), name_(std::move(name)) {}
  void run(KernelContext& ctx) override { fn_(ctx); }
  std::string impl_name() const override { return name_; }

 private:
  KernelFn fn_;
  std::string name_;
};

}  // namespace

std::unique_ptr<PreparedKernel> wrap_kernel(KernelFn fn, std::string name) {
  return std::make_unique<FunctionKernel>(fn, std::move(name));
}

std::vector<std::vector<int64_t>> infer_output_dims(const Node& n, const std::vector<PrepareInput>& inputs) {
  std::vector<TensorType> types(inputs.size());
  std::vector<const TensorType*> type_ptrs;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types[i] = TensorType{inputs[i].dtype, Shape::of(inputs[i].shape)};
    type_ptrs.push_back(inputs[i].present ? &types[i] : nullptr);
    values.push_back(inputs[i].value);
  }
  int64_t fresh = 0;
  InferContext ctx(n, type_ptrs, values, {}, &fresh);
  op_schema(n.op()).infer(ctx);
  std::vector<std::vector<int64_t>> dims(n.num_outputs());
  for (size_t k = 0; k < dims.size(); ++k)
    if (ctx.output_set(k) && ctx.output_types()[k].shape.is_static()) dims[k] = ctx.output_types()[k].shape.static_dims();
  return dims;
}

std::unique_ptr<PreparedKernel> prepare_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                               const KernelOptions& options) {
  if (options.fast && !options.reference_ops.count(n.op())) {
    if (auto k = codegen::prepare_generated_kernel(n, inputs, options)) return k;
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
