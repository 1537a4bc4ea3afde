// Conv and FusedConv on oneDNN: direct convolution (oneDNN picks brgconv / jit kernels for the ISA), bias, the
// residual Sum as a sum post-op and the activation as eltwise post-ops. Activations keep Cuvil's dense layout
// (channels-first, or channels-last when the layout pass chose it, which oneDNN's fast fp32 kernels prefer);
// constant weights are reordered once into the primitive's preferred blocked layout.
#include <cstring>

#include "ir/ops/layout.h"
#include "ir/ops/nn_window.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"

namespace cuvil::onednn {

namespace {

class ConvKernel final : public PrimitiveKernel {
 public:
  bool prepare(const Node& n, const std::vector<PrepareInput>& in) {
    AttrReader attrs(n);
    const PrepareInput &x = in[0], &w = in[1];
    memory::data_type dt;
    if (!to_onednn_type(x.dtype, &dt) || x.shape.size() < 3 || x.shape.size() > 5) return false;
    bool fused = n.op() == OpKind::FusedConv;
    bool cl = fused && attrs.i("channels_last") != 0;
    nn::Activation act = fused ? nn::read_activation(attrs) : nn::Activation{};
    has_sum_ = fused && in.size() > 3 && in[3].present;
    has_bias_ = in.size() > 2 && in[2].present;
    size_t S = x.shape.size() - 2;
    std::vector<int64_t> y = infer_output_dims(n, in)[0];
    // Logical (channels-first) dims, which oneDNN descriptors always use; the format tag says how they are stored.
    Dims xd = cl ? Dims(layout::to_channels_first(x.shape)) : Dims(x.shape.begin(), x.shape.end());
    Dims yd = cl ? Dims(layout::to_channels_first(y)) : Dims(y.begin(), y.end());
    int64_t group = attrs.i("group");
    nn::Window win = nn::read_window(attrs, S, {});
    Dims strides, dil, pl, pr;
    for (size_t i = 0; i < S; ++i) {
      int64_t k = w.shape[2 + i], in_i = xd[2 + i], out_i = yd[2 + i];
      auto [b, e] = nn::window_pads(win, i, in_i, out_i, k);
      int64_t s = win.strides[i], ek = (k - 1) * win.dilations[i] + 1;
      if ((in_i + b + e - ek) / s + 1 != out_i) e = (out_i - 1) * s + ek - in_i - b;
      if (e < 0) return false;
      strides.push_back(s);
      dil.push_back(win.dilations[i] - 1);  // oneDNN counts the gaps
      pl.push_back(b);
      pr.push_back(e);
    }
    memory::format_tag tag = activation_tag(S, cl);
    memory::desc x_md(xd, dt, tag), y_md(yd, dt, tag);
    Dims wd(w.shape.begin(), w.shape.end());
    if (group > 1) {  // [M, C/g, k...] -> [g, M/g, C/g, k...]: the same bytes
      wd.insert(wd.begin(), group);
      wd[1] /= group;
    }
    memory::desc w_user = dense_md(wd, dt);
    memory::desc w_any(wd, dt, memory::format_tag::any);
    memory::desc b_md = has_bias_ ? dense_md({yd[1]}, dt) : memory::desc();

    dnnl::post_ops po;
    if (has_sum_) po.append_sum(1.f);
    if (!append_activation(po, act)) return false;
    dnnl::primitive_attr pattr;
    pattr.set_post_ops(po);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      x_md, w.value ? w_any : w_user, b_md, y_md, strides, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc pd(d, pattr, cpu_engine());
    prim_ = dnnl::convolution_forward(pd);
    set_name(pd);
    args_[DNNL_ARG_SRC] = memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    if (w.value) {
      args_[DNNL_ARG_WEIGHTS] = pack(*w.value, w_user, pd.weights_desc());
    } else {
      args_[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      bind_weights_ = true;
    }
    if (has_bias_) {
      if (in[2].value) args_[DNNL_ARG_BIAS] = pack(*in[2].value, b_md, b_md);
      else args_[DNNL_ARG_BIAS] = memory(b_md, cpu_engine(), DNNL_MEMORY_NONE), bind_bias_ = true;
    }
    return true;
  }

  void run(KernelContext& ctx) override {
    Tensor& y = ctx.output(0);
    if (has_sum_ && ctx.input(3).raw() != y.raw()) std::memcpy(y.raw(), ctx.input(3).raw(), y.nbytes());
    bind(DNNL_ARG_SRC, ctx.input(0).raw());
    bind(DNNL_ARG_DST, y.raw());
    if (bind_weights_) bind(DNNL_ARG_WEIGHTS, ctx.input(1).raw());
    if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(2).raw());
    execute();
  }

 private:
  bool has_sum_ = false, has_bias_ = false, bind_weights_ = false, bind_bias_ = false;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_conv(const Node& n, const std::vector<PrepareInput>& inputs) {
  // Non-constant weights would need a reorder per call when the primitive wants a blocked layout: the dense
  // descriptor is used for them, which oneDNN accepts (slower kernels) or refuses (then the reference runs).
  auto k = std::make_unique<ConvKernel>();
  if (!k->prepare(n, inputs)) return nullptr;
  return k;
}

}  // namespace cuvil::onednn
