#include "kernels/prepared_kernel.h"

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

}  // namespace cuvil
