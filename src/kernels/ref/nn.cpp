// Reference kernels of the nn family: convolutions, pooling, matrix products, Einsum, Det and quantization.
// Inference (src/ir/ops/nn.cpp) has validated shapes, dtypes and attributes before a kernel runs; kernels still
// check what depends on data (indices).
#include <cmath>
#include <limits>

#include "ir/low_precision.h"
#include "ir/ops/nn_einsum.h"
#include "ir/ops/nn_window.h"
#include "kernels/ref/channels_last.h"
#include "kernels/ref/indexing.h"
#include "kernels/ref/nn_conv.h"
#include "kernels/ref/nn_matmul.h"
#include "kernels/ref/nn_quant.h"
#include "kernels/ref/reduction_util.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

using ref::MultiIndex;
using ref::nn::acc_t;
using ref::nn::as_acc;
using ref::nn::Geom;

// Calls fn.template operator()<T>() for the one of Ts that `t` names; fails on any other dtype.
template <class... Ts, class Fn>
void visit_among(const KernelContext& ctx, DType t, Fn&& fn) {
  bool done = ((t == dtype_of<Ts>::value ? (fn.template operator()<Ts>(), true) : false) || ...);
  if (!done) ctx.error("unsupported dtype ", dtype_name(t));
}

constexpr size_t kNoInput = SIZE_MAX;

#define CUVIL_NN_FLOATS float, double, f16_t, bf16_t
#define CUVIL_NN_Q8 uint8_t, int8_t

// ---- convolutions and pools

int64_t read_group(const KernelContext& ctx) {
  int64_t g = ctx.i("group");
  if (g < 1) ctx.error("group must be >= 1, got ", g);
  return g;
}

// The geometry of a forward window op (conv or pool) from the input and output shapes and the kernel size.
Geom forward_geom(const nn::Window& w, const std::vector<int64_t>& x, const std::vector<int64_t>& y,
                  const std::vector<int64_t>& kernel, int64_t group) {
  Geom g;
  g.n = x[0];
  g.c_in = x[1];
  g.c_out = y[1];
  g.group = group;
  size_t S = x.size() - 2, off = 3 - S;
  for (size_t i = 0; i < S; ++i) {
    size_t a = off + i;
    g.in[a] = x[2 + i];
    g.out[a] = y[2 + i];
    g.k[a] = kernel[i];
    g.s[a] = w.strides[i];
    g.d[a] = w.dilations[i];
    auto [pb, pe] = nn::window_pads(w, i, g.in[a], g.out[a], g.k[a]);
    g.pb[a] = pb;
    g.pe[a] = pe;
  }
  return g;
}

std::vector<int64_t> kernel_of(const Tensor& w) { return {w.shape().begin() + 2, w.shape().end()}; }

// Runs `body(x, w, bias, y)` on A-typed views of the float inputs and output, converting where T is not A.
template <class T, class Body>
void with_float_conv_buffers(KernelContext& ctx, size_t bias_index, Body body) {
  using A = acc_t<T>;
  std::vector<A> xb, wb, bb, yb;
  const A* x = as_acc<A, T>(ctx.input(0), xb);
  const A* w = as_acc<A, T>(ctx.input(1), wb);
  const A* b = ctx.has_input(bias_index) ? as_acc<A, T>(ctx.input(bias_index), bb) : nullptr;
  Tensor& y = ctx.output(0);
  if constexpr (std::is_same_v<A, T>) {
    body(x, w, b, y.data<T>());
  } else {
    yb.resize(size_t(y.numel()));
    body(x, w, b, yb.data());
    T* yp = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = T(yb[size_t(i)]);
  }
}

// The quantized operand of an integer conv minus its zero point; w's zero point may be per output channel.
template <class T>
std::vector<uint32_t> centered_conv_operand(const Tensor& t, const Tensor* zp, bool per_channel_ok) {
  std::vector<int64_t> strides(t.rank(), 0);
  if (zp && zp->numel() > 1 && per_channel_ok) strides[0] = 1;
  return ref::nn::centered<T>(t, zp, strides);
}

