// ONNX's integer ops on oneDNN's u8 x s8 kernels (VNNI dot products, s32 accumulation): ConvInteger, QLinearConv,
// MatMulInteger, QLinearMatMul, as quantize_dynamic and quantize_static(QOperator) write them. These are the ops'
// own integer semantics, not a lowering of precision, so they run at every KernelOptions::precision.
//
// Operands, exactly:
// - activations u8 as they come; s8 shifted to u8 per call (x + 128, its zero point + 128: (x - zp) unchanged);
// - constant weights s8 as they are, u8 shifted to s8 (w - 128, zero point - 128); the activation's zero point is
//   oneDNN's runtime source zero point for convolutions (padding is the zero point: a real 0, as in the reference)
//   and a correction after the product for matrix products: sum (a - za)(b - zb) = sum a b - za colsum(b)
//   - zb rowsum(a) + K za zb, in wrapping 32-bit arithmetic;
// - a convolution's weight zero point (oneDNN 2.6 has none for them) as a second primitive's window sums of
//   (x - xz), times the zero point, subtracted from the sums.
// Outputs: the primitives write s32 sums (exact while they stay below 2^24, where oneDNN's store may pass them
// through f32); ConvInteger / MatMulInteger return them, QLinearConv / QLinearMatMul requantize them as the
// reference does (float(acc + bias) * (x_scale * w_scale / y_scale), round half to even, + zero point, saturate):
// bit-identical. (oneDNN's own requantization adds the zero point before rounding: one step off at ties, which
// cascaded through ResNet-18 to 20 % of its logits one step off ORT's.)
// oneDNN's int8 convolutions want channels-last activations: channels-first tensors are reordered in and out.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/parallel.h"
#include "kernels/ref/nn_quant.h"

