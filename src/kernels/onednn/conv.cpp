// Conv and FusedConv on oneDNN: direct convolution (oneDNN picks brgconv / jit kernels for the ISA), bias, the
// residual Sum as a sum post-op and the activation as eltwise post-ops. Activations keep Cuvil's dense layout
// (channels-first, or channels-last when the layout pass chose it, which oneDNN's fast fp32 kernels prefer);
// constant weights are reordered once into the primitive's preferred blocked layout.
//
// 3x3 stride-1 2-D convolutions use Winograd when oneDNN has it (KernelOptions::winograd): 20-40% faster here on
// ResNet's shapes, at the price of a blocked activation layout (reordered in and out around the primitive, which
// costs far less than it saves) and a slightly different rounding (relative error ~1e-6 instead of ~1e-7).
#include <cstring>

#include "ir/ops/layout.h"
#include "ir/ops/nn_window.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_ops.h"

namespace cuvil::onednn {

namespace {

class ConvKernel final : public PrimitiveKernel {
 public:
  // single: on the calling thread alone whatever the work (the single-threaded half of a SpinAwareKernel).
  // bf16: source and weights in bf16 (the source converted per call, the weights once), f32 accumulation and
  // output; false, with `reason` set, where oneDNN has no fast bf16 kernel for the node.
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y,
               const KernelOptions& options, bool single, bool bf16 = false, std::string* reason = nullptr) {
    AttrReader attrs(n);
    const PrepareInput &x = in[0], &w = in[1];
    memory::data_type dt;
    // bf16 links (runtime/bf16_links.h): X, the residual Sum and Y may be bf16 beside f32 weights; only the bf16
    // kernel takes them (kernel selection wraps an f32 one in conversions).
    bool x_bf16 = x.dtype == DType::bf16 && w.dtype == DType::f32;
    bool sum_bf16 = in.size() > 3 && in[3].present && in[3].dtype == DType::bf16 && w.dtype == DType::f32;
    bool y_bf16 = n.output(0)->dtype() == DType::bf16 && w.dtype == DType::f32;
    if ((x_bf16 || sum_bf16 || y_bf16) && !bf16) return false;
    if (!to_onednn_type(w.dtype, &dt) || x.shape.size() < 3 || x.shape.size() > 5) return false;
    if (bf16 && !w.value) {
      *reason = "weights not constant";
      return false;
    }
    if (bf16 && attrs.i("group") > 1 && !x_bf16 && !y_bf16) {
      // A depthwise (or grouped) layer does a few multiplies per element it reads: converting its input costs more
      // than bf16 saves (MobileNetV2, CPU time per image on one thread: f32 8.0 ms, bf16 with its depthwise layers
      // in bf16 7.2 ms, kept f32 5.9 ms). Linked (bf16 in or out, runtime/bf16_links.h) it moves half the bytes
      // and converts nothing.
      *reason = "grouped convolution: memory-bound, converting its input costs more than bf16 saves";
      return false;
    }
    // The types of source and weights (bf16 or dt); bias and destination stay dt.
    memory::data_type lp = bf16 ? memory::data_type::bf16 : dt;
    bool fused = n.op() == OpKind::FusedConv;
    bool cl = fused && attrs.i("channels_last") != 0;
    nn::Activation act = fused ? nn::read_activation(attrs) : nn::Activation{};
    has_sum_ = fused && in.size() > 3 && in[3].present;
    has_bias_ = in.size() > 2 && in[2].present;
    size_t S = x.shape.size() - 2;
    int64_t group = attrs.i("group");
    ConvGeometry geo;  // logical (channels-first) dims: oneDNN's descriptors use them, the format tag says the layout
    if (!conv_geometry(attrs, x.shape, y, w.shape, cl, &geo)) return false;
    const Dims &xd = geo.x, &yd = geo.y, &strides = geo.strides, &dil = geo.dilations, &pl = geo.pad_begin,
               &pr = geo.pad_end;
    memory::format_tag tag = activation_tag(S, cl);
    memory::desc x_md(xd, dt, tag), y_md(yd, y_bf16 ? memory::data_type::bf16 : dt, tag);
    Dims wd(w.shape.begin(), w.shape.end());
    if (group > 1) {  // [M, C/g, k...] -> [g, M/g, C/g, k...]: the same bytes
      wd.insert(wd.begin(), group);
      wd[1] /= group;
    }
    memory::desc w_user = dense_md(wd, dt);
    memory::desc w_any(wd, lp, memory::format_tag::any);
    memory::desc x_lp(xd, lp, tag);
    memory::desc b_md = has_bias_ ? dense_md({yd[1]}, dt) : memory::desc();

    dnnl::post_ops po;
    if (has_sum_) po.append_sum(1.f);
    if (!append_activation(po, act)) return false;
    dnnl::primitive_attr pattr = thread_safe_attr();
    pattr.set_post_ops(po);
    flops_ = 2.0 * double(shape_numel(y)) * double(shape_numel(w.shape) / std::max<int64_t>(w.shape[0], 1));
    if (single || flops_ < kSpinningThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);  // oneDNN plans its parallel split when the primitive is created
    created_threads_ = omp_get_max_threads();
    auto make_pd = [&](dnnl::algorithm alg, const memory::desc& xm, const memory::desc& ym) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg, xm, w.value ? w_any : w_user, b_md,
                                        ym, strides, dil, pl, pr);
      return dnnl::convolution_forward::primitive_desc(d, pattr, cpu_engine(), /*allow_empty=*/true);
    };
    dnnl::convolution_forward::primitive_desc pd;
    bool winograd_shape = !bf16 && options.winograd && S == 2 && group == 1 && w.shape[2] == 3 && w.shape[3] == 3 &&
                          strides == Dims{1, 1} && dil == Dims{0, 0} && w.value;
    if (winograd_shape) {
      memory::desc x_any(xd, dt, memory::format_tag::any), y_any(yd, dt, memory::format_tag::any);
      pd = make_pd(dnnl::algorithm::convolution_winograd, x_any, y_any);
      if (pd) {
        // The primitive reads and writes its own blocked layout; reorders bridge to the tensors' dense layout.
        blocked_ = true;
        // Unpadded blocked layouts live in the thread's buffers, shared by every such kernel (fully written by
        // the reorder in and the primitive on each run); padded ones keep memory of their own, whose padding
        // oneDNN zeroed once.
        shared_blocked_ = unpadded(pd.src_desc()) && unpadded(pd.dst_desc());
        x_blocked_ = shared_blocked_ ? memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE)
                                     : memory(pd.src_desc(), cpu_engine());
        y_blocked_ = shared_blocked_ ? memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE)
                                     : memory(pd.dst_desc(), cpu_engine());
        x_user_ = memory(x_md, cpu_engine(), DNNL_MEMORY_NONE);
        y_user_ = memory(y_md, cpu_engine(), DNNL_MEMORY_NONE);
        to_blocked_ = Reorder(x_user_, x_blocked_);
        from_blocked_ = Reorder(y_blocked_, y_user_);
        if (has_sum_) sum_to_blocked_ = Reorder(y_user_, y_blocked_);
      }
    }
    if (!pd) pd = make_pd(dnnl::algorithm::convolution_direct, bf16 ? x_lp : x_md, y_md);
    if (!pd) {
      if (bf16) *reason = "oneDNN has no bf16 kernel for this convolution";
      return false;
    }
    if (bf16) {
      if (!bf16_dispatch_is_fast(pd.impl_info_str(), reason)) return false;
      if (!x_bf16) src_ = Bf16Source(x_md, x_lp);
      x_bf16_ = x_bf16;
      if (has_sum_ && sum_bf16 != y_bf16) {  // the residual converted into Y, where the sum post-op reads it
        sum_user_ = memory(memory::desc(yd, sum_bf16 ? memory::data_type::bf16 : dt, tag), cpu_engine(),
                           DNNL_MEMORY_NONE);
        y_user_ = memory(y_md, cpu_engine(), DNNL_MEMORY_NONE);
        sum_to_y_ = Reorder(sum_user_, y_user_);
      }
      precision.precision = Precision::bf16;
    }
    prim_ = dnnl::convolution_forward(pd);
    set_name(pd);
    args_[DNNL_ARG_SRC] = blocked_ ? x_blocked_ : bf16 && !x_bf16 ? src_.converted()
                                                                  : memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = blocked_ ? y_blocked_ : memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    if (w.value) {
      args_[DNNL_ARG_WEIGHTS] = packed(*w.value, 1.f, w_user, pd.weights_desc());
    } else {
      args_[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), cpu_engine(), DNNL_MEMORY_NONE);
      bind_weights_ = true;
    }
    if (has_bias_) {
      if (in[2].value) args_[DNNL_ARG_BIAS] = packed(*in[2].value, 1.f, b_md, b_md);
      else args_[DNNL_ARG_BIAS] = memory(b_md, cpu_engine(), DNNL_MEMORY_NONE), bind_bias_ = true;
    }
    return true;
  }

  // Work small enough that a single-threaded twin should run it while the workers sleep (SpinAwareKernel).
  bool wants_single_twin() const { return threaded() && flops_ < kSingleThreadFlops; }
  // Whether the primitive was made for more than one thread.
  bool threaded() const { return threads_ != 1 && created_threads_ > 1; }

  void run(KernelContext& ctx) override {
    Tensor& y = ctx.output(0);
    if (blocked_) {
      ScopedThreads t(threads_);
      if (shared_blocked_) {
        x_blocked_.set_data_handle(thread_buffer(0, x_blocked_.get_desc().get_size()));
        y_blocked_.set_data_handle(thread_buffer(1, y_blocked_.get_desc().get_size()));
      }
      x_user_.set_data_handle(const_cast<void*>(ctx.input(0).raw()));
      to_blocked_.execute(x_user_, x_blocked_);
      if (has_sum_) {
        y_user_.set_data_handle(const_cast<void*>(ctx.input(3).raw()));
        sum_to_blocked_.execute(y_user_, y_blocked_);
      }
      if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(2).raw());
      execute();
      y_user_.set_data_handle(y.raw());
      from_blocked_.execute(y_blocked_, y_user_);
      return;
    }
    if (has_sum_ && sum_to_y_) {
      ScopedThreads t(threads_);
      sum_user_.set_data_handle(const_cast<void*>(ctx.input(3).raw()));
      y_user_.set_data_handle(y.raw());
      sum_to_y_.execute(sum_user_, y_user_);
    } else if (has_sum_ && ctx.input(3).raw() != y.raw()) {
      std::memcpy(y.raw(), ctx.input(3).raw(), y.nbytes());
    }
    if (precision.precision == Precision::bf16 && !x_bf16_) {
      ScopedThreads t(threads_);
      src_.convert(ctx.input(0).raw());
    } else {
      bind(DNNL_ARG_SRC, ctx.input(0).raw());
    }
    bind(DNNL_ARG_DST, y.raw());
    if (bind_weights_) bind(DNNL_ARG_WEIGHTS, ctx.input(1).raw());
    if (bind_bias_) bind(DNNL_ARG_BIAS, ctx.input(2).raw());
    execute();
  }

 private:
  bool has_sum_ = false, has_bias_ = false, bind_weights_ = false, bind_bias_ = false;
  double flops_ = 0;
  int created_threads_ = 1;
  // Winograd: the primitive's own blocked activations and the reorders to and from the dense tensors.
  bool blocked_ = false, shared_blocked_ = false;
  static bool unpadded(const memory::desc& d) {
    for (int i = 0; i < d.data.ndims; ++i)
      if (d.data.padded_dims[i] != d.data.dims[i] || d.data.padded_offsets[i] != 0) return false;
    return true;
  }
  memory x_blocked_, y_blocked_, x_user_, y_user_;
  Reorder to_blocked_, from_blocked_, sum_to_blocked_;
  Bf16Source src_;  // bf16: the source's conversion (none where X arrives bf16: x_bf16_)
  bool x_bf16_ = false;
  // bf16 links: a residual of the other float type than Y, converted into Y before the primitive adds it
  memory sum_user_;
  Reorder sum_to_y_;
};

}  // namespace