// Integer convolution shared by ConvInteger and QLinearConv: the wrapped int32 sums, bias included.
std::vector<uint32_t> integer_conv(KernelContext& ctx, size_t xi, size_t xzi, size_t wi, size_t wzi, size_t bi) {
  const Tensor &x = ctx.input(xi), &w = ctx.input(wi);
  const Tensor* xz = ctx.has_input(xzi) ? &ctx.input(xzi) : nullptr;
  const Tensor* wz = ctx.has_input(wzi) ? &ctx.input(wzi) : nullptr;
  std::vector<uint32_t> xc, wc, bias;
  visit_among<CUVIL_NN_Q8>(ctx, x.dtype(), [&]<class T>() { xc = centered_conv_operand<T>(x, xz, false); });
  visit_among<CUVIL_NN_Q8>(ctx, w.dtype(), [&]<class T>() { wc = centered_conv_operand<T>(w, wz, true); });
  if (ctx.has_input(bi)) {
    const Tensor& b = ctx.input(bi);
    for (int64_t i = 0; i < b.numel(); ++i) bias.push_back(uint32_t(b.data<int32_t>()[i]));
  }
  const Tensor& y = ctx.output(0);
  nn::Window win = nn::read_window(ctx, x.rank() - 2, {});
  Geom g = forward_geom(win, x.shape(), y.shape(), kernel_of(w), read_group(ctx));
  std::vector<uint32_t> acc(size_t(y.numel()));
  ref::nn::conv_forward<uint32_t>(g, xc.data(), wc.data(), bias.empty() ? nullptr : bias.data(), acc.data());
  return acc;
}

Geom pool_geom(KernelContext& ctx, const nn::Window& w) {
  const Tensor& x = ctx.input(0);
  return forward_geom(w, x.shape(), ctx.output(0).shape(), w.kernel, 1);
}

template <class T>
void global_pool(KernelContext& ctx, bool is_max) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t planes = x.rank() >= 2 ? x.dim(0) * x.dim(1) : 0;
  int64_t plane = 1;
  for (size_t d = 2; d < x.rank(); ++d) plane *= x.dim(d);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = xp + p * plane;
    if (is_max) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < plane; ++i) {
        double v = double(in[i]);
        if (v > m || (std::isnan(v) && !std::isnan(m))) m = v;  // NaN propagates
      }
      yp[p] = T(compute_t<T>(m));
    } else {
      double sum = 0;
      for (int64_t i = 0; i < plane; ++i) sum += double(in[i]);
      yp[p] = T(compute_t<T>(sum / double(plane)));
    }
  }
}

// ---- matrix products

// y = A x B for numpy-broadcast batches, in the accumulation type A.
template <class A>
void batched_matmul(const A* a, const A* b, A* y, const ref::nn::MatmulShape& s) {
  std::vector<int64_t> sa = ref::broadcast_strides(s.a_batch, s.batch);
  std::vector<int64_t> sb = ref::broadcast_strides(s.b_batch, s.batch);
  int64_t batches = shape_numel(s.batch);
  std::fill(y, y + batches * s.m * s.n, A(0));
  MultiIndex it(s.batch, {sa, sb});
  for (int64_t i = 0; i < batches; ++i, it.next())
    ref::nn::matmul_acc(a + it.offset(0) * s.m * s.k, b + it.offset(1) * s.k * s.n, y + i * s.m * s.n, s.m, s.k,
                        s.n);
}

// Integer matrix product shared by MatMulInteger and QLinearMatMul: wrapped int32 sums of centered operands.
std::vector<uint32_t> integer_matmul(KernelContext& ctx, size_t ai, size_t azi, size_t bi, size_t bzi,
                                     ref::nn::MatmulShape& s) {
  const Tensor &a = ctx.input(ai), &b = ctx.input(bi);
  const Tensor* az = ctx.has_input(azi) ? &ctx.input(azi) : nullptr;
  const Tensor* bz = ctx.has_input(bzi) ? &ctx.input(bzi) : nullptr;
  std::vector<uint32_t> ac, bc;
  visit_among<CUVIL_NN_Q8>(ctx, a.dtype(), [&]<class T>() {
    ac = ref::nn::centered<T>(a, az, ref::nn::param_strides(az, a.shape(), true));
  });
  visit_among<CUVIL_NN_Q8>(ctx, b.dtype(), [&]<class T>() {
    bc = ref::nn::centered<T>(b, bz, ref::nn::param_strides(bz, b.shape(), false));
  });
  s = ref::nn::matmul_shape(a.shape(), b.shape());
  std::vector<uint32_t> y(size_t(shape_numel(s.batch) * s.m * s.n));
  batched_matmul<uint32_t>(ac.data(), bc.data(), y.data(), s);
  return y;
}

// ---- quantization

// Applies fn(i, param_index) over x's elements, where param_index selects the per-tensor (0) or per-axis scale.
template <class Fn>
void for_each_axis_param(const KernelContext& ctx, const Tensor& x, const Tensor& scale, Fn fn) {
  if (scale.numel() == 1) {
    for (int64_t i = 0; i < x.numel(); ++i) fn(i, 0);
    return;
  }
  int64_t rank = int64_t(x.rank()), axis = ctx.i("axis");
  if (axis < -rank || axis >= rank) ctx.error("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1, n = x.dim(size_t(axis));
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  if (scale.numel() != n) ctx.error("scale has ", scale.numel(), " values for axis ", axis, " of size ", n);
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t j = 0; j < inner; ++j) fn(i++, c);
}