namespace cuvil::onednn {

namespace {

// Where each operand of an integer op sits among its inputs (-1: the op has none).
struct IntegerOpRecord {
  OpKind op;
  bool conv;
  int x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias;
};
constexpr IntegerOpRecord kIntegerOps[] = {
    {OpKind::ConvInteger, true, 0, -1, 2, 1, -1, 3, -1, -1, -1},
    {OpKind::QLinearConv, true, 0, 1, 2, 3, 4, 5, 6, 7, 8},
    {OpKind::MatMulInteger, false, 0, -1, 2, 1, -1, 3, -1, -1, -1},
    {OpKind::QLinearMatMul, false, 0, 1, 2, 3, 4, 5, 6, 7, -1},
};

const IntegerOpRecord* record_of(OpKind op) {
  for (const IntegerOpRecord& r : kIntegerOps)
    if (r.op == op) return &r;
  return nullptr;
}

bool present(const std::vector<PrepareInput>& in, int i) {
  return i >= 0 && size_t(i) < in.size() && in[size_t(i)].present;
}
bool is_q8(DType t) { return t == DType::u8 || t == DType::i8; }

// The scalar zero point of input i (0 when absent), read per call.
int32_t zero_point(KernelContext& ctx, int i) {
  return i >= 0 && ctx.has_input(size_t(i)) ? int32_t(ctx.input(size_t(i)).get_i64(0)) : 0;
}

// Constant weights as s8 plus their zero points per output channel, both shifted by -128 when the weights are u8.
void signed_weights(const Tensor& w, const Tensor* zp, int64_t channels, std::vector<int8_t>* out,
                    std::vector<int32_t>* zps) {
  bool u8 = w.dtype() == DType::u8;
  int32_t shift = u8 ? 128 : 0;
  std::vector<int64_t> z = ref::nn::param_ints(zp);
  zps->assign(size_t(channels), 0);
  for (int64_t c = 0; c < channels; ++c) (*zps)[size_t(c)] = int32_t(z[z.size() == 1 ? 0 : size_t(c)]) - shift;
  out->resize(size_t(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i)
    (*out)[size_t(i)] = u8 ? int8_t(int32_t(w.data<uint8_t>()[i]) - 128) : w.data<int8_t>()[i];
}

// s8 -> u8 by adding 128 (flipping the sign bit).
void shift_to_u8(const int8_t* x, uint8_t* y, int64_t n) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = uint8_t(b[i] ^ 0x80u);
}

bool on_vnni(const dnnl::primitive_desc_base& pd, std::string* reason) {
  std::string impl = pd.impl_info_str();
  // oneDNN's int8 GEMM (grouped convolutions) names no ISA; it takes VNNI's kernel where the CPU has it.
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), vnni = unsigned(dnnl::cpu_isa::avx512_core_vnni);
  bool gemm_on_vnni = impl.find("gemm_s8u8s32") != std::string::npos && (isa & vnni) == vnni;
  if (!gemm_on_vnni && impl.find("vnni") == std::string::npos && impl.find("amx") == std::string::npos) {
    // Without VNNI oneDNN pairs u8 x s8 products in saturating 16-bit sums: not the exact integer result.
    *reason = "oneDNN would run " + impl + ", not VNNI dot products (16-bit pair sums may saturate)";
    return false;
  }
  return true;
}

// One pixel's requantization (see IntConvKernel::requantize): q[c] = clamp(nearbyint(float(acc[c] + bias[c]) *
// mult[c]) + zp, lo, hi), stored as bytes (u8 or s8). Values beyond 2^20 steps saturate either way, so they are
// clamped before the conversion, which rounds half to even as nearbyint does.
void requantize_row_scalar(const int32_t* acc, const int32_t* bias, const float* mult, int64_t m, int32_t zp,
                           int32_t lo, int32_t hi, uint8_t* q) {
  for (int64_t c = 0; c < m; ++c) {
    int32_t v = bias ? int32_t(uint32_t(acc[c]) + uint32_t(bias[c])) : acc[c];
    float f = float(v) * mult[c];
    f = f < -1048576.f ? -1048576.f : (f > 1048576.f ? 1048576.f : f);
    int32_t r = int32_t(std::nearbyint(f)) + zp;
    q[c] = uint8_t(r < lo ? lo : (r > hi ? hi : r));
  }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw"))) void requantize_row_avx512(const int32_t* acc, const int32_t* bias,
                                                                        const float* mult, int64_t m, int32_t zp,
                                                                        int32_t lo, int32_t hi, uint8_t* q) {
  __m512 big = _mm512_set1_ps(1048576.f), small = _mm512_set1_ps(-1048576.f);
  __m512i vz = _mm512_set1_epi32(zp), vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  int64_t c = 0;
  for (; c + 16 <= m; c += 16) {
    __m512i v = _mm512_loadu_si512(acc + c);
    if (bias) v = _mm512_add_epi32(v, _mm512_loadu_si512(bias + c));  // wraps, as int32 sums do
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_loadu_ps(mult + c));
    f = _mm512_min_ps(_mm512_max_ps(f, small), big);
    __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(f), vz);  // round half to even (MXCSR's default)
    r = _mm512_min_epi32(_mm512_max_epi32(r, vlo), vhi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c), _mm512_cvtepi32_epi8(r));
  }
  requantize_row_scalar(acc + c, bias ? bias + c : nullptr, mult + c, m - c, zp, lo, hi, q + c);
}
#pragma GCC diagnostic pop

// A dequantizing MatMulInteger's output row (fuse-matmul's form, ONNX Runtime's MatMulIntegerToFloat):
// y[c] = float(acc[c] + fix[c] - zb[c] * rs) * mult[c] (+ bias[c]): the sums corrected for the zero points in
// wrapping 32-bit arithmetic (zb null: B has none), then one float multiply and one float add, each rounded (not
// fused into an FMA: the unfused graph's Mul and Add round twice).
void dequantize_row_scalar(const int32_t* acc, const uint32_t* fix, const int32_t* zb, uint32_t rs, const float* mult,
                           const float* bias, int64_t n, float* y) {
  for (int64_t c = 0; c < n; ++c) {
    uint32_t v = uint32_t(acc[c]) + fix[c];
    if (zb) v -= uint32_t(zb[c]) * rs;
    volatile float p = float(int32_t(v)) * mult[c];  // (volatile: rounded here, never contracted with the add)
    y[c] = bias ? p + bias[c] : p;
  }
}

__attribute__((target("avx512f"))) void dequantize_row_avx512(const int32_t* acc, const uint32_t* fix,
                                                               const int32_t* zb, uint32_t rs, const float* mult,
                                                               const float* bias, int64_t n, float* y) {
  __m512i vrs = _mm512_set1_epi32(int32_t(rs));
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    __m512i v = _mm512_add_epi32(_mm512_loadu_si512(acc + c), _mm512_loadu_si512(fix + c));  // wraps
    if (zb) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_loadu_si512(zb + c), vrs));
    // The _round_ forms are opaque to GCC: a multiply and an add it cannot contract into an FMA.
    __m512 f = _mm512_mul_round_ps(_mm512_cvtepi32_ps(v), _mm512_loadu_ps(mult + c), _MM_FROUND_CUR_DIRECTION);
    if (bias) f = _mm512_add_round_ps(f, _mm512_loadu_ps(bias + c), _MM_FROUND_CUR_DIRECTION);
    _mm512_storeu_ps(y + c, f);
  }
  dequantize_row_scalar(acc + c, fix + c, zb ? zb + c : nullptr, rs, mult + c, bias ? bias + c : nullptr, n - c, y + c);
}