bool bf16_convolutions_are_fast() {
  static const bool fast = [] {
    try {
      memory::desc x({1, 32, 8, 8}, memory::data_type::bf16, memory::format_tag::nhwc);
      memory::desc w({32, 32, 1, 1}, memory::data_type::bf16, memory::format_tag::any);
      memory::desc y({1, 32, 8, 8}, memory::data_type::bf16, memory::format_tag::nhwc);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        x, w, y, {1, 1}, {0, 0}, {0, 0});
      dnnl::convolution_forward::primitive_desc pd(d, cpu_engine(), /*allow_empty=*/true);
      return bool(pd) && bf16_dispatch_is_fast(pd.impl_info_str(), nullptr);
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return fast;
}

std::unique_ptr<PreparedKernel> prepare_conv(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y,
                                             const KernelOptions& options) {
  // Non-constant weights would need a reorder per call when the primitive wants a blocked layout: the dense
  // descriptor is used for them, which oneDNN accepts (slower kernels) or refuses (then the reference runs).
  std::string reason;
  auto make = [&](bool single, bool bf16) -> std::unique_ptr<ConvKernel> {
    auto k = std::make_unique<ConvKernel>();
    if (!k->prepare(n, inputs, y, options, single, bf16, &reason)) return nullptr;
    return k;
  };
  bool bf16 = options.precision == Precision::bf16;
  // 3x3 stride-1 layers too, though f32 would run them on Winograd (2.25x fewer multiplies): oneDNN has no bf16
  // Winograd, but its direct bf16 kernels won on ResNet-50 here (45 against 55 ms of CPU per image on one thread
  // with those layers kept on f32 Winograd; f32 throughout: 82 ms).
  std::unique_ptr<ConvKernel> k = bf16 ? make(false, true) : nullptr;
  if (!k) bf16 = false, k = make(false, false);
  if (!k) return nullptr;
  if (!bf16 && options.precision != Precision::fp32) k->precision.reason = reason;
  if (!k->threaded()) return k;
  PrecisionDecision decision = k->precision;
  std::unique_ptr<SpinAwareKernel> twin;
  if (k->wants_single_twin()) {
    auto single = make(true, bf16);
    if (!single) return k;
    twin = std::make_unique<SpinAwareKernel>(std::move(k), std::move(single));
  } else {
    // The single-threaded twin for a loaded machine, made at its first use (the node outlives its kernels).
    const Node* node = &n;
    twin = std::make_unique<SpinAwareKernel>(
        std::move(k), [node, held = hold_inputs(inputs), y, options, bf16]() -> std::unique_ptr<PreparedKernel> {
          auto single = std::make_unique<ConvKernel>();
          std::string why;
          if (!single->prepare(*node, held.inputs, y, options, true, bf16, &why)) return nullptr;
          return single;
        });
  }
  twin->precision = decision;
  return twin;
}

}  // namespace cuvil::onednn