// The scale (input 1) and zero point (input 2; 0 when omitted) of (De)QuantizeLinear as doubles and ints, with one
// zero point per scale.
struct QuantParams {
  std::vector<double> scale;
  std::vector<int64_t> zero_point;
};
QuantParams quant_params(const KernelContext& ctx) {
  QuantParams p{ref::nn::param_floats(ctx.input(1)), ref::nn::param_ints(ctx.has_input(2) ? &ctx.input(2) : nullptr)};
  if (p.zero_point.size() != p.scale.size()) p.zero_point.assign(p.scale.size(), p.zero_point[0]);
  return p;
}

// Determinant by LU decomposition with partial pivoting, in double.
double determinant(std::vector<double>& a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t piv = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[size_t(r * n + col)]) > std::fabs(a[size_t(piv * n + col)])) piv = r;
    if (piv != col) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[size_t(col * n + c)], a[size_t(piv * n + c)]);
      det = -det;
    }
    double p = a[size_t(col * n + col)];
    det *= p;
    if (p == 0) return det;  // singular (keeps the sign of zero)
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[size_t(r * n + col)] / p;
      if (f == 0) continue;
      for (int64_t c = col + 1; c < n; ++c) a[size_t(r * n + c)] -= f * a[size_t(col * n + c)];
    }
  }
  return det;
}

}  // namespace

CUVIL_REF_KERNEL(Conv) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  nn::Window win = nn::read_window(ctx, x.rank() - 2, {});
  Geom g = forward_geom(win, x.shape(), ctx.output(0).shape(), kernel_of(w), read_group(ctx));
  visit_among<CUVIL_NN_FLOATS>(ctx, x.dtype(), [&]<class T>() {
    with_float_conv_buffers<T>(ctx, 2, [&](const auto* xp, const auto* wp, const auto* bp, auto* yp) {
      ref::nn::conv_forward(g, xp, wp, bp, yp);
    });
  });
}

CUVIL_REF_KERNEL(ConvTranspose) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  const Tensor& y = ctx.output(0);
  size_t S = x.rank() - 2, off = 3 - S;
  nn::Window win = nn::read_window(ctx, S, {});
  std::vector<int64_t> opad = ctx.ints("output_padding");
  if (opad.empty()) opad.assign(S, 0);
  bool explicit_out = !ctx.ints("output_shape").empty();
  Geom g;
  g.n = x.dim(0);
  g.c_in = x.dim(1);
  g.c_out = y.dim(1);
  g.group = read_group(ctx);
  for (size_t i = 0; i < S; ++i) {
    size_t a = off + i;
    g.in[a] = x.dim(2 + i);
    g.out[a] = y.dim(2 + i);
    g.k[a] = w.dim(2 + i);
    g.s[a] = win.strides[i];
    g.d[a] = win.dilations[i];
    g.pb[a] = nn::transpose_pad_begin(win, i, g.in[a], g.out[a], g.k[a], opad.at(i), explicit_out);
  }
  visit_among<CUVIL_NN_FLOATS>(ctx, x.dtype(), [&]<class T>() {
    with_float_conv_buffers<T>(ctx, 2, [&](const auto* xp, const auto* wp, const auto* bp, auto* yp) {
      ref::nn::conv_transpose(g, xp, wp, bp, yp);
    });
  });
}

CUVIL_REF_KERNEL(ConvInteger) {
  std::vector<uint32_t> acc = integer_conv(ctx, 0, 2, 1, 3, kNoInput);
  int32_t* y = ctx.output(0).data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = int32_t(acc[i]);
}

static void qlinear_conv_channels_first(KernelContext& ctx) {
  std::vector<uint32_t> acc = integer_conv(ctx, 0, 2, 3, 5, 8);
  Tensor& y = ctx.output(0);
  float x_scale = float(ctx.input(1).get_f64(0)), y_scale = float(ctx.input(6).get_f64(0));
  std::vector<double> w_scale = ref::nn::param_floats(ctx.input(4));
  int64_t y_zp = ctx.input(7).get_i64(0);
  int64_t channels = y.dim(1), plane = 1;
  for (size_t d = 2; d < y.rank(); ++d) plane *= y.dim(d);
  std::vector<float> mult(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m)
    mult[size_t(m)] = x_scale * float(w_scale[w_scale.size() == 1 ? 0 : size_t(m)]) / y_scale;
  visit_among<CUVIL_NN_Q8>(ctx, y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      float v = float(int32_t(acc[size_t(i)])) * mult[size_t((i / plane) % channels)];
      yp[i] = ref::nn::quantize_value<Q>(v, y_zp);
    }
  });
}