void dequantize_row(const int32_t* acc, const uint32_t* fix, const int32_t* zb, uint32_t rs, const float* mult,
                    const float* bias, int64_t n, float* y) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return dequantize_row_avx512(acc, fix, zb, rs, mult, bias, n, y);
  dequantize_row_scalar(acc, fix, zb, rs, mult, bias, n, y);
}

void requantize_row(const int32_t* acc, const int32_t* bias, const float* mult, int64_t m, int32_t zp, int32_t lo,
                    int32_t hi, uint8_t* q) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (avx512) return requantize_row_avx512(acc, bias, mult, m, zp, lo, hi, q);
  requantize_row_scalar(acc, bias, mult, m, zp, lo, hi, q);
}

class IntConvKernel final : public PrimitiveKernel {
 public:
  bool prepare(const Node& n, const IntegerOpRecord& r, const std::vector<PrepareInput>& in, const Dims& y,
               DType y_dtype, std::string* reason) {
    rec_ = r;
    const PrepareInput &x = in[size_t(r.x)], &w = in[size_t(r.w)];
    if (x.shape.size() < 3 || x.shape.size() > 5) return (*reason = "activations of rank 3 to 5 only", false);
    if (!w.value) return (*reason = "weights not constant", false);
    for (int i : {r.x_scale, r.w_scale, r.y_scale, r.y_zp, r.bias, r.w_zp})
      if (present(in, i) && !in[size_t(i)].value)
        return (*reason = "quantization parameters or bias not constant", false);
    AttrReader attrs(n);
    int64_t group = attrs.i("group"), M = w.shape[0];
    size_t S = x.shape.size() - 2;
    ConvGeometry geo;
    // QLinearConv between channels-last neighbours (assign-layouts): x and y [N, spatial..., C], no reorders.
    cl_ = n.has_attr("channels_last") && n.attr("channels_last").i() != 0;
    if (!conv_geometry(attrs, x.shape, y, w.shape, cl_, &geo)) return (*reason = "pads do not fit", false);
    std::vector<int8_t> qw;
    std::vector<int32_t> wz;
    signed_weights(*w.value, present(in, r.w_zp) ? in[size_t(r.w_zp)].value : nullptr, M, &qw, &wz);
    bool any_wz = false;
    for (int32_t z : wz) any_wz |= z != 0;
    x_signed_ = x.dtype == DType::i8;
    x_zp_const_ = !present(in, r.x_zp) || in[size_t(r.x_zp)].value;
    int32_t xz0 = present(in, r.x_zp) && in[size_t(r.x_zp)].value ? int32_t(in[size_t(r.x_zp)].value->get_i64(0)) : 0;
    x_zp_ = xz0 + (x_signed_ ? 128 : 0);

    // The primitive writes s32 sums channels-last; QLinearConv requantizes them itself (see requantize).
    memory::format_tag cl = activation_tag(S, true), cf = activation_tag(S, false);
    memory::desc x_md(geo.x, memory::data_type::u8, cl), y_md(geo.y, memory::data_type::s32, cl);
    Dims wd(w.shape.begin(), w.shape.end());
    if (group > 1) {
      wd.insert(wd.begin(), group);
      wd[1] = M / group;
    }
    memory::desc w_user = dense_md(wd, memory::data_type::s8), w_any(wd, memory::data_type::s8, memory::format_tag::any);
    if (present(in, r.bias)) {
      const int32_t* b = in[size_t(r.bias)].value->data<int32_t>();
      bias_.assign(b, b + M);
    }
    if (r.y_scale >= 0) {
      // As the reference: x_scale * w_scale[c] / y_scale in float.
      float xs = float(in[size_t(r.x_scale)].value->get_f64(0)), ys = float(in[size_t(r.y_scale)].value->get_f64(0));
      std::vector<double> ws = ref::nn::param_floats(*in[size_t(r.w_scale)].value);
      mult_.resize(size_t(M));
      for (int64_t c = 0; c < M; ++c) mult_[size_t(c)] = xs * float(ws[ws.size() == 1 ? 0 : size_t(c)]) / ys;
      y_zp_ = present(in, r.y_zp) ? int32_t(in[size_t(r.y_zp)].value->get_i64(0)) : 0;
      y_signed_ = y_dtype == DType::i8;
    }
    dnnl::primitive_attr a = thread_safe_attr();
    has_x_zp_ = x_zp_ != 0 || !x_zp_const_;
    if (has_x_zp_) a.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    double flops = 2.0 * double(shape_numel(y)) * double(shape_numel(w.shape) / std::max<int64_t>(M, 1));
    if (flops < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);
    dnnl::convolution_forward::primitive_desc pd;
    // A channels-last QLinearConv requantizes in the primitive, in the reference's order: (acc + bias) * mult[c]
    // (output scales), round half to even (eltwise_round), + zero point (eltwise_linear), saturated by the store.
    // (oneDNN's destination zero point would be added before rounding.) Else s32 sums and requantize() below.
    if (cl_ && !mult_.empty() && !any_wz) {
      dnnl::primitive_attr fa = a;
      fa.set_output_scales(1 << 1, mult_);
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
      if (y_zp_ != 0) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f, float(y_zp_));
      fa.set_post_ops(po);
      memory::desc q_md(geo.y, y_signed_ ? memory::data_type::s8 : memory::data_type::u8, cl);
      memory::desc b_md = bias_.empty() ? memory::desc() : dense_md({M}, memory::data_type::s32);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        x_md, w_any, b_md, q_md, geo.strides, geo.dilations, geo.pad_begin,
                                        geo.pad_end);
      pd = dnnl::convolution_forward::primitive_desc(d, fa, cpu_engine(), /*allow_empty=*/true);
      std::string why;
      fused_ = pd && on_vnni(pd, &why);
      if (fused_ && !bias_.empty()) {
        memory b(b_md, cpu_engine());
        std::memcpy(b.get_data_handle(), bias_.data(), size_t(M) * 4);
        args_[DNNL_ARG_BIAS] = b;
      }
    }
    if (!fused_) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        x_md, w_any, y_md, geo.strides, geo.dilations, geo.pad_begin, geo.pad_end);
      pd = dnnl::convolution_forward::primitive_desc(d, a, cpu_engine(), /*allow_empty=*/true);
    }
    if (!pd) return (*reason = "oneDNN has no u8 x s8 kernel for this convolution", false);
    if (!on_vnni(pd, reason)) return false;
    prim_ = dnnl::convolution_forward(pd);
    set_name(pd);
    args_[DNNL_ARG_WEIGHTS] = reordered_copy(w_user, qw.data(), pd.weights_desc());
    if (any_wz && !prepare_window_sums(geo, wd, group, a, reason)) return false;
    if (any_wz) wz_ = wz;
    src_ = cl_ ? memory(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE) : memory(pd.src_desc(), cpu_engine());
    dst_ = fused_ ? memory(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE) : memory(pd.dst_desc(), cpu_engine());
    args_[DNNL_ARG_SRC] = src_;
    args_[DNNL_ARG_DST] = dst_;
    if (has_x_zp_) {
      args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] =
          memory({{1}, memory::data_type::s32, memory::format_tag::x}, cpu_engine(), &x_zp_);
    }
    if (!wz_.empty()) {
      for (int arg : {DNNL_ARG_SRC, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC})
        if (args_.count(arg)) sum_args_[arg] = args_.at(arg);
      group_ = group;
    }
    user_x_ = memory(memory::desc(geo.x, memory::data_type::u8, cf), cpu_engine(), DNNL_MEMORY_NONE);
    if (!cl_) in_ = Reorder(user_x_, src_);
    if (mult_.empty()) {
      user_y_ = memory(memory::desc(geo.y, memory::data_type::s32, cf), cpu_engine(), DNNL_MEMORY_NONE);
      out_ = Reorder(dst_, user_y_);
    }
    M_ = M, P_ = shape_numel(y) / (y[0] * M), N_ = y[0];
    if (x_signed_) shifted_.resize(size_t(shape_numel(x.shape)));
    return true;
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(size_t(rec_.x));
    const void* xp = x.raw();
    if (x_signed_) {
      shift_to_u8(x.data<int8_t>(), shifted_.data(), x.numel());
      xp = shifted_.data();
    }
    if (!x_zp_const_) x_zp_ = zero_point(ctx, rec_.x_zp) + (x_signed_ ? 128 : 0);
    ScopedThreads t(threads_);
    if (cl_) {
      src_.set_data_handle(const_cast<void*>(xp));
    } else {
      user_x_.set_data_handle(const_cast<void*>(xp));
      in_.execute(user_x_, src_);
    }
    if (fused_) {
      dst_.set_data_handle(ctx.output(0).raw());
      return execute();
    }
    execute();
    if (!wz_.empty()) subtract_window_sums();
    if (mult_.empty()) {
      user_y_.set_data_handle(ctx.output(0).raw());
      out_.execute(dst_, user_y_);
    } else {
      y_signed_ ? requantize<int8_t>(ctx.output(0).data<int8_t>()) : requantize<uint8_t>(ctx.output(0).data<uint8_t>());
    }
  }

 private:
  IntegerOpRecord rec_{};
  bool x_signed_ = false, x_zp_const_ = true, has_x_zp_ = false, y_signed_ = false, cl_ = false;
  bool fused_ = false;  // the primitive requantizes into the output itself
  int32_t x_zp_ = 0, y_zp_ = 0;
  int64_t N_ = 0, M_ = 0, P_ = 0;  // images, output channels, output pixels per image
  // A weight zero point (oneDNN 2.6 convolutions take none): sum (x - xz)(w - wz) = sum (x - xz) w - wz[c] S, with S
  // the window's sum of (x - xz) over the group's input channels, from a second primitive with all-one weights
  // (one output channel per group: 1/M of the work, all of it for depthwise layers).
  std::vector<int32_t> wz_;
  int64_t group_ = 1;
  dnnl::primitive sum_prim_;
  std::unordered_map<int, memory> sum_args_;
  memory sums_;

  bool prepare_window_sums(const ConvGeometry& geo, const Dims& wd, int64_t group, const dnnl::primitive_attr& a,
                           std::string* reason) {
    Dims od = wd, sd = geo.y;
    if (group > 1) od[1] = 1;  // [g, 1, C/g, k...]
    else od[0] = 1;            // [1, C, k...]
    sd[1] = group;
    size_t S = geo.x.size() - 2;
    memory::desc x_md(geo.x, memory::data_type::u8, activation_tag(S, true)),
        s_md(sd, memory::data_type::s32, activation_tag(S, true)),
        o_any(od, memory::data_type::s8, memory::format_tag::any);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                      o_any, s_md, geo.strides, geo.dilations, geo.pad_begin, geo.pad_end);
    dnnl::convolution_forward::primitive_desc pd(d, a, cpu_engine(), /*allow_empty=*/true);
    if (!pd) return (*reason = "oneDNN has no u8 x s8 kernel for the weight zero point's window sums", false);
    if (!on_vnni(pd, reason)) return false;
    primitive_created(pd);
    sum_prim_ = dnnl::convolution_forward(pd);
    std::vector<int8_t> ones(size_t(shape_numel(od)), 1);
    sums_ = memory(pd.dst_desc(), cpu_engine());
    sum_args_[DNNL_ARG_WEIGHTS] = reordered_copy(dense_md(od, memory::data_type::s8), ones.data(), pd.weights_desc());
    sum_args_[DNNL_ARG_DST] = sums_;
    if (pd.scratchpad_desc().get_size() > 0)
      sum_args_[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    return true;
  }

  void subtract_window_sums() {
    bind_scratchpad(sum_args_);
    sum_prim_.execute(thread_stream(), sum_args_);
    const int32_t* sums = static_cast<const int32_t*>(sums_.get_data_handle());
    uint32_t* acc = static_cast<uint32_t*>(dst_.get_data_handle());
    int64_t M = M_, per_group = M_ / group_, g = group_;
    const int32_t* wz = wz_.data();
    cpu::parallel_ranges(N_ * P_, M, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int64_t c = 0; c < M; ++c)  // wrapping, as int32 sums do
          acc[r * M + c] -= uint32_t(wz[c]) * uint32_t(sums[r * g + c / per_group]);
    });
  }
  std::vector<int32_t> bias_;
  std::vector<float> mult_;  // QLinearConv: x_scale * w_scale[c] / y_scale

  // QLinearConv's output from the channels-last s32 sums, as the reference computes it: (acc + bias) wrapping,
  // float(.) * mult[c], rounded half to even, + zero point, saturated; written channels-first through a tile of
  // kTile pixels (rows read and written contiguously), or row by row when the node is channels-last.
  template <class Q>
  void requantize(Q* y) {
    constexpr int64_t kTile = 32;
    constexpr int lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
    const int32_t* acc = static_cast<const int32_t*>(dst_.get_data_handle());
    const int32_t* bias = bias_.empty() ? nullptr : bias_.data();
    const float* mult = mult_.data();
    int64_t tiles = (P_ + kTile - 1) / kTile, M = M_, P = P_;
    if (cl_) {  // rows in place
      cpu::parallel_ranges(N_ * P, M, 1, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
          requantize_row(acc + r * M, bias, mult, M, y_zp_, lo, hi, reinterpret_cast<uint8_t*>(y + r * M));
      });
      return;
    }
    cpu::parallel_ranges(N_ * tiles, kTile * M, 1, [&](int64_t b, int64_t e) {
      std::vector<Q> tile(size_t(kTile * M));
      for (int64_t t = b; t < e; ++t) {
        int64_t n = t / tiles, p0 = (t % tiles) * kTile, np = std::min(kTile, P - p0);
        for (int64_t i = 0; i < np; ++i)
          requantize_row(acc + (n * P + p0 + i) * M, bias, mult, M, y_zp_, int32_t(lo), int32_t(hi),
                         reinterpret_cast<uint8_t*>(tile.data() + i * M));
        for (int64_t c = 0; c < M; ++c) {
          Q* out = y + (n * M + c) * P + p0;
          for (int64_t i = 0; i < np; ++i) out[i] = tile[size_t(i * M + c)];
        }
      }
    });
  }
  memory src_, dst_, user_x_, user_y_;
  Reorder in_, out_;
  std::vector<uint8_t> shifted_;
};

