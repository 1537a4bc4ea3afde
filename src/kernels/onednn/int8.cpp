// int8 convolutions and matrix products (KernelOptions::precision = int8) on oneDNN: the f32 input X is quantized
// per call to the node's calibrated u8 grid (quant_x_scale, quant_x_zero_point: unsigned, asymmetric), the
// constant weights once to s8 per output channel (symmetric: scale max|w| / 127, or quant_w_scales when the model
// gave them), and the primitive multiplies u8 x s8 with s32 accumulation (VNNI's vpdpbusd). Dequantization is the
// primitive's per-channel output scale (x_scale * w_scale[c]); bias, the residual sum and the activation follow
// as in f32, so the output stays f32 for whatever reads it.
//
// The arithmetic, exactly: q(x) = clamp(nearbyint(x * (1 / x_scale)) + zp, 0, 255), qw = clamp(nearbyint(w /
// w_scale[c]), -127, 127), y = act(x_scale * w_scale[c] * sum (q(x) - zp) qw + bias + sum). Padding is the zero
// point (a real 0), which oneDNN's source zero point handles. oneDNN 2.x applies the output scale to the
// accumulator plus the bias, so the bias is passed divided by the scale.
#include <immintrin.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "ir/ops/layout.h"
#include "ir/ops/nn_window.h"
#include "kernels/matmul_spec.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/onednn_ops.h"

namespace cuvil::onednn {

namespace {

// Quantizing more than this many elements splits between threads.
constexpr int64_t kParallelQuantize = 64 * 1024;

// GCC 12 warns about the intrinsics' own "undefined" pass-through operands.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw"))) void quantize_avx512(const float* x, uint8_t* q, int64_t n, float inv,
                                                                   int32_t zp) {
  __m512 vi = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-1024.f), hi = _mm512_set1_ps(1024.f);
  __m512i vz = _mm512_set1_epi32(zp), zero = _mm512_setzero_si512(), top = _mm512_set1_epi32(255);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // Clamped before the conversion (which rounds to nearest even, as nearbyint does) so it cannot overflow.
    __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vi), lo), hi);
    __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(v), vz);
    r = _mm512_min_epi32(_mm512_max_epi32(r, zero), top);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(r));
  }
  for (; i < n; ++i) q[i] = quantize_u8(x[i], inv, zp);
}
#pragma GCC diagnostic pop

void quantize_range(const float* x, uint8_t* q, int64_t n, float inv, int32_t zp) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (avx512) return quantize_avx512(x, q, n, inv, zp);
  for (int64_t i = 0; i < n; ++i) q[i] = quantize_u8(x[i], inv, zp);
}

// Runs fn(b, e) over [0, n) in blocks of `block`, split between OpenMP's threads when `threads` != 1 and the
// work is at least `parallel_from` elements (a pass over the output between primitives: serial, it left the
// second thread idle). Each element is computed as on one thread, so the result does not depend on the split.
template <class Fn>
void for_blocks(int64_t n, int64_t block, int threads, int64_t parallel_from, Fn&& fn) {
  int64_t blocks = (n + block - 1) / block;
  if (threads == 1 || n < parallel_from || blocks < 2) {
    for (int64_t i = 0; i < blocks; ++i) fn(i * block, std::min(n, (i + 1) * block));
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < blocks; ++i) fn(i * block, std::min(n, (i + 1) * block));
  cpu::note_parallel_end();
}

void quantize(const float* x, uint8_t* q, int64_t n, float inv, int32_t zp, int threads) {
  if (n < kParallelQuantize || threads == 1) return quantize_range(x, q, n, inv, zp);
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t chunk = (n + nt - 1) / nt;
    chunk = (chunk + 63) / 64 * 64;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) quantize_range(x + b, q + b, e - b, inv, zp);
  }
  cpu::note_parallel_end();
}

// Whether oneDNN's implementation `impl` ("brgconv:avx512_core_vnni") multiplies on VNNI or AMX.
bool int8_dispatch_is_fast(const std::string& impl) {
  std::string isa = impl.substr(impl.rfind(':') + 1);
  return isa.find("vnni") != std::string::npos || isa.find("amx") != std::string::npos;
}

bool uses_amx(const std::string& impl) { return impl.find("amx") != std::string::npos; }