// channels_last = 1: assign-layouts' form between channels-last neighbours.
CUVIL_REF_KERNEL(QLinearConv) { ref::channels_first_or(ctx, qlinear_conv_channels_first); }

static void max_pool_channels_first(KernelContext& ctx) {
  nn::WindowAttrs which;
  which.has_ceil_mode = true;
  which.kernel_required = true;
  nn::Window win = nn::read_window(ctx, ctx.input(0).rank() - 2, which);
  Geom g = pool_geom(ctx, win);
  int64_t* ind = ctx.num_outputs() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
  bool col_major = ctx.i("storage_order") == 1;
  visit_among<CUVIL_NN_FLOATS, CUVIL_NN_Q8>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    ref::nn::max_pool<T>(g, ctx.input(0).data<T>(), ctx.output(0).data<T>(), ind, col_major);
  });
}

CUVIL_REF_KERNEL(MaxPool) { ref::channels_first_or(ctx, max_pool_channels_first); }

static void average_pool_channels_first(KernelContext& ctx) {
  nn::WindowAttrs which;
  which.has_ceil_mode = true;
  which.kernel_required = true;
  nn::Window win = nn::read_window(ctx, ctx.input(0).rank() - 2, which);
  Geom g = pool_geom(ctx, win);
  bool include_pad = ctx.i("count_include_pad") == 1;
  visit_among<CUVIL_NN_FLOATS>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    ref::nn::avg_pool<T>(g, ctx.input(0).data<T>(), ctx.output(0).data<T>(), include_pad);
  });
}

CUVIL_REF_KERNEL(AveragePool) { ref::channels_first_or(ctx, average_pool_channels_first); }

static void global_average_pool_channels_first(KernelContext& ctx) {
  visit_among<CUVIL_NN_FLOATS>(ctx, ctx.input(0).dtype(), [&]<class T>() { global_pool<T>(ctx, false); });
}

CUVIL_REF_KERNEL(GlobalAveragePool) { ref::channels_first_or(ctx, global_average_pool_channels_first); }

static void global_max_pool_channels_first(KernelContext& ctx) {
  visit_among<CUVIL_NN_FLOATS>(ctx, ctx.input(0).dtype(), [&]<class T>() { global_pool<T>(ctx, true); });
}

CUVIL_REF_KERNEL(GlobalMaxPool) { ref::channels_first_or(ctx, global_max_pool_channels_first); }

CUVIL_REF_KERNEL(MaxUnpool) {
  const Tensor &x = ctx.input(0), &ind = ctx.input(1);
  Tensor& y = ctx.output(0);
  size_t S = x.rank() - 2;
  nn::WindowAttrs which;
  which.has_auto_pad = false;
  which.has_dilations = false;
  which.kernel_required = true;
  nn::Window win = nn::read_window(ctx, S, which);
  // Indices address the unpooled tensor of the natural size; an explicit output_shape pads it at the end.
  std::vector<int64_t> natural{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < S; ++i)
    natural.push_back((x.dim(2 + i) - 1) * win.strides[i] + win.kernel[i] - win.pads[i] - win.pads[S + i]);
  for (size_t d = 0; d < natural.size(); ++d)
    if (natural[d] > y.dim(d))
      ctx.error("output_shape ", shape_str(y.shape()), " is smaller than the unpooled size ", shape_str(natural));
  int64_t natural_numel = shape_numel(natural);
  std::vector<int64_t> ystr = ref::strides_of(y.shape());
  bool same = natural == y.shape();
  const int64_t* ip = ind.data<int64_t>();
  visit_among<CUVIL_NN_FLOATS>(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::fill(yp, yp + y.numel(), T(0.0f));
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t idx = ip[i];
      if (idx < 0 || idx >= natural_numel)
        ctx.error("index ", idx, " at position ", i, " is out of range for the unpooled shape ",
                  shape_str(natural));
      int64_t dst = idx;
      if (!same) {
        dst = 0;
        for (size_t d = natural.size(); d-- > 0;) {
          dst += (idx % natural[d]) * ystr[d];
          idx /= natural[d];
        }
      }
      yp[dst] = xp[i];
    }
  });
}

