// MaxPool, AveragePool and the global pools on oneDNN's pooling primitive, in the tensor's own layout
// (channels-first or channels-last).
#include "ir/ops/layout.h"
#include "ir/ops/nn_window.h"
#include "kernels/cpu/nan_scan.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil::onednn {

namespace {

class PoolKernel final : public PrimitiveKernel {
 public:
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y) {
    AttrReader attrs(n);
    memory::data_type dt;
    const auto& xs = in[0].shape;
    // u8: a MaxPool between int8 layers (runtime/int8_links.h); max commutes with the monotone quantization.
    // s8 too: a MaxPool between QLinearConvs of s8 activations (kernels/onednn/integer_ops.cpp).
    u8_ = (in[0].dtype == DType::u8 || in[0].dtype == DType::i8) && n.op() == OpKind::MaxPool;
    if (u8_) dt = in[0].dtype == DType::u8 ? memory::data_type::u8 : memory::data_type::s8;
    else if (in[0].dtype == DType::bf16 && n.op() == OpKind::MaxPool) dt = memory::data_type::bf16;  // bf16 links
    else if (!to_onednn_type(in[0].dtype, &dt)) return false;
    if (xs.size() < 3 || xs.size() > 5 || n.num_outputs() != 1) return false;
    bool cl = attrs.i("channels_last") != 0;
    size_t S = xs.size() - 2;
    Dims xd = cl ? Dims(layout::to_channels_first(xs)) : Dims(xs.begin(), xs.end());
    Dims yd = cl ? Dims(layout::to_channels_first(y)) : Dims(y.begin(), y.end());
    Dims kernel, strides, dil, pl, pr;
    dnnl::algorithm alg;
    bool global = n.op() == OpKind::GlobalAveragePool || n.op() == OpKind::GlobalMaxPool;
    if (global) {
      max_ = n.op() == OpKind::GlobalMaxPool;
      alg = max_ ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg;
      kernel = Dims(xd.begin() + 2, xd.end());
      strides = Dims(S, 1);
      dil = pl = pr = Dims(S, 0);
    } else {
      nn::WindowAttrs which;
      which.has_ceil_mode = true;
      which.kernel_required = true;
      nn::Window win = nn::read_window(attrs, S, which);
      if (n.op() == OpKind::MaxPool) {
        alg = dnnl::algorithm::pooling_max;
        max_ = true;
      } else {
        bool include_pad = attrs.i("count_include_pad") != 0;
        // With ceil_mode the last window may reach past the explicit padding; ONNX and oneDNN count such
        // windows' divisors differently when padding is included, so that case stays on the reference.
        if (include_pad && win.ceil_mode) return false;
        // Dilated average pooling (opset 19) is rare; the reference runs it.
        for (int64_t d : win.dilations)
          if (d != 1) return false;
        alg = include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
      }
      for (size_t i = 0; i < S; ++i) {
        int64_t k = win.kernel[i], in_i = xd[2 + i], out_i = yd[2 + i], s = win.strides[i];
        auto [b, e] = nn::window_pads(win, i, in_i, out_i, k);
        int64_t ek = (k - 1) * win.dilations[i] + 1;
        if ((in_i + b + e - ek) / s + 1 != out_i) e = (out_i - 1) * s + ek - in_i - b;
        if (e < 0) return false;
        kernel.push_back(k);
        strides.push_back(s);
        dil.push_back(win.dilations[i] - 1);
        pl.push_back(b);
        pr.push_back(e);
      }
    }
    memory::format_tag tag = activation_tag(S, cl);
    // oneDNN pools 8-bit integers on its jit kernels only channels-last (channels-first runs ref:any, 100x
    // slower): a channels-first tensor is reordered in and out.
    bool reordered = u8_ && !cl;
    memory::format_tag inner = reordered ? activation_tag(S, true) : tag;
    memory::desc x_md(xd, dt, inner), y_md(yd, dt, inner);
    double work = double(shape_numel(y));
    for (int64_t k : kernel) work *= double(k);
    if (work < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, x_md, y_md, strides, kernel, dil, pl, pr);
    dnnl::pooling_v2_forward::primitive_desc pd(d, thread_safe_attr(), cpu_engine());
    prim_ = dnnl::pooling_v2_forward(pd);
    set_name(pd);
    if (reordered) {
      user_x_ = memory(memory::desc(xd, dt, tag), cpu_engine(), DNNL_MEMORY_NONE);
      user_y_ = memory(memory::desc(yd, dt, tag), cpu_engine(), DNNL_MEMORY_NONE);
      src_ = memory(pd.src_desc(), cpu_engine());
      dst_ = memory(pd.dst_desc(), cpu_engine());
      in_ = Reorder(user_x_, src_);
      out_ = Reorder(dst_, user_y_);
      args_[DNNL_ARG_SRC] = src_;
      args_[DNNL_ARG_DST] = dst_;
      return true;
    }
    args_[DNNL_ARG_SRC] = memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    return true;
  }

  void run(KernelContext& ctx) override {
    // oneDNN's max drops NaN (an ordered compare keeps the other operand); the reference propagates it, as
    // PyTorch does. The price on inputs without NaN is one more vectorized read of the input.
    const Tensor& x = ctx.input(0);
    if (max_ && !u8_ && (x.dtype() == DType::bf16  // a MaxPool inside a bf16 link (runtime/bf16_links.h)
                                    ? cpu::any_nan_bf16(static_cast<const uint16_t*>(x.raw()), x.numel())
                                    : cpu::any_nan(x.data<float>(), x.numel()))) {
      ref_kernel(ctx.node().op())(ctx);
      return;
    }
    if (in_) {
      ScopedThreads t(threads_);
      user_x_.set_data_handle(const_cast<void*>(x.raw()));
      in_.execute(user_x_, src_);
      execute();
      user_y_.set_data_handle(ctx.output(0).raw());
      out_.execute(dst_, user_y_);
      return;
    }
    bind(DNNL_ARG_SRC, ctx.input(0).raw());
    bind(DNNL_ARG_DST, ctx.output(0).raw());
    execute();
  }

 private:
  bool max_ = false, u8_ = false;  // u8_: 8-bit integers (u8 or s8)
  memory user_x_, user_y_, src_, dst_;  // a channels-first 8-bit tensor's reorders (see prepare)
  Reorder in_, out_;
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_pool(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y) {
  auto k = std::make_unique<PoolKernel>();
  if (!k->prepare(n, inputs, y)) return nullptr;
  return k;
}

}  // namespace cuvil::onednn