// On CPUs with AMX, oneDNN 2.6's AMX convolutions (its jit ones wherever there is a runtime source zero point,
// Cuvil's asymmetric u8 activations) spend more on tile set-up per block than a small layer's work. Measured on a 2-core AMX Xeon, 2 threads, same build with AMX capped (ONEDNN_MAX_CPU_ISA):
// MobileNetV2 int8 2.72 ms on AMX against 1.49 on VNNI (its largest layer: 19 M multiply-adds), ResNet-50 4.35
// against 7.70 (its smallest: 51 M). Below this many multiply-adds a convolution takes oneDNN's next
// implementation on VNNI dot products instead.
constexpr double kAmxMinConvMacs = 32e6;

// Moves pd to the next implementation that multiplies on VNNI without AMX; false (pd then exhausted) when none.
template <class PrimitiveDesc>
bool next_vnni_impl(PrimitiveDesc& pd) {
  while (pd.next_impl()) {
    std::string impl = pd.impl_info_str();
    if (!uses_amx(impl) && int8_dispatch_is_fast(impl)) return true;
  }
  return false;
}

// The node's quantization hints, or false when it has none (not calibrated).
struct QuantHints {
  float x_scale = 0;
  int32_t x_zp = 0;
  bool dynamic = false;  // quant_x_scale -1: each row of X on its own symmetric grid, found per call
  std::vector<double> w_scales;
  float y_scale = 0;  // > 0: the output is u8 on this grid (runtime/int8_links.h), requantized by the primitive
  int32_t y_zp = 0;
  float sum_scale = 0;  // > 0: the residual sum arrives u8 on this grid (a linked residual)
  int32_t sum_zp = 0;
};

bool read_hints(const Node& n, QuantHints& h, std::string* reason) {
  double xs = n.has_attr("quant_x_scale") ? n.attr("quant_x_scale").f() : 0.0;
  if (xs == -1.0) {
    // Symmetric per row: q = round(x / s_row) in -127..127, stored +128 (u8, zero point 128 for all rows).
    h.dynamic = true, h.x_scale = 1.f, h.x_zp = 128;
    if (n.has_attr("quant_w_scales")) h.w_scales = n.attr("quant_w_scales").floats();
    if (n.has_attr("quant_y_scale") && n.attr("quant_y_scale").f() > 0) {
      *reason = "dynamic quantization writes f32 (no u8 output)";
      return false;
    }
    return true;
  }
  if (!(xs > 0)) {
    *reason = "not calibrated (no int8 quantization for its input)";
    return false;
  }
  h.x_scale = float(n.attr("quant_x_scale").f());
  h.x_zp = n.has_attr("quant_x_zero_point") ? int32_t(n.attr("quant_x_zero_point").i()) : 0;
  if (h.x_zp < 0 || h.x_zp > 255) throw Error(n.describe() + ": quant_x_zero_point must be in 0..255");
  if (n.has_attr("quant_w_scales")) h.w_scales = n.attr("quant_w_scales").floats();
  if (n.has_attr("quant_y_scale") && n.attr("quant_y_scale").f() > 0) {
    h.y_scale = float(n.attr("quant_y_scale").f());
    h.y_zp = n.has_attr("quant_y_zero_point") ? int32_t(n.attr("quant_y_zero_point").i()) : 0;
    if (h.y_zp < 0 || h.y_zp > 255) throw Error(n.describe() + ": quant_y_zero_point must be in 0..255");
  }
  if (n.has_attr("quant_sum_scale") && n.attr("quant_sum_scale").f() > 0) {
    h.sum_scale = float(n.attr("quant_sum_scale").f());
    h.sum_zp = n.has_attr("quant_sum_zero_point") ? int32_t(n.attr("quant_sum_zero_point").i()) : 0;
    if (h.sum_zp < 0 || h.sum_zp > 255) throw Error(n.describe() + ": quant_sum_zero_point must be in 0..255");
  }
  return true;
}

// A u8 residual dequantized into the f32 output, which the sum post-op then reads (scale 1).
void dequantize_u8(const uint8_t* q, float* y, int64_t n, float scale, int32_t zp, int threads) {
  for_blocks(n, 4096, threads, kParallelQuantize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = float(int32_t(q[i]) - zp) * scale;
  });
}