class IntMatMulKernel final : public PrimitiveKernel {
 public:
  bool prepare(const IntegerOpRecord& r, const std::vector<PrepareInput>& in, const Dims& y, std::string* reason) {
    rec_ = r;
    const PrepareInput &a = in[size_t(r.x)], &b = in[size_t(r.w)];
    if (!b.value) return (*reason = "B not constant", false);
    if (b.shape.size() != 2) return (*reason = "B not a matrix", false);
    if (a.shape.size() < 2) return (*reason = "A of rank 1", false);
    if (present(in, r.x_zp) && shape_numel(in[size_t(r.x_zp)].shape) != 1)
      return (*reason = "per-row zero point of A", false);
    if (r.x_scale >= 0 && shape_numel(in[size_t(r.x_scale)].shape) != 1) return (*reason = "per-row scale of A", false);
    if (present(in, r.w_zp) && !in[size_t(r.w_zp)].value) return (*reason = "zero point of B not constant", false);
    K_ = a.shape.back(), N_ = b.shape[1], rows_ = shape_numel(a.shape) / K_;
    std::vector<int8_t> qb;
    signed_weights(*b.value, present(in, r.w_zp) ? in[size_t(r.w_zp)].value : nullptr, N_, &qb, &b_zp_);
    colsum_.assign(size_t(N_), 0);
    for (int64_t k = 0; k < K_; ++k)
      for (int64_t c = 0; c < N_; ++c) colsum_[size_t(c)] += int32_t(qb[size_t(k * N_ + c)]);
    any_b_zp_ = false;
    for (int32_t z : b_zp_) any_b_zp_ |= z != 0;
    a_signed_ = a.dtype == DType::i8;
    requantize_ = r.y_scale >= 0;
    to_float_ = r.op == OpKind::MatMulInteger && present(in, 4);  // fuse-matmul's dequantizing form
    y_signed_ = requantize_ && in[size_t(r.y_zp)].dtype == DType::i8;

    memory::desc a_md = dense_md({rows_, K_}, memory::data_type::u8), y_md = dense_md({rows_, N_}, memory::data_type::s32);
    memory::desc b_user = dense_md({K_, N_}, memory::data_type::s8), b_any({K_, N_}, memory::data_type::s8,
                                                                            memory::format_tag::any);
    double flops = 2.0 * double(rows_) * double(N_) * double(K_);
    if (flops < kSingleThreadFlops) threads_ = 1;
    ScopedThreads creating(threads_);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_any, y_md), thread_safe_attr(), cpu_engine());
    } catch (const dnnl::error&) {
      return (*reason = "oneDNN has no u8 x s8 kernel for this product", false);
    }
    if (!on_vnni(pd, reason)) return false;
    prim_ = dnnl::matmul(pd);
    set_name(pd);
    args_[DNNL_ARG_WEIGHTS] = reordered_copy(b_user, qb.data(), pd.weights_desc());
    args_[DNNL_ARG_SRC] = memory(a_md, cpu_engine(), DNNL_MEMORY_NONE);
    args_[DNNL_ARG_DST] = memory(y_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (a_signed_) shifted_.resize(size_t(rows_ * K_));
    if (requantize_) acc_.resize(size_t(rows_ * N_));
    if (any_b_zp_) rowsum_.resize(size_t(rows_));
    fix_.resize(size_t(N_));
    if (to_float_) mult_.resize(size_t(N_));
    return true;
  }

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.input(size_t(rec_.x));
    const uint8_t* ap = static_cast<const uint8_t*>(a.raw());
    int32_t za = zero_point(ctx, rec_.x_zp);
    if (a_signed_) {
      shift_to_u8(a.data<int8_t>(), shifted_.data(), a.numel());
      ap = shifted_.data();
      za += 128;
    }
    // The dequantizing form's sums go to its f32 output and are converted there in place (same size, each
    // 16-value block read before it is written): no scratch buffer between the product and the pass.
    int32_t* acc = requantize_ ? acc_.data()
                   : to_float_ ? static_cast<int32_t*>(ctx.output(0).raw())
                               : ctx.output(0).data<int32_t>();
    bind(DNNL_ARG_SRC, ap);
    bind(DNNL_ARG_DST, acc);
    execute();
    if (to_float_) return dequantize(ctx, ap, za, acc);
    correct(ap, za, acc);
    if (requantize_) y_signed_ ? requantize<int8_t>(ctx, acc) : requantize<uint8_t>(ctx, acc);
  }

 private:
  IntegerOpRecord rec_{};
  int64_t rows_ = 0, K_ = 0, N_ = 0;
  std::vector<int32_t> b_zp_, colsum_, rowsum_, acc_;
  std::vector<uint32_t> fix_;  // per column: -za colsum + K za zb, for za = fix_za_
  int64_t fix_za_ = std::numeric_limits<int64_t>::min();
  std::vector<float> mult_;    // the dequantizing form: scale * scale2 per column
  std::vector<uint8_t> shifted_;
  bool any_b_zp_ = false, a_signed_ = false, requantize_ = false, y_signed_ = false, to_float_ = false;

  // The terms of the zero points that do not depend on the row, and A's row sums when B has zero points.
  void corrections(const uint8_t* a, int32_t za) {
    if (any_b_zp_)
      for (int64_t m = 0; m < rows_; ++m) {
        uint32_t s = 0;
        for (int64_t k = 0; k < K_; ++k) s += a[m * K_ + k];
        rowsum_[size_t(m)] = int32_t(s);
      }
    if (za == fix_za_) return;  // fix_ depends on za alone
    // In uint32: the low 32 bits of -za colsum + K za zb, as wrapping int32 sums keep them (a loop GCC vectorizes).
    uint32_t nza = uint32_t(-za), kza = uint32_t(int64_t(K_) * za);
    const int32_t *cs = colsum_.data(), *zb = b_zp_.data();
    uint32_t* fix = fix_.data();
    for (int64_t c = 0; c < N_; ++c) fix[c] = nza * uint32_t(cs[c]) + kza * uint32_t(zb[c]);
    fix_za_ = za;
  }

  // The dequantizing form: the corrections, the scales and the bias in one pass from the sums to the output.
  void dequantize(KernelContext& ctx, const uint8_t* a, int32_t za, const int32_t* acc) {
    corrections(a, za);
    auto column_values = [&](size_t i) -> const Tensor* {
      if (!ctx.has_input(i)) return nullptr;
      const Tensor& t = ctx.input(i);
      if (t.dtype() != DType::f32 || (t.numel() != 1 && t.numel() != N_))
        ctx.error("input ", i, " must be f32 with 1 or ", N_, " values");
      return &t;
    };
    const Tensor *s1 = column_values(4), *s2 = column_values(5), *b = column_values(6);
    if (!s1) ctx.error("scale (input 4) is required");
    if (b && b->numel() != N_) ctx.error("bias must have ", N_, " values, got ", b->numel());
    const float *p1 = s1->data<float>(), *p2 = s2 ? s2->data<float>() : nullptr;
    int64_t i1 = s1->numel() == 1 ? 0 : 1, i2 = s2 && s2->numel() != 1 ? 1 : 0;
    float* mult = mult_.data();
    if (!p2) {
      for (int64_t c = 0; c < N_; ++c) mult[c] = p1[i1 * c];
    } else if (i1 == 0 && i2 == 0) {
      std::fill(mult, mult + N_, p1[0] * p2[0]);
    } else {
      for (int64_t c = 0; c < N_; ++c) mult[c] = p1[i1 * c] * p2[i2 * c];
    }
    const float* bias = b ? b->data<float>() : nullptr;
    float* y = ctx.output(0).data<float>();
    const int32_t* zb = any_b_zp_ ? b_zp_.data() : nullptr;
    ScopedThreads t(threads_);
    cpu::parallel_ranges(rows_, N_, 1, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m)
        dequantize_row(acc + m * N_, fix_.data(), zb, zb ? uint32_t(rowsum_[size_t(m)]) : 0u, mult_.data(), bias,
                       N_, y + m * N_);
    });
  }

  // The zero points' terms, in wrapping 32-bit arithmetic (as int32 sums wrap).
  void correct(const uint8_t* a, int32_t za, int32_t* acc) {
    if (za == 0 && !any_b_zp_) return;
    corrections(a, za);
    const std::vector<uint32_t>& fix = fix_;
    for (int64_t m = 0; m < rows_; ++m) {
      uint32_t* row = reinterpret_cast<uint32_t*>(acc + m * N_);
      if (any_b_zp_) {
        uint32_t rs = uint32_t(rowsum_[size_t(m)]);
        for (int64_t c = 0; c < N_; ++c) row[c] += fix[size_t(c)] - uint32_t(b_zp_[size_t(c)]) * rs;
      } else {
        for (int64_t c = 0; c < N_; ++c) row[c] += fix[size_t(c)];
      }
    }
  }

  // As the reference: float(acc) * (a_scale * b_scale / y_scale) rounded half to even, + zero point, saturated.
  template <class Q>
  void requantize(KernelContext& ctx, const int32_t* acc) {
    float as = float(ctx.input(size_t(rec_.x_scale)).get_f64(0)), ys = float(ctx.input(size_t(rec_.y_scale)).get_f64(0));
    std::vector<double> bs = ref::nn::param_floats(ctx.input(size_t(rec_.w_scale)));
    if (bs.size() != 1 && int64_t(bs.size()) != N_) ctx.error("b_scale must be a scalar or have one value per column");
    std::vector<float> mult(static_cast<size_t>(N_));
    for (int64_t c = 0; c < N_; ++c) mult[size_t(c)] = as * float(bs[bs.size() == 1 ? 0 : size_t(c)]) / ys;
    constexpr int lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
    int32_t zp = zero_point(ctx, rec_.y_zp);
    Q* y = ctx.output(0).data<Q>();
    for (int64_t m = 0; m < rows_; ++m)
      requantize_row(acc + m * N_, nullptr, mult.data(), N_, zp, lo, hi, reinterpret_cast<uint8_t*>(y + m * N_));
  }
};

}  // namespace

std::unique_ptr<PreparedKernel> prepare_onednn_integer_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                              std::string* reason) {
  const IntegerOpRecord* r = record_of(n.op());
  if (!r) return nullptr;
  for (const PrepareInput& in : inputs)
    if (in.present && shape_numel(in.shape) == 0) return (*reason = "empty tensor", nullptr);
  if (!is_q8(inputs[size_t(r->x)].dtype) || !is_q8(inputs[size_t(r->w)].dtype))
    return (*reason = "operands not 8-bit", nullptr);
  try {
    std::vector<std::vector<int64_t>> ys = infer_output_dims(n, inputs);
    if (ys.size() != 1) return nullptr;
    if (r->conv) {
      auto k = std::make_unique<IntConvKernel>();
      DType yt = r->y_zp >= 0 ? inputs[size_t(r->y_zp)].dtype : DType::i32;
      if (k->prepare(n, *r, inputs, ys[0], yt, reason)) return k;
    } else {
      auto k = std::make_unique<IntMatMulKernel>();
      if (k->prepare(*r, inputs, ys[0], reason)) return k;
    }
  } catch (const dnnl::error& e) {
    *reason = std::string("oneDNN: ") + e.what();
  }
  return nullptr;
}

}  // namespace cuvil::onednn
