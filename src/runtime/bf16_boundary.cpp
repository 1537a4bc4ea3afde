// A linked convolution's f32 kernel between bf16 activations (see bf16_boundary.h).
#include "runtime/bf16_boundary.h"

#include "support/half.h"

namespace cuvil {

namespace {

bool linked_bf16(const PrepareInput& in, const std::vector<PrepareInput>& inputs) {
  return in.present && in.dtype == DType::bf16 && inputs.size() > 1 && inputs[1].dtype == DType::f32;
}

class Bf16BoundaryKernel final : public PreparedKernel {
 public:
  Bf16BoundaryKernel(bool y_bf16, std::unique_ptr<PreparedKernel> inner) : inner_(std::move(inner)), y_bf16_(y_bf16) {
    precision = inner_->precision;
    if (precision.reason.empty()) precision.reason = "no bf16 kernel for this layer";
    precision.reason += " (bf16 activations converted around it)";
  }

  void run(KernelContext& ctx) override {
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
    for (size_t i : {size_t(0), size_t(3)}) {
      if (i >= ins.size() || !ins[i] || ins[i]->dtype() != DType::bf16 || ctx.input(1).dtype() != DType::f32) continue;
      Tensor& wide = i == 0 ? x_ : sum_;
      if (!wide.defined() || wide.shape() != ins[i]->shape()) wide = Tensor::zeros(DType::f32, ins[i]->shape());
      const bf16_t* b = ins[i]->data<bf16_t>();
      float* f = wide.data<float>();
      for (int64_t j = 0; j < wide.numel(); ++j) f[j] = float(b[j]);
      ins[i] = &wide;
    }
    std::vector<Tensor> outs(1);
    Tensor& y = ctx.output(0);
    if (y_bf16_) {
      if (!y_.defined() || y_.shape() != y.shape()) y_ = Tensor::zeros(DType::f32, y.shape());
      outs[0] = y_;
    } else {
      outs[0] = y;
    }
    KernelContext inner(ctx.node(), std::move(ins), &outs, nullptr);
    inner_->run(inner);
    if (y_bf16_) {
      const float* f = y_.data<float>();
      bf16_t* b = y.data<bf16_t>();
      for (int64_t j = 0; j < y.numel(); ++j) b[j] = bf16_t(f[j]);
    }
  }
  std::string impl_name() const override { return inner_->impl_name(); }
  std::string fallback() const override { return inner_->fallback(); }

 private:
  std::unique_ptr<PreparedKernel> inner_;
  bool y_bf16_;
  Tensor x_, sum_, y_;  // the f32 sides
};

}  // namespace

bool has_bf16_link(const Node& n, const std::vector<PrepareInput>& inputs) {
  if ((n.op() != OpKind::FusedConv && n.op() != OpKind::FusedMatMul) || inputs.size() < 2 ||
      inputs[1].dtype != DType::f32)
    return false;
  return n.output(0)->dtype() == DType::bf16 || linked_bf16(inputs[0], inputs) ||
         (inputs.size() > 3 && linked_bf16(inputs[3], inputs));
}

std::vector<PrepareInput> bf16_f32_view(const std::vector<PrepareInput>& inputs) {
  std::vector<PrepareInput> v = inputs;
  for (size_t i : {size_t(0), size_t(3)})
    if (i < v.size() && linked_bf16(v[i], inputs)) v[i].dtype = DType::f32;
  return v;
}

std::unique_ptr<PreparedKernel> wrap_bf16_boundary(const Node& n, std::unique_ptr<PreparedKernel> inner) {
  return std::make_unique<Bf16BoundaryKernel>(n.output(0)->dtype() == DType::bf16, std::move(inner));
}

}  // namespace cuvil