CUVIL_REF_KERNEL(Gemm) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  bool ta = ctx.i("transA") != 0, tb = ctx.i("transB") != 0;
  int64_t m = y.dim(0), n = y.dim(1), k = ta ? a.dim(0) : a.dim(1);
  double alpha = ctx.f("alpha"), beta = ctx.f("beta");
  visit_among<CUVIL_NN_FLOATS, int32_t, int64_t, uint32_t, uint64_t>(ctx, a.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    // Both operands as contiguous [M, K] and [K, N] in A.
    const T *ap = a.data<T>(), *bp = b.data<T>();
    std::vector<A> am(size_t(m * k)), bm(size_t(k * n)), acc(size_t(m * n), A(0));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) am[size_t(i * k + p)] = static_cast<A>(ta ? ap[p * m + i] : ap[i * k + p]);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) bm[size_t(p * n + j)] = static_cast<A>(tb ? bp[j * k + p] : bp[p * n + j]);
    ref::nn::matmul_acc(am.data(), bm.data(), acc.data(), m, k, n);
    const T* cp = ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr;
    std::vector<int64_t> cstr = cp ? ref::broadcast_strides(ctx.input(2).shape(), {m, n}) : std::vector<int64_t>{0, 0};
    T* yp = y.data<T>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        A v = acc[size_t(i * n + j)];
        A c = cp ? static_cast<A>(cp[i * cstr[0] + j * cstr[1]]) : A(0);
        if constexpr (is_float_v<T>) {
          yp[i * n + j] = T(A(alpha) * v + A(beta) * c);
        } else {
          // Integral alpha and beta (checked by inference), in wrapping arithmetic.
          yp[i * n + j] = ref::nn::from_acc<T>(A(int64_t(alpha)) * v + A(int64_t(beta)) * c);
        }
      }
    }
  });
}

CUVIL_REF_KERNEL(MatMul) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  ref::nn::MatmulShape s = ref::nn::matmul_shape(a.shape(), b.shape());
  visit_among<CUVIL_NN_FLOATS, int32_t, int64_t, uint32_t, uint64_t>(ctx, a.dtype(), [&]<class T>() {
    using A = acc_t<T>;
    std::vector<A> ab, bb, yb;
    const A* ap = as_acc<A, T>(a, ab);
    const A* bp = as_acc<A, T>(b, bb);
    if constexpr (std::is_same_v<A, T>) {
      batched_matmul<A>(ap, bp, y.data<T>(), s);
    } else {
      yb.resize(size_t(y.numel()));
      batched_matmul<A>(ap, bp, yb.data(), s);
      T* yp = y.data<T>();
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] = ref::nn::from_acc<T>(yb[size_t(i)]);
    }
  });
}

// With a scale (Cuvil's dequantizing form, see the op): as the graph fuse-matmul replaced, each sum converted to
// float and multiplied by its column's scale * scale2 (a float product), then the bias added, in float.
CUVIL_REF_KERNEL(MatMulInteger) {
  ref::nn::MatmulShape s;
  std::vector<uint32_t> acc = integer_matmul(ctx, 0, 2, 1, 3, s);
  if (!ctx.has_input(4)) {
    int32_t* y = ctx.output(0).data<int32_t>();
    for (size_t i = 0; i < acc.size(); ++i) y[i] = int32_t(acc[i]);
    return;
  }
  int64_t n = s.n;
  auto column = [&](size_t i, int64_t c) -> const float* {  // input i's value for column c (null when absent)
    if (!ctx.has_input(i)) return nullptr;
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 && t.numel() != n) ctx.error("input ", i, " must have 1 or ", n, " values, got ", t.numel());
    return t.data<float>() + (t.numel() == 1 ? 0 : c);
  };
  float* y = ctx.output(0).data<float>();
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t c = int64_t(i) % n;
    float scale = *column(4, c);
    if (const float* s2 = column(5, c)) scale = scale * *s2;
    float v = float(int32_t(acc[i])) * scale;
    if (const float* b = column(6, c)) v = v + *b;
    y[i] = v;
  }
}

CUVIL_REF_KERNEL(QLinearMatMul) {
  ref::nn::MatmulShape s;
  std::vector<uint32_t> acc = integer_matmul(ctx, 0, 2, 3, 5, s);
  std::vector<double> a_scale = ref::nn::param_floats(ctx.input(1)), b_scale = ref::nn::param_floats(ctx.input(4));
  if ((a_scale.size() != 1 && int64_t(a_scale.size()) != s.m) || (b_scale.size() != 1 && int64_t(b_scale.size()) != s.n))
    ctx.error("a_scale and b_scale must be scalars or have one value per row of a / column of b");
  float y_scale = float(ctx.input(6).get_f64(0));
  int64_t y_zp = ctx.input(7).get_i64(0);
  Tensor& y = ctx.output(0);
  visit_among<CUVIL_NN_Q8>(ctx, y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t row = (i / s.n) % s.m, col = i % s.n;
      float mult = float(a_scale[a_scale.size() == 1 ? 0 : size_t(row)]) *
                   float(b_scale[b_scale.size() == 1 ? 0 : size_t(col)]) / y_scale;
      yp[i] = ref::nn::quantize_value<Q>(float(int32_t(acc[size_t(i)])) * mult, y_zp);
    }
  });
}