// s8 weights: `w` (f32) viewed as [channels, inner] (channel_stride 1 and inner_stride `channels` when the
// channels are the fast dim, as in a [K, N] matrix), quantized symmetrically per channel. Returns the scales.
std::vector<float> quantize_weights(const Tensor& w, int64_t channels, bool channels_fastest,
                                    const std::vector<double>& given, int8_t* out) {
  int64_t inner = w.numel() / channels;
  const float* p = w.data<float>();
  auto at = [&](int64_t c, int64_t i) { return channels_fastest ? i * channels + c : c * inner + i; };
  std::vector<float> scales(static_cast<size_t>(channels));
  if (!given.empty() && given.size() != 1 && int64_t(given.size()) != channels)
    throw Error("quant_w_scales has " + std::to_string(given.size()) + " scales for " + std::to_string(channels) +
                " output channels");
  for (int64_t c = 0; c < channels; ++c) {
    float s;
    if (!given.empty()) {
      s = float(given.size() == 1 ? given[0] : given[size_t(c)]);
    } else {
      float m = 0;
      for (int64_t i = 0; i < inner; ++i) m = std::max(m, std::fabs(p[at(c, i)]));
      s = m > 0 ? m / 127.f : 1.f;
    }
    if (!(s > 0) || !std::isfinite(s)) throw Error("weight scales must be positive and finite");
    scales[size_t(c)] = s;
    for (int64_t i = 0; i < inner; ++i) out[at(c, i)] = quantize_s8(p[at(c, i)], s);
  }
  return scales;
}

// The u8 source: a buffer this kernel owns, filled per call from the f32 input.
class Int8Kernel : public PrimitiveKernel {
 protected:
  QuantHints q_;
  bool has_zp_ = false, bind_weights_ = false;
  bool u8_input_ = false;  // X arrives u8 on its grid (from a linked int8 layer): bound per call, not quantized
  memory src_, zp_, y_zp_;
  int32_t zp_value_ = 0, y_zp_value_ = 0;
  int64_t src_elems_ = 0;
  std::vector<float> scales_;  // x_scale * w_scale[c] (times alpha): the output scale per channel
  int created_threads_ = 1;     // OpenMP's count when the primitive was made (oneDNN fixed its split then)

 public:
  // Prepare on the calling thread alone whatever the work (the single-threaded half of a SpinAwareKernel).
  void make_single() { threads_ = 1; }
  // Whether the primitive forks threads: then a loaded machine's single-threaded runs want a twin.
  bool threaded() const { return threads_ != 1 && created_threads_ > 1; }

 protected:

