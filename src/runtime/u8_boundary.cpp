// A linked layer's f32 kernel between u8 activations (see u8_boundary.h).
#include "runtime/u8_boundary.h"

#include "kernels/onednn/onednn_kernels.h"

namespace cuvil {

namespace {

double attr_f(const Node& n, const char* name) { return n.has_attr(name) ? n.attr(name).f() : 0.0; }
int64_t attr_i(const Node& n, const char* name) { return n.has_attr(name) ? n.attr(name).i() : 0; }

class U8BoundaryKernel final : public PreparedKernel {
 public:
  U8BoundaryKernel(const Node& n, bool u8_x, std::unique_ptr<PreparedKernel> inner)
      : inner_(std::move(inner)), u8_x_(u8_x) {
    x_scale_ = float(attr_f(n, "quant_x_scale"));
    x_zp_ = int32_t(attr_i(n, "quant_x_zero_point"));
    y_scale_ = float(attr_f(n, "quant_y_scale"));
    y_zp_ = int32_t(attr_i(n, "quant_y_zero_point"));
    sum_scale_ = float(attr_f(n, "quant_sum_scale"));
    sum_zp_ = int32_t(attr_i(n, "quant_sum_zero_point"));
    precision = inner_->precision;
    if (precision.reason.empty()) precision.reason = "no int8 kernel for this layer";
    precision.reason += " (u8 activations converted around it)";
  }

  void run(KernelContext& ctx) override {
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
    if (u8_x_) {
      const Tensor& x = ctx.input(0);
      if (!x_.defined() || x_.shape() != x.shape()) x_ = Tensor::zeros(DType::f32, x.shape());
      const uint8_t* q = x.data<uint8_t>();
      float* f = x_.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) f[i] = float(int32_t(q[i]) - x_zp_) * x_scale_;
      ins[0] = &x_;
    }
    if (ins.size() > 3 && ins[3] && ins[3]->dtype() == DType::u8) {  // a linked residual
      const Tensor& sum = *ins[3];
      if (!sum_.defined() || sum_.shape() != sum.shape()) sum_ = Tensor::zeros(DType::f32, sum.shape());
      const uint8_t* q = sum.data<uint8_t>();
      float* f = sum_.data<float>();
      for (int64_t i = 0; i < sum.numel(); ++i) f[i] = float(int32_t(q[i]) - sum_zp_) * sum_scale_;
      ins[3] = &sum_;
    }
    std::vector<Tensor> outs(1);
    Tensor& y = ctx.output(0);
    if (y_scale_ > 0) {
      if (!y_.defined() || y_.shape() != y.shape()) y_ = Tensor::zeros(DType::f32, y.shape());
      outs[0] = y_;
    } else {
      outs[0] = y;
    }
    KernelContext inner(ctx.node(), std::move(ins), &outs, nullptr);
    inner_->run(inner);
    if (y_scale_ > 0) {
      const float* f = y_.data<float>();
      uint8_t* q = y.data<uint8_t>();
      float inv = 1.f / y_scale_;
      for (int64_t i = 0; i < y.numel(); ++i) q[i] = onednn::quantize_u8(f[i], inv, y_zp_);
    }
  }
  std::string impl_name() const override { return inner_->impl_name(); }
  std::string fallback() const override { return inner_->fallback(); }

 private:
  std::unique_ptr<PreparedKernel> inner_;
  bool u8_x_;
  float x_scale_ = 0, y_scale_ = 0, sum_scale_ = 0;
  int32_t x_zp_ = 0, y_zp_ = 0, sum_zp_ = 0;
  Tensor x_, y_, sum_;  // the f32 sides
};

}  // namespace

bool has_u8_link(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (n.op() != OpKind::FusedConv && n.op() != OpKind::FusedMatMul) return false;
  return attr_f(n, "quant_y_scale") > 0 || (!inputs.empty() && inputs[0].dtype == DType::u8) ||
         (inputs.size() > 3 && inputs[3].present && inputs[3].dtype == DType::u8);
}

std::vector<PrepareInput> f32_view(const Node& n, const std::vector<PrepareInput>& inputs) {
  std::vector<PrepareInput> v = inputs;
  for (size_t i : {size_t(0), size_t(3)})
    if (i < v.size() && v[i].dtype == DType::u8) v[i].dtype = DType::f32;
  return v;
}

std::unique_ptr<PreparedKernel> wrap_u8_boundary(const Node& n, const std::vector<PrepareInput>& inputs,
                                                 std::unique_ptr<PreparedKernel> inner) {
  bool u8_x = !inputs.empty() && inputs[0].dtype == DType::u8;
  return std::make_unique<U8BoundaryKernel>(n, u8_x, std::move(inner));
}

}  // namespace cuvil