CUVIL_REF_KERNEL(Einsum) {
  size_t nops = ctx.num_inputs();
  std::vector<size_t> ranks;
  for (size_t k = 0; k < nops; ++k) ranks.push_back(ctx.input(k).rank());
  nn::EinsumSpec spec = nn::parse_einsum(ctx, ctx.s("equation"), ranks);
  // Label sizes (1 broadcasts), then each operand's stride per label: repeated labels add up (diagonals) and a
  // broadcast dim of size 1 reads with stride 0.
  std::vector<int64_t> size(size_t(spec.num_labels), -1);
  for (size_t k = 0; k < nops; ++k) {
    for (size_t d = 0; d < ranks[k]; ++d) {
      int64_t x = ctx.input(k).dim(d);
      int64_t& cur = size[size_t(spec.inputs[k][d])];
      if (cur == -1 || cur == 1) cur = x;
      else if (x != 1 && x != cur) ctx.error("input ", k, " dim ", d, " is ", x, " but its label has size ", cur);
    }
  }
  std::vector<bool> in_output(size_t(spec.num_labels), false);
  for (int l : spec.output) in_output[size_t(l)] = true;
  std::vector<int> reduced;
  for (int l = 0; l < spec.num_labels; ++l)
    if (size[size_t(l)] >= 0 && !in_output[size_t(l)]) reduced.push_back(l);
  std::vector<int64_t> out_shape, red_shape;
  for (int l : spec.output) out_shape.push_back(size[size_t(l)]);
  for (int l : reduced) red_shape.push_back(size[size_t(l)]);
  std::vector<std::vector<int64_t>> out_strides, red_strides;
  for (size_t k = 0; k < nops; ++k) {
    const Tensor& t = ctx.input(k);
    std::vector<int64_t> st = ref::strides_of(t.shape()), per_label(size_t(spec.num_labels), 0);
    for (size_t d = 0; d < ranks[k]; ++d) {
      int l = spec.inputs[k][d];
      if (!(t.dim(d) == 1 && size[size_t(l)] != 1)) per_label[size_t(l)] += st[d];
    }
    out_strides.emplace_back();
    red_strides.emplace_back();
    for (int l : spec.output) out_strides.back().push_back(per_label[size_t(l)]);
    for (int l : reduced) red_strides.back().push_back(per_label[size_t(l)]);
  }
  Tensor& y = ctx.output(0);
  visit_among<CUVIL_NN_FLOATS, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>(
      ctx, y.dtype(), [&]<class T>() {
        // Floats sum in double; integers in wrapping unsigned arithmetic.
        using A = std::conditional_t<is_float_v<T>, double, acc_t<T>>;
        std::vector<std::vector<A>> ops(nops);
        for (size_t k = 0; k < nops; ++k) {
          const T* p = ctx.input(k).data<T>();
          ops[k].resize(size_t(ctx.input(k).numel()));
          for (size_t i = 0; i < ops[k].size(); ++i) ops[k][i] = static_cast<A>(compute_t<T>(p[i]));
        }
        int64_t red_n = shape_numel(red_shape);
        MultiIndex outer(out_shape, out_strides), red0(red_shape, red_strides), it = red0;
        T* yp = y.data<T>();
        for (int64_t o = 0; o < y.numel(); ++o, outer.next()) {
          it = red0;
          A acc = A(0);
          for (int64_t r = 0; r < red_n; ++r, it.next()) {
            A prod = A(1);
            for (size_t k = 0; k < nops; ++k) prod *= ops[k][size_t(outer.offset(k) + it.offset(k))];
            acc += prod;
          }
          if constexpr (is_float_v<T>) yp[o] = T(compute_t<T>(acc));
          else yp[o] = ref::nn::from_acc<T>(acc);
        }
      });
}

CUVIL_REF_KERNEL(Det) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t n = x.dim(x.rank() - 1), count = y.numel();
  visit_among<CUVIL_NN_FLOATS>(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<double> a(size_t(n * n));
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t i = 0; i < n * n; ++i) a[size_t(i)] = double(xp[b * n * n + i]);
      yp[b] = T(compute_t<T>(determinant(a, n)));
    }
  });
}