  // Attributes shared by both: per-channel output scales on dim `channel_dim`, the runtime source zero point.
  // A u8 output: the post-ops run in real units, then one linear post-op puts the result on the output's grid,
  // to which oneDNN adds the zero point, rounding to nearest even and saturating.
  dnnl::primitive_attr quant_attr(dnnl::post_ops po, int channel_dim) {
    dnnl::primitive_attr a = thread_safe_attr();
    if (q_.y_scale > 0) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / q_.y_scale, 0.f);
    a.set_post_ops(po);
    a.set_output_scales(1 << channel_dim, scales_);
    has_zp_ = q_.x_zp != 0;
    if (has_zp_) a.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (q_.y_scale > 0 && q_.y_zp != 0) a.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    return a;
  }
  memory::data_type y_type() const { return q_.y_scale > 0 ? memory::data_type::u8 : memory::data_type::f32; }
  // Whether the input's type fits: f32, or u8 when the grid is static. Sets u8_input_.
  bool input_type_ok(DType t, std::string* reason) {
    u8_input_ = t == DType::u8 && !q_.dynamic;
    if (t != DType::f32 && !u8_input_) {
      *reason = "int8 takes f32 activations (or u8 on the layer's static grid)";
      return false;
    }
    return true;
  }
  // After the primitive: its source buffer, the zero point's memory, and whether its ISA is worth it.
  bool finish(const dnnl::primitive_desc_base& pd, std::string* reason) {
    std::string impl = pd.impl_info_str();
    if (!int8_dispatch_is_fast(impl)) {
      *reason = "int8 would run onednn:" + impl + ", not on VNNI dot products";
      return false;
    }
    precision.precision = Precision::int8;
    src_ = u8_input_ ? memory(pd.query_md(dnnl::query::src_md), cpu_engine(), DNNL_MEMORY_NONE)
                     : memory(pd.query_md(dnnl::query::src_md), cpu_engine());
    src_elems_ = int64_t(src_.get_desc().get_size());
    args_[DNNL_ARG_SRC] = src_;
    args_[DNNL_ARG_DST] = memory(pd.query_md(dnnl::query::dst_md), cpu_engine(), DNNL_MEMORY_NONE);
    if (has_zp_) {
      zp_value_ = q_.x_zp;
      zp_ = memory({{1}, memory::data_type::s32, memory::format_tag::x}, cpu_engine(), &zp_value_);
      args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zp_;
    }
    if (q_.y_scale > 0 && q_.y_zp != 0) {
      y_zp_value_ = q_.y_zp;
      y_zp_ = memory({{1}, memory::data_type::s32, memory::format_tag::x}, cpu_engine(), &y_zp_value_);
      args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = y_zp_;
    }
    return true;
  }
  // Bias divided by the output scale (oneDNN 2.x scales accumulator + bias).
  memory scaled_bias(const Tensor& b, float extra, const memory::desc& md) {
    memory m(md, cpu_engine());
    float* p = static_cast<float*>(m.get_data_handle());
    const float* s = b.data<float>();
    for (size_t c = 0; c < scales_.size(); ++c) p[c] = s[c] * extra / scales_[c];
    return m;
  }
  void quantize_input(const Tensor& x) {
    if (u8_input_) return bind(DNNL_ARG_SRC, x.raw());
    quantize(x.data<float>(), static_cast<uint8_t*>(src_.get_data_handle()), x.numel(), 1.f / q_.x_scale, q_.x_zp,
             x.nbytes() < (size_t(1) << 18) ? 1 : threads_);
  }
  std::vector<float> w_scales_;
};

class Int8ConvKernel final : public Int8Kernel {
 public:
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y,
               std::string* reason) {
    if (!read_hints(n, q_, reason)) return false;
    if (q_.dynamic) {
      *reason = "dynamic quantization is for matrix products";
      return false;
    }
    AttrReader attrs(n);
    const PrepareInput &x = in[0], &w = in[1];
    if (!input_type_ok(x.dtype, reason)) return false;
    if (x.shape.size() < 3 || x.shape.size() > 5) {
      *reason = "int8 takes activations of rank 3 to 5";
      return false;
    }
    if (!w.value || (in.size() > 2 && in[2].present && !in[2].value)) {
      *reason = "weights or bias not constant";
      return false;
    }
    int64_t group = attrs.i("group");
    if (group > 1 && !u8_input_ && !(q_.y_scale > 0)) {
      // As for bf16: a depthwise layer does a few multiplies per element it reads; quantizing its f32 input costs
      // more than int8 saves. Linked (u8 in or out, runtime/int8_links.h) it reads or writes a quarter of the
      // bytes instead: MobileNetV2's depthwise layers between linked 1x1 layers.
      *reason = "grouped convolution: memory-bound, quantizing its input costs more than int8 saves";
      return false;
    }
    bool cl = attrs.i("channels_last") != 0;
    nn::Activation act = nn::read_activation(attrs);
    has_sum_ = in.size() > 3 && in[3].present;
    bool has_bias = in.size() > 2 && in[2].present;
    // The residual: f32 into an f32 output; u8 (a linked residual) into a u8 output, which the sum post-op reads
    // on its own grid, or into an f32 output, dequantized there first.
    sum_u8_ = has_sum_ && in[3].dtype == DType::u8;
    if (sum_u8_ && !(q_.sum_scale > 0)) {
      *reason = "a u8 residual sum without its grid (quant_sum_scale)";
      return false;
    }
    // An f32 residual into a u8 output (the residual has no grid of its own): the primitive writes f32 into a
    // buffer of ours, quantized after as the reader would have quantized it.
    // With no activation or Relu, the sum and activation move into that pass (one pass over the output, no copy
    // of the residual first): the same float operations, in the same order, as the sum post-op.
    if (has_sum_ && !sum_u8_ && q_.y_scale > 0) {
      out_scale_ = q_.y_scale, out_zp_ = q_.y_zp;
      q_.y_scale = 0, q_.y_zp = 0;
      f32_out_.resize(size_t(shape_numel(y)));
      add_after_ = act.kind == nn::Act::None || act.kind == nn::Act::Relu;
      relu_after_ = act.kind == nn::Act::Relu;
    }
    size_t S = x.shape.size() - 2;
    ConvGeometry geo;  // logical (channels-first) dims: oneDNN's descriptors use them, the format tag says the layout
    if (!conv_geometry(attrs, x.shape, y, w.shape, cl, &geo)) return false;
    const Dims &xd = geo.x, &yd = geo.y, &strides = geo.strides, &dil = geo.dilations, &pl = geo.pad_begin,
               &pr = geo.pad_end;
    memory::format_tag tag = activation_tag(S, cl);
    memory::desc x_md(xd, memory::data_type::u8, tag), y_md(yd, y_type(), tag);
    Dims wd(w.shape.begin(), w.shape.end());
    if (group > 1) {  // [M, C/g, k...] -> [g, M/g, C/g, k...]: the same bytes
      wd.insert(wd.begin(), group);
      wd[1] /= group;
    }
    memory::desc w_user = dense_md(wd, memory::data_type::s8), w_any(wd, memory::data_type::s8, memory::format_tag::any);
    memory::desc b_md = has_bias ? dense_md({yd[1]}, memory::data_type::f32) : memory::desc();

    int64_t M = w.shape[0];
    std::vector<int8_t> qw(size_t(w.value->numel()));
    w_scales_ = quantize_weights(*w.value, M, false, q_.w_scales, qw.data());
    scales_.resize(size_t(M));
    for (int64_t c = 0; c < M; ++c) scales_[size_t(c)] = q_.x_scale * w_scales_[size_t(c)];

    dnnl::post_ops po;
    if (sum_u8_ && q_.y_scale > 0) po.append_sum(q_.sum_scale, q_.sum_zp, memory::data_type::u8);
    else if (has_sum_ && !add_after_) po.append_sum(1.f);
    if (!add_after_ && !append_activation(po, act)) return false;
    dnnl::primitive_attr pattr = quant_attr(po, 1);
    double flops = 2.0 * double(shape_numel(y)) * double(shape_numel(w.shape) / std::max<int64_t>(M, 1));
    if (flops < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);
    created_threads_ = omp_get_max_threads();
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                      w_any, b_md, y_md, strides, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc pd(d, pattr, cpu_engine(), /*allow_empty=*/true);
    if (!pd) {
      *reason = "oneDNN has no int8 kernel for this convolution";
      return false;
    }
    if (flops / 2 < kAmxMinConvMacs && uses_amx(pd.impl_info_str()) && !next_vnni_impl(pd))
      pd = dnnl::convolution_forward::primitive_desc(d, pattr, cpu_engine(), /*allow_empty=*/true);
    if (!finish(pd, reason)) return false;
    prim_ = dnnl::convolution_forward(pd);
    set_name(pd);
    args_[DNNL_ARG_WEIGHTS] = reordered_copy(w_user, qw.data(), pd.weights_desc());
    if (has_bias) args_[DNNL_ARG_BIAS] = scaled_bias(*in[2].value, 1.f, b_md);
    return true;
  }

  void run(KernelContext& ctx) override {
    Tensor& y = ctx.output(0);
    if (out_scale_ > 0) return run_f32_then_quantize(ctx);
    {
      ScopedThreads t(threads_);
      if (sum_u8_ && !(q_.y_scale > 0))
        dequantize_u8(ctx.input(3).data<uint8_t>(), y.data<float>(), y.numel(), q_.sum_scale, q_.sum_zp, threads_);
      else if (has_sum_ && ctx.input(3).raw() != y.raw())
        std::memcpy(y.raw(), ctx.input(3).raw(), y.nbytes());
      quantize_input(ctx.input(0));
    }
    bind(DNNL_ARG_DST, y.raw());
    execute();
  }

  void run_f32_then_quantize(KernelContext& ctx) {
    Tensor& y = ctx.output(0);
    if (!add_after_) std::memcpy(f32_out_.data(), ctx.input(3).raw(), f32_out_.size() * sizeof(float));
    ScopedThreads t(threads_);
    quantize_input(ctx.input(0));
    bind(DNNL_ARG_DST, f32_out_.data());
    execute();
    float inv = 1.f / out_scale_;
    if (!add_after_)
      return quantize(f32_out_.data(), y.data<uint8_t>(), y.numel(), inv, out_zp_,
                      y.numel() * 4 < (int64_t(1) << 18) ? 1 : threads_);
    // In blocks that stay in L1: conv + sum, Relu, then the quantization pass's own code.
    const float* sum = ctx.input(3).data<float>();
    float* acc = f32_out_.data();
    uint8_t* q = y.data<uint8_t>();
    for_blocks(y.numel(), 2048, threads_, kParallelQuantize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float v = acc[i] + sum[i];
        acc[i] = relu_after_ ? (v > 0.f ? v : 0.f) : v;
      }
      quantize_range(acc + b, q + b, e - b, inv, out_zp_);
    });
  }

 private:
  bool has_sum_ = false, sum_u8_ = false;
  float out_scale_ = 0;  // > 0: an f32 residual into a u8 output, quantized from f32_out_ on this grid
  int32_t out_zp_ = 0;
  std::vector<float> f32_out_;
  bool add_after_ = false, relu_after_ = false;  // the sum (and Relu) added in the quantizing pass
};