// (De)QuantizeLinear to and from the low-precision types, as the onnx reference has them: int4/uint4/int2/uint2
// round half to even, add the zero point and clip; float8 saturate (or not) with the zero point unused (it must
// be 0 to dequantize); float4e2m1 adds the zero point when quantizing only.
static void quantize_low_precision(KernelContext& ctx, const Tensor& x, const Tensor& scale, Tensor& y) {
  const DType q = y.dtype();
  const std::vector<double> sc = ref::nn::param_floats(scale);
  std::vector<double> zp(sc.size(), 0.0);
  if (ctx.has_input(2))
    for (size_t k = 0; k < zp.size(); ++k) zp[k] = ctx.input(2).get_f64(ctx.input(2).numel() == 1 ? 0 : int64_t(k));
  const bool saturate = ctx.i("saturate") != 0;
  auto* yp = static_cast<uint8_t*>(y.raw());
  visit_among<CUVIL_NN_FLOATS, int32_t>(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    for_each_axis_param(ctx, x, scale, [&](int64_t i, int64_t c) {
      double v;  // f32 and the 16-bit floats divide in float (as the ONNX reference does), f64 and i32 in double
      if constexpr (std::is_same_v<compute_t<T>, float>) v = float(xp[i]) / float(sc[size_t(c)]);
      else v = double(xp[i]) / sc[size_t(c)];
      if (!is_low_precision_float(q)) yp[i] = low_precision_quantize_int(q, v, int64_t(zp[size_t(c)]));
      else if (q == DType::f4e2m1) yp[i] = low_precision_encode(q, double(float(v + zp[size_t(c)])), true);
      else yp[i] = low_precision_encode(q, v, saturate);
    });
  });
}

static void dequantize_low_precision(KernelContext& ctx, const Tensor& x, const Tensor& scale, Tensor& y) {
  const DType t = x.dtype();
  const std::vector<double> sc = ref::nn::param_floats(scale);
  std::vector<double> zp(sc.size(), 0.0);
  if (ctx.has_input(2) && (t == DType::u4 || t == DType::i4 || t == DType::u2 || t == DType::i2))
    for (size_t k = 0; k < zp.size(); ++k) zp[k] = ctx.input(2).get_f64(ctx.input(2).numel() == 1 ? 0 : int64_t(k));
  if (ctx.has_input(2) && t != DType::f4e2m1 && is_low_precision_float(t))
    for (int64_t k = 0; k < ctx.input(2).numel(); ++k)
      if (ctx.input(2).get_f64(k) != 0) ctx.error("a float8 zero point must be 0, got ", ctx.input(2).get_f64(k));
  const auto* xp = static_cast<const uint8_t*>(x.raw());  // may alias y (in place): read before written
  visit_among<CUVIL_NN_FLOATS>(ctx, y.dtype(), [&]<class Y>() {
    Y* yp = y.data<Y>();
    for_each_axis_param(ctx, x, scale, [&](int64_t i, int64_t c) {
      float d = float(low_precision_decode(t, xp[i])) - float(zp[size_t(c)]);
      yp[i] = Y(compute_t<Y>(d * float(sc[size_t(c)])));
    });
  });
}

CUVIL_REF_KERNEL(QuantizeLinear) {
  const Tensor &x = ctx.input(0), &scale = ctx.input(1);
  Tensor& y = ctx.output(0);
  if (is_low_precision(y.dtype())) return quantize_low_precision(ctx, x, scale, y);
  const QuantParams qp = quant_params(ctx);
  visit_among<CUVIL_NN_Q8, uint16_t, int16_t>(ctx, y.dtype(), [&]<class Q>() {
    Q* yp = y.data<Q>();
    visit_among<CUVIL_NN_FLOATS, int32_t>(ctx, x.dtype(), [&]<class T>() {
      const T* xp = x.data<T>();
      for_each_axis_param(ctx, x, scale, [&](int64_t i, int64_t c) {
        // f32 and the 16-bit floats divide in float (as the ONNX reference does), f64 and i32 in double.
        double q;
        if constexpr (std::is_same_v<compute_t<T>, float>) q = float(xp[i]) / float(qp.scale[size_t(c)]);
        else q = double(xp[i]) / qp.scale[size_t(c)];
        yp[i] = ref::nn::quantize_value<Q>(q, qp.zero_point[size_t(c)]);
      });
    });
  });
}

CUVIL_REF_KERNEL(DequantizeLinear) {
  const Tensor &x = ctx.input(0), &scale = ctx.input(1);
  Tensor& y = ctx.output(0);
  if (is_low_precision(x.dtype())) return dequantize_low_precision(ctx, x, scale, y);
  const QuantParams qp = quant_params(ctx);
  float* yp = y.data<float>();
  visit_among<CUVIL_NN_Q8, int32_t, uint16_t, int16_t>(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();  // may alias yp (in place): element i is read before it is written
    for_each_axis_param(ctx, x, scale, [&](int64_t i, int64_t c) {
      yp[i] = float(int64_t(xp[i]) - qp.zero_point[size_t(c)]) * float(qp.scale[size_t(c)]);
    });
  });
}