class Int8MatMulKernel final : public Int8Kernel {
 public:
  bool prepare(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y,
               std::string* reason) {
    if (!read_hints(n, q_, reason)) return false;
    if (!input_type_ok(in[0].dtype, reason)) return false;
    MatMulSpec s;
    if (!read_matmul_spec(n, in, y, s)) return false;
    if (!in[1].value) {
      *reason = "B not constant";
      return false;
    }
    if (s.trans_a) {
      *reason = "transposed A";
      return false;
    }
    const auto &as = in[0].shape, &bs = in[1].shape;
    for (size_t d = 0; d + 2 < bs.size(); ++d)
      if (bs[d] != 1) {
        *reason = "batched constant B";
        return false;
      }
    if (as.size() < 2 || bs.size() < 2 || y.empty()) return false;
    if (s.bias_input >= 0 && !in[size_t(s.bias_input)].value) {
      *reason = "bias not constant";
      return false;
    }
    spec_ = s;
    int64_t K = as.back(), N = y.back(), rows = 1;
    for (size_t d = 0; d + 1 < as.size(); ++d) rows *= as[d];
    Dims ad{rows, K}, bd{K, N}, yd{rows, N};
    if (s.sum_input >= 0 && in[size_t(s.sum_input)].dtype != DType::f32) {
      *reason = "a u8 residual sum (linked for convolutions only)";
      return false;
    }
    if (s.sum_input >= 0 && q_.y_scale > 0) {
      *reason = "a u8 output with a residual sum";
      return false;
    }
    memory::desc a_md = dense_md(ad, memory::data_type::u8), y_md = dense_md(yd, y_type());
    memory::desc b_user = s.trans_b ? swapped_last2_md(bd, memory::data_type::s8) : dense_md(bd, memory::data_type::s8);
    memory::desc b_any(bd, memory::data_type::s8, memory::format_tag::any);
    memory::desc bias_md = s.bias_input >= 0 ? dense_md({1, N}, memory::data_type::f32) : memory::desc();

    // Stored [K, N] (channels fastest) or, transposed, [N, K].
    std::vector<int8_t> qw(size_t(in[1].value->numel()));
    w_scales_ = quantize_weights(*in[1].value, N, !s.trans_b, q_.w_scales, qw.data());
    scales_.resize(size_t(N));
    for (int64_t c = 0; c < N; ++c) scales_[size_t(c)] = s.alpha * q_.x_scale * w_scales_[size_t(c)];
    if (s.alpha == 0.f) return false;

    dnnl::post_ops po;
    // Dynamic: the primitive applies the columns' scales only; the rows' scales, bias, sum and activation follow
    // in one pass over the output (oneDNN 2.6 runs a per-row binary post-op on its reference kernel only).
    bool bias_post_op = q_.dynamic && s.bias_input >= 0;
    if (q_.dynamic) {
      if (s.act.kind != nn::Act::None && s.act.kind != nn::Act::Relu) {
        *reason = "dynamic int8 takes no activation but Relu";
        return false;
      }
    } else {
      if (s.sum_input >= 0) po.append_sum(s.sum_scale);
      if (!append_activation(po, s.act)) return false;
    }
    dnnl::primitive_attr pattr = quant_attr(po, 1);
    double flops = 2.0 * double(rows) * double(N) * double(K);
    if (flops < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);
    created_threads_ = omp_get_max_threads();
    dnnl::matmul::desc d = s.bias_input >= 0 && !bias_post_op ? dnnl::matmul::desc(a_md, b_any, bias_md, y_md)
                                                               : dnnl::matmul::desc(a_md, b_any, y_md);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(d, pattr, cpu_engine());
    } catch (const dnnl::error&) {
      *reason = "oneDNN has no int8 kernel for this product";
      return false;
    }
    if (!finish(pd, reason)) return false;
    prim_ = dnnl::matmul(pd);
    set_name(pd);
    args_[DNNL_ARG_WEIGHTS] = reordered_copy(b_user, qw.data(), pd.weights_desc());
    if (q_.dynamic) {
      rows_ = rows, k_ = K, n_ = N;
      row_scales_.assign(size_t(rows), 1.f);
      if (bias_post_op) {
        const float* src = in[size_t(s.bias_input)].value->data<float>();
        for (int64_t c = 0; c < N; ++c) bias_.push_back(src[c] * s.bias_scale);
      }
      if (s.sum_input >= 0) acc_.resize(size_t(rows * N));
    } else if (s.bias_input >= 0) {
      args_[DNNL_ARG_BIAS] = scaled_bias(*in[size_t(s.bias_input)].value, s.bias_scale, bias_md);
    }
    return true;
  }

  void run(KernelContext& ctx) override {
    Tensor& y = ctx.output(0);
    if (q_.dynamic) return run_dynamic(ctx);
    if (spec_.sum_input >= 0) {
      const Tensor& sum = ctx.input(size_t(spec_.sum_input));
      if (sum.raw() != y.raw()) std::memcpy(y.raw(), sum.raw(), y.nbytes());
    }
    {
      ScopedThreads t(threads_);
      quantize_input(ctx.input(0));
    }
    bind(DNNL_ARG_DST, y.raw());
    execute();
  }

 private:
  MatMulSpec spec_;
  // Dynamic: each row's scale (found per call), the bias (times beta), the accumulator when a sum is added.
  int64_t rows_ = 0, k_ = 0, n_ = 0;
  std::vector<float> row_scales_, bias_, acc_;

  void run_dynamic(KernelContext& ctx) {
    Tensor& y = ctx.output(0);
    bool has_sum = spec_.sum_input >= 0;
    const float* sum = has_sum ? ctx.input(size_t(spec_.sum_input)).data<float>() : nullptr;
    float* acc = has_sum ? acc_.data() : y.data<float>();  // the sum may be y itself (in place)
    {
      ScopedThreads t(threads_);
      quantize_rows(ctx.input(0));
    }
    bind(DNNL_ARG_DST, acc);
    execute();
    float* out = y.data<float>();
    bool relu = spec_.act.kind == nn::Act::Relu;
    float ss = spec_.sum_scale;
    int64_t per_block = std::max<int64_t>(1, 4096 / std::max<int64_t>(n_, 1));  // rows
    ScopedThreads t(threads_);
    for_blocks(rows_, per_block, threads_, kParallelQuantize / std::max<int64_t>(n_, 1), [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        float sr = row_scales_[size_t(r)];
        const float* a = acc + r * n_;
        float* o = out + r * n_;
        const float* sm = has_sum ? sum + r * n_ : nullptr;
        for (int64_t c = 0; c < n_; ++c) {
          float v = a[c] * sr;
          if (!bias_.empty()) v += bias_[size_t(c)];
          if (sm) v += ss * sm[c];
          o[c] = relu ? std::max(v, 0.f) : v;
        }
      }
    });
  }

  // Dynamic: each row on its own symmetric grid (max |x| / 127), stored with zero point 128.
  void quantize_rows(const Tensor& x) {
    const float* px = x.data<float>();
    uint8_t* q = static_cast<uint8_t*>(src_.get_data_handle());
    float* scales = row_scales_.data();
    auto row = [&](int64_t r) {
      const float* xr = px + r * k_;
      float m = 0;
      for (int64_t k = 0; k < k_; ++k) m = std::max(m, std::fabs(xr[k]));
      float sc = m > 0 && std::isfinite(m) ? m / 127.f : 1.f;
      scales[r] = sc;
      quantize_range(xr, q + r * k_, k_, 1.f / sc, 128);
    };
    if (x.numel() < kParallelQuantize || threads_ == 1) {
      for (int64_t r = 0; r < rows_; ++r) row(r);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) row(r);
    cpu::note_parallel_end();
  }
};

}  // namespace

bool int8_convolutions_are_fast() {
  static const bool fast = [] {
    try {
      memory::desc x({1, 32, 8, 8}, memory::data_type::u8, memory::format_tag::nhwc);
      memory::desc w({32, 32, 1, 1}, memory::data_type::s8, memory::format_tag::any);
      memory::desc y({1, 32, 8, 8}, memory::data_type::u8, memory::format_tag::nhwc);
      dnnl::primitive_attr a;
      a.set_output_scales(1 << 1, std::vector<float>(32, 0.5f));
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        x, w, y, {1, 1}, {0, 0}, {0, 0});
      dnnl::convolution_forward::primitive_desc pd(d, a, cpu_engine(), /*allow_empty=*/true);
      return bool(pd) && int8_dispatch_is_fast(pd.impl_info_str());
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return fast;
}

uint8_t quantize_u8(float x, float inv_scale, int32_t zero_point) {
  float t = x * inv_scale;
  t = t >= -1024.f ? std::min(t, 1024.f) : -1024.f;  // NaN as -inf: 0, as the vector loop's max_ps gives
  float v = std::nearbyint(t) + float(zero_point);
  return uint8_t(std::min(std::max(v, 0.f), 255.f));
}

int8_t quantize_s8(float w, float scale) {
  float v = std::nearbyint(w / scale);
  return int8_t(v >= -127.f ? std::min(v, 127.f) : -127.f);
}

namespace {

// One int8 kernel for the node (nullptr with `reason` when int8 does not take it); `single`: on one thread.
std::unique_ptr<Int8Kernel> make_int8_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                             const std::vector<int64_t>& y, bool single, std::string* reason) {
  if (n.op() == OpKind::FusedConv) {
    auto k = std::make_unique<Int8ConvKernel>();
    if (single) k->make_single();
    if (k->prepare(n, inputs, y, reason)) return k;
  } else if (n.op() == OpKind::FusedMatMul || n.op() == OpKind::MatMul || n.op() == OpKind::Gemm) {
    auto k = std::make_unique<Int8MatMulKernel>();
    if (single) k->make_single();
    if (k->prepare(n, inputs, y, reason)) return k;
  } else {
    *reason = "no int8 kernel for this op";
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_onednn_int8_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                           std::string* reason) {
  std::vector<std::vector<int64_t>> ys = infer_output_dims(n, inputs);
  if (ys.size() != 1) return nullptr;
  for (const PrepareInput& in : inputs)
    if (in.present && shape_numel(in.shape) == 0) {
      *reason = "empty tensor";
      return nullptr;
    }
  std::unique_ptr<Int8Kernel> k = make_int8_kernel(n, inputs, ys[0], false, reason);
  if (!k) {
    if (reason->empty()) *reason = "oneDNN has no int8 kernel for this case";
    return nullptr;
  }
  if (!k->threaded()) return k;
  // As f32's: the single-threaded twin for a loaded machine (the executor then runs on one thread, and oneDNN
  // would still fork the threads this primitive was made for), made at its first use; the node outlives it.
  PrecisionDecision decision = k->precision;
  auto twin = std::make_unique<SpinAwareKernel>(
      std::move(k), [node = &n, held = hold_inputs(inputs), y = ys[0]]() -> std::unique_ptr<PreparedKernel> {
        std::string why;
        return make_int8_kernel(*node, held.inputs, y, true, &why);
      });
  twin->precision = decision;
  return twin;
}

}  // namespace cuvil::onednn