CUVIL_REF_KERNEL(DynamicQuantizeLinear) {
  const Tensor& x = ctx.input(0);
  const float* xp = x.data<float>();
  // The range always includes 0 so that 0 is exactly representable; NaNs are ignored.
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (xp[i] < lo) lo = xp[i];
    if (xp[i] > hi) hi = xp[i];
  }
  float scale = (hi - lo) / 255.0f;
  uint8_t zp = 0;
  if (scale != 0) zp = ref::nn::quantize_value<uint8_t>(0.0f - lo / scale, 0);
  uint8_t* yp = ctx.output(0).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    yp[i] = scale != 0 ? ref::nn::quantize_value<uint8_t>(xp[i] / scale, zp) : zp;
  ctx.output(1).data<float>()[0] = scale;
  ctx.output(2).data<uint8_t>()[0] = zp;
}

}  // namespace cuvil

namespace cuvil {

// Each head's first `rot` channels turn by the cached angle of their position: (x1, x2) -> (cos x1 - sin x2,
// sin x1 + cos x2), x1/x2 the two halves (or the even/odd channels, interleaved=1). In double, rounded once.
CUVIL_REF_KERNEL(RotaryEmbedding) {
  const Tensor& x = ctx.input(0);
  const Tensor& cosc = ctx.input(1);
  const Tensor& sinc = ctx.input(2);
  const Tensor* pos = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  bool rank4 = x.rank() == 4;
  if (!rank4 && x.rank() != 3) ctx.error("input 0 must have rank 3 or 4, got ", x.type_str());
  int64_t B = x.dim(0), H, S, D;
  if (rank4) {
    H = x.dim(1), S = x.dim(2), D = x.dim(3);
  } else {
    H = ctx.i("num_heads"), S = x.dim(1);
    if (H <= 0 || x.dim(2) % H != 0) ctx.error("hidden size ", x.dim(2), " is not a multiple of num_heads ", H);
    D = x.dim(2) / H;
  }
  int64_t rot = ctx.i("rotary_embedding_dim") > 0 ? ctx.i("rotary_embedding_dim") : D;
  if (rot > D || rot % 2 != 0) ctx.error("rotary_embedding_dim ", rot, " must be even and at most the head size ", D);
  int64_t half = rot / 2;
  bool interleaved = ctx.i("interleaved") != 0;
  if (cosc.type_str() != sinc.type_str()) ctx.error("cos_cache and sin_cache differ: ", cosc.type_str(), " vs ", sinc.type_str());
  if (cosc.rank() < 1 || cosc.dim(cosc.rank() - 1) != half)
    ctx.error("the caches' last dim must be rotary_embedding_dim/2 = ", half, ", got ", cosc.type_str());
  std::vector<int64_t> pids;
  if (pos) {
    if (cosc.rank() != 2) ctx.error("with position_ids the caches must be [max_position, ", half, "], got ", cosc.type_str());
    if (pos->numel() != B * S) ctx.error("position_ids must be [", B, ", ", S, "], got ", pos->type_str());
    pids = pos->to_i64_vector();
    for (int64_t p : pids)
      if (p < 0 || p >= cosc.dim(0)) ctx.error("position id ", p, " is outside the caches' ", cosc.dim(0), " rows");
  } else if (cosc.rank() != 3 || cosc.dim(0) != B || cosc.dim(1) != S) {
    ctx.error("without position_ids the caches must be [", B, ", ", S, ", ", half, "], got ", cosc.type_str());
  }
  std::vector<double> xs = ref::to_f64_vector(x), cs = ref::to_f64_vector(cosc), ss = ref::to_f64_vector(sinc);
  std::vector<double> ys = xs;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      int64_t row = pos ? pids[size_t(b * S + s)] : b * S + s;
      const double* cr = cs.data() + row * half;
      const double* sr = ss.data() + row * half;
      for (int64_t h = 0; h < H; ++h) {
        int64_t base = rank4 ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D;
        for (int64_t j = 0; j < half; ++j) {
          int64_t i1 = interleaved ? base + 2 * j : base + j;
          int64_t i2 = interleaved ? base + 2 * j + 1 : base + j + half;
          double x1 = xs[size_t(i1)], x2 = xs[size_t(i2)];
          ys[size_t(i1)] = cr[j] * x1 - sr[j] * x2;
          ys[size_t(i2)] = sr[j] * x1 + cr[j] * x2;
        }
      }
    }
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < y.numel(); ++i) ref::set_f64(ctx, y, i, ys[size_t(i)]);
}

}  // namespace cuvil
