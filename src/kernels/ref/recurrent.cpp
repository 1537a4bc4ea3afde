// Reference kernels of the recurrent family: RNN, GRU, LSTM and Resize.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/recurrent_common.h"
#include "kernels/ref/indexing.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

using recurrent::Activation;
using recurrent::ActKind;

// ---- RNN, GRU, LSTM

template <class C>
C activate(const Activation& a, C x) {
  const C alpha = C(a.alpha), beta = C(a.beta);
  switch (a.kind) {
    case ActKind::Relu: return x > C(0) ? x : C(0);
    case ActKind::Tanh: return std::tanh(x);
    case ActKind::Sigmoid: return C(1) / (C(1) + std::exp(-x));
    case ActKind::Affine: return alpha * x + beta;
    case ActKind::LeakyRelu: return x >= C(0) ? x : alpha * x;
    case ActKind::ThresholdedRelu: return x >= alpha ? x : C(0);
    case ActKind::ScaledTanh: return alpha * std::tanh(beta * x);
    case ActKind::HardSigmoid: return std::min(std::max(alpha * x + beta, C(0)), C(1));
    case ActKind::Elu: return x >= C(0) ? x : alpha * (std::exp(x) - C(1));
    case ActKind::Softsign: return x / (C(1) + std::abs(x));
    // log(1 + e^x) without overflow for large x.
    case ActKind::Softplus: return std::max(x, C(0)) + std::log1p(std::exp(-std::abs(x)));
  }
  return x;
}

template <class T>
std::vector<compute_t<T>> to_compute(const Tensor* t) {
  std::vector<compute_t<T>> v;
  if (!t) return v;
  const T* p = t->data<T>();
  v.reserve(size_t(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) v.push_back(compute_t<T>(p[i]));
  return v;
}

void expect_numel(const KernelContext& ctx, const Tensor* t, const char* what, int64_t want) {
  if (t && t->numel() != want)
    ctx.error(what, " is ", t->type_str(), " but ", want, " elements are needed");
}

enum class Cell { Rnn, Gru, Lstm };

// Runs one of the three recurrences. Each (direction, batch entry) pair is an independent sequence, processed
// one time step after another; gate pre-activations are plain dot products of W/R rows with x_t/h_{t-1}.
template <class T>
void run_recurrent(KernelContext& ctx, Cell cell) {
  using C = compute_t<T>;
  const int G = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const Tensor& X = ctx.input(0);
  const Tensor& Wt = ctx.input(1);
  const Tensor& Rt = ctx.input(2);
  auto opt = [&](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  const Tensor* Bt = opt(3);
  const Tensor* lens_t = opt(4);
  const Tensor* h0_t = opt(5);
  const Tensor* c0_t = cell == Cell::Lstm ? opt(6) : nullptr;
  const Tensor* P_t = cell == Cell::Lstm ? opt(7) : nullptr;

  auto dir = recurrent::parse_direction(ctx.s("direction"));
  if (!dir) ctx.error("direction '", ctx.s("direction"), "' must be forward, reverse or bidirectional");
  const int64_t nd = recurrent::num_directions(*dir);
  const bool batch_major = ctx.i("layout") == 1;
  if (X.rank() != 3 || Wt.rank() != 3 || Rt.rank() != 3) ctx.error("X, W and R must have rank 3");
  const int64_t seq = X.dim(batch_major ? 1 : 0), batch = X.dim(batch_major ? 0 : 1), in = X.dim(2);
  const int64_t H = ctx.has("hidden_size") ? ctx.i("hidden_size") : Rt.dim(2);
  if (H < 0 || (H == 0 && ctx.has("hidden_size"))) ctx.error("hidden_size must be positive, got ", H);
  expect_numel(ctx, &Wt, "W", nd * G * H * in);
  expect_numel(ctx, &Rt, "R", nd * G * H * H);
  expect_numel(ctx, Bt, "B", nd * 2 * G * H);
  expect_numel(ctx, lens_t, "sequence_lens", batch);
  expect_numel(ctx, h0_t, "initial_h", nd * batch * H);
  expect_numel(ctx, c0_t, "initial_c", nd * batch * H);
  expect_numel(ctx, P_t, "P", nd * 3 * H);

  const std::vector<int32_t> lens =
      lens_t ? std::vector<int32_t>(lens_t->data<int32_t>(), lens_t->data<int32_t>() + batch)
             : std::vector<int32_t>(size_t(batch), int32_t(seq));
  for (int64_t b = 0; b < batch; ++b)
    if (lens[size_t(b)] < 0 || lens[size_t(b)] > seq)
      ctx.error("sequence_lens[", b, "] = ", lens[size_t(b)], " is outside [0, ", seq, "]");

  auto acts = recurrent::resolve_activations(
      ctx, int(nd),
      cell == Cell::Rnn ? std::vector<std::string>{"Tanh"}
      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"},
      cell == Cell::Rnn);
  if (!acts.error.empty()) ctx.error(acts.error);
  const double clip_attr = ctx.f("clip");
  if (!(clip_attr > 0)) ctx.error("clip must be positive, got ", clip_attr);
  const bool do_clip = std::isfinite(clip_attr);
  const C clip = C(clip_attr);
  auto clipped = [&](C v) { return do_clip ? std::min(std::max(v, -clip), clip) : v; };
  const bool lbr = cell == Cell::Gru && ctx.i("linear_before_reset") != 0;
  const bool input_forget = cell == Cell::Lstm && ctx.i("input_forget") != 0;

  const std::vector<C> W = to_compute<T>(&Wt), R = to_compute<T>(&Rt), B = to_compute<T>(Bt);
  const std::vector<C> h0 = to_compute<T>(h0_t), c0 = to_compute<T>(c0_t), P = to_compute<T>(P_t);
  const T* x = X.data<T>();
  T* Y = ctx.num_outputs() > 0 ? ctx.output(0).data<T>() : nullptr;
  T* Yh = ctx.num_outputs() > 1 ? ctx.output(1).data<T>() : nullptr;
  T* Yc = ctx.num_outputs() > 2 ? ctx.output(2).data<T>() : nullptr;

  // Element offsets under either layout.
  auto x_at = [&](int64_t t, int64_t b) { return (batch_major ? b * seq + t : t * batch + b) * in; };
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return (batch_major ? (b * seq + t) * nd + d : (t * nd + d) * batch + b) * H;
  };
  auto state_at = [&](int64_t d, int64_t b) { return (batch_major ? b * nd + d : d * batch + b) * H; };
  auto dot = [](const C* row, const C* v, int64_t n) {
    C s = C(0);
    for (int64_t k = 0; k < n; ++k) s += row[k] * v[k];
    return s;
  };

  auto buf = [](int64_t n) { return std::vector<C>(static_cast<size_t>(n)); };
  std::vector<C> xv = buf(in), h = buf(H), c = buf(H), hn = buf(H), gx = buf(G * H), gh = buf(G * H), rh = buf(H);
  std::vector<C> z = buf(H), r = buf(H);
  for (int64_t d = 0; d < nd; ++d) {
    const bool reverse = *dir == recurrent::Direction::Reverse || d == 1;
    const Activation* act = &acts.acts[size_t(d * (cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3))];
    const C* Wd = W.data() + d * G * H * in;
    const C* Rd = R.data() + d * G * H * H;
    const C* Wb = B.empty() ? nullptr : B.data() + d * 2 * G * H;
    const C* Rb = B.empty() ? nullptr : Wb + G * H;
    const C* Pd = P.empty() ? nullptr : P.data() + d * 3 * H;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens[size_t(b)];
      for (int64_t j = 0; j < H; ++j) {
        h[size_t(j)] = h0.empty() ? C(0) : h0[size_t(state_at(d, b) + j)];
        c[size_t(j)] = c0.empty() ? C(0) : c0[size_t(state_at(d, b) + j)];
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        for (int64_t k = 0; k < in; ++k) xv[size_t(k)] = C(x[x_at(t, b) + k]);
        // gx = W x + Wb and gh = R h + Rb, gate-major; GRU's hidden gate recomputes its R part below when the
        // reset gate applies before the linear transformation.
        for (int64_t g = 0; g < G * H; ++g) {
          gx[size_t(g)] = dot(Wd + g * in, xv.data(), in) + (Wb ? Wb[g] : C(0));
          gh[size_t(g)] = dot(Rd + g * H, h.data(), H) + (Rb ? Rb[g] : C(0));
        }
        if (cell == Cell::Rnn) {
          for (int64_t j = 0; j < H; ++j) hn[size_t(j)] = activate(act[0], clipped(gx[size_t(j)] + gh[size_t(j)]));
        } else if (cell == Cell::Gru) {
          for (int64_t j = 0; j < H; ++j) {
            z[size_t(j)] = activate(act[0], clipped(gx[size_t(j)] + gh[size_t(j)]));
            r[size_t(j)] = activate(act[0], clipped(gx[size_t(H + j)] + gh[size_t(H + j)]));
            rh[size_t(j)] = r[size_t(j)] * h[size_t(j)];
          }
          for (int64_t j = 0; j < H; ++j) {
            const int64_t g = 2 * H + j;
            C pre = lbr ? gx[size_t(g)] + r[size_t(j)] * gh[size_t(g)]
                        : gx[size_t(g)] + dot(Rd + g * H, rh.data(), H) + (Rb ? Rb[g] : C(0));
            C hh = activate(act[1], clipped(pre));
            hn[size_t(j)] = (C(1) - z[size_t(j)]) * hh + z[size_t(j)] * h[size_t(j)];
          }
        } else {
          // Gate order i, o, f, c; peepholes i, o, f.
          for (int64_t j = 0; j < H; ++j) {
            auto pre = [&](int gate) { return gx[size_t(gate * H + j)] + gh[size_t(gate * H + j)]; };
            const C cp = c[size_t(j)];
            C ig = activate(act[0], clipped(pre(0) + (Pd ? Pd[j] * cp : C(0))));
            C fg = input_forget ? C(1) - ig : activate(act[0], clipped(pre(2) + (Pd ? Pd[2 * H + j] * cp : C(0))));
            C cg = activate(act[1], clipped(pre(3)));
            C cn = fg * cp + ig * cg;
            C og = activate(act[0], clipped(pre(1) + (Pd ? Pd[H + j] * cn : C(0))));
            c[size_t(j)] = cn;
            hn[size_t(j)] = og * activate(act[2], cn);
          }
        }
        h = hn;
        if (Y)
          for (int64_t j = 0; j < H; ++j) Y[y_at(t, d, b) + j] = T(h[size_t(j)]);
      }
      // Steps past the sequence's end are zero; so are the final states of an empty sequence.
      if (Y)
        for (int64_t t = len; t < seq; ++t)
          for (int64_t j = 0; j < H; ++j) Y[y_at(t, d, b) + j] = T(C(0));
      for (int64_t j = 0; j < H; ++j) {
        if (Yh) Yh[state_at(d, b) + j] = T(len > 0 ? h[size_t(j)] : C(0));
        if (Yc) Yc[state_at(d, b) + j] = T(len > 0 ? c[size_t(j)] : C(0));
      }
    }
  }
}

void recurrent_kernel(KernelContext& ctx, Cell cell) {
  DType t = ctx.input(0).dtype();
  if (t != DType::f16 && t != DType::f32 && t != DType::f64)
    ctx.error("X has dtype ", dtype_name(t), "; expected f16, f32 or f64");
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (i != 4 && ctx.has_input(i) && ctx.input(i).dtype() != t)
      ctx.error("input ", i, " has dtype ", dtype_name(ctx.input(i).dtype()), " but X has ", dtype_name(t));
  if (ctx.has_input(4) && ctx.input(4).dtype() != DType::i32) ctx.error("sequence_lens must be i32");
  if (t == DType::f16) run_recurrent<f16_t>(ctx, cell);
  else if (t == DType::f32) run_recurrent<float>(ctx, cell);
  else run_recurrent<double>(ctx, cell);
}

// ---- Resize

// One input position contributing to an output position along one axis.
struct Tap {
  int64_t index;
  double weight;
};

// For every output index of one axis: its taps, or "outside" (tf_crop_and_resize beyond the input).
struct AxisTaps {
  std::vector<Tap> taps;
  std::vector<int64_t> begin;  // out + 1 offsets into taps
  std::vector<char> outside;
};

double cubic_weight(double d, double A) {
  d = std::abs(d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0;
}

struct ResizeParams {
  recurrent::ResizeMode mode;
  recurrent::CoordMode coord;
  recurrent::NearestMode nearest;
  double cubic_a;
  bool exclude_outside;
  bool antialias;
};

// Antialiased linear/cubic taps (Resize-18, the onnx reference's _*_coeffs_antialias): when downsampling, the
// kernel is stretched by 1 / scale, so every input index j within its reach of x weighs kernel(scale * (j - x)),
// normalized to sum 1. The window starts where the reference's does: from x's floor (x - 1 when x is whole).
std::vector<std::pair<int64_t, double>> antialias_taps(double x, double scale, bool cubic, double A) {
  const double s = std::min(scale, 1.0);
  const int64_t i_start = int64_t(std::floor((cubic ? -2.0 : -1.0) / s) + 1), i_end = 2 - i_start;
  const double fl = std::floor(x);
  const int64_t base = fl == x ? int64_t(fl) - 1 : int64_t(fl);
  std::vector<std::pair<int64_t, double>> raw;
  double sum = 0;
  for (int64_t i = i_start; i < i_end; ++i) {
    double d = s * (double(base + i) - x);
    double w = cubic ? cubic_weight(d, A) : std::clamp(1 - std::abs(d), 0.0, 1.0);
    raw.push_back({base + i, w});
    sum += w;
  }
  for (auto& [j, w] : raw) w /= sum;
  return raw;
}

AxisTaps axis_taps(const recurrent::ResizeAxis& a, const ResizeParams& p, double roi_start, double roi_end) {
  using recurrent::CoordMode;
  AxisTaps r;
  r.begin.push_back(0);
  const double in = double(a.in);
  for (int64_t o = 0; o < a.out; ++o) {
    const double y = double(o);
    // As in ONNX's reference, the transforms use the unfloored output length in * scale (given scales).
    double x = 0;
    switch (p.coord) {
      case CoordMode::HalfPixel: x = (y + 0.5) / a.scale - 0.5; break;
      case CoordMode::PytorchHalfPixel: x = a.length_resized > 1 ? (y + 0.5) / a.scale - 0.5 : 0.0; break;
      case CoordMode::AlignCorners: x = a.length_resized > 1 ? y * (in - 1) / (a.length_resized - 1) : 0.0; break;
      case CoordMode::Asymmetric: x = y / a.scale; break;
      case CoordMode::TfHalfPixelForNN: x = (y + 0.5) / a.scale; break;
      case CoordMode::HalfPixelSymmetric: {  // half_pixel about the centre, when flooring shortened the output
        const double offset = in / 2 * (1 - double(a.out) / a.length_resized);
        x = offset + (y + 0.5) / a.scale - 0.5;
        break;
      }
      case CoordMode::TfCropAndResize:
        x = a.length_resized > 1
                ? roi_start * (in - 1) + y * (roi_end - roi_start) * (in - 1) / (a.length_resized - 1)
                : 0.5 * (roi_start + roi_end) * (in - 1);
        break;
    }
    const bool out_of_range = p.coord == CoordMode::TfCropAndResize && (x < 0 || x > in - 1);
    r.outside.push_back(out_of_range ? 1 : 0);
    auto clamp = [&](int64_t i) { return std::min(std::max(i, int64_t(0)), a.in - 1); };
    std::vector<Tap> taps;
    if (!out_of_range) {
      const double fl = std::floor(x);
      const double frac = x - fl;
      const int64_t i0 = int64_t(fl);
      if (p.mode == recurrent::ResizeMode::Nearest) {
        using recurrent::NearestMode;
        bool up = false;  // take i0 + 1 instead of i0
        if (frac != 0) {
          switch (p.nearest) {
            case NearestMode::RoundPreferFloor: up = frac > 0.5; break;
            case NearestMode::RoundPreferCeil: up = frac >= 0.5; break;
            case NearestMode::Floor: up = false; break;
            case NearestMode::Ceil: up = true; break;
            case NearestMode::Simple: up = a.scale < 1; break;
          }
        }
        taps.push_back({clamp(i0 + (up ? 1 : 0)), 1.0});
      } else {
        std::vector<std::pair<int64_t, double>> raw;  // unclamped index, weight
        if (p.antialias) {
          raw = antialias_taps(x, a.scale, p.mode == recurrent::ResizeMode::Cubic, p.cubic_a);
        } else if (p.mode == recurrent::ResizeMode::Linear) {
          raw = {{i0, 1 - frac}, {i0 + 1, frac}};
        } else {
          for (int64_t k = -1; k <= 2; ++k) raw.push_back({i0 + k, cubic_weight(x - double(i0 + k), p.cubic_a)});
        }
        if (p.exclude_outside) {
          double sum = 0;
          for (auto& [i, w] : raw) {
            if (i < 0 || i >= a.in) w = 0;
            sum += w;
          }
          if (sum != 0)
            for (auto& [i, w] : raw) w /= sum;
        }
        // Zero weights are dropped, so an exact sample is not polluted by a neighbour's inf or NaN.
        for (auto& [i, w] : raw)
          if (w != 0) taps.push_back({clamp(i), w});
      }
    }
    r.taps.insert(r.taps.end(), taps.begin(), taps.end());
    r.begin.push_back(int64_t(r.taps.size()));
  }
  return r;
}

// Rounds and saturates an interpolated value into T (floats just convert).
template <class T>
T from_double(double v) {
  if constexpr (is_float_v<T>) {
    return T(compute_t<T>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return std::round(v) != 0;
  } else {
    if (std::isnan(v)) return T(0);
    double r = std::round(v);
    if (r <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (r >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(r);
  }
}

template <class T>
void resize_typed(const Tensor& X, Tensor& Y, const std::vector<AxisTaps>& axes, bool nearest, double extrapolation) {
  const T* x = X.data<T>();
  T* y = Y.data<T>();
  const size_t n = axes.size();
  const std::vector<int64_t> in_strides = ref::strides_of(X.shape());
  const T extra = from_double<T>(extrapolation);
  ref::MultiIndex it(Y.shape(), {});
  std::vector<int64_t> k(n), end(n);
  for (int64_t e = 0; e < Y.numel(); ++e, it.next()) {
    const std::vector<int64_t>& o = it.index();
    bool outside = false;
    for (size_t a = 0; a < n; ++a) outside |= axes[a].outside[size_t(o[a])] != 0;
    if (outside) {
      y[e] = extra;
      continue;
    }
    if (nearest) {
      int64_t off = 0;
      for (size_t a = 0; a < n; ++a) off += axes[a].taps[size_t(axes[a].begin[size_t(o[a])])].index * in_strides[a];
      y[e] = x[off];
      continue;
    }
    // Sum over the product of every axis's taps (an odometer over k).
    bool empty = false;
    for (size_t a = 0; a < n; ++a) {
      k[a] = axes[a].begin[size_t(o[a])];
      end[a] = axes[a].begin[size_t(o[a]) + 1];
      empty |= k[a] == end[a];
    }
    double acc = -0.0;  // -0 + v == v for every v, so a lone -0 sample stays -0
    while (!empty) {
      int64_t off = 0;
      double w = 1;
      for (size_t a = 0; a < n; ++a) {
        const Tap& tp = axes[a].taps[size_t(k[a])];
        off += tp.index * in_strides[a];
        w *= tp.weight;
      }
      acc += w * double(compute_t<T>(x[off]));
      size_t a = n;
      while (a > 0) {
        --a;
        if (++k[a] < end[a]) break;
        k[a] = axes[a].begin[size_t(o[a])];
        if (a == 0) empty = true;  // wrapped around: done
      }
      if (n == 0) break;
    }
    y[e] = from_double<T>(acc);
  }
}

}  // namespace

CUVIL_REF_KERNEL(RNN) { recurrent_kernel(ctx, Cell::Rnn); }
CUVIL_REF_KERNEL(GRU) { recurrent_kernel(ctx, Cell::Gru); }
CUVIL_REF_KERNEL(LSTM) { recurrent_kernel(ctx, Cell::Lstm); }

CUVIL_REF_KERNEL(Resize) {
  const Tensor& X = ctx.input(0);
  auto opt = [&](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  const Tensor* roi = opt(1);
  ResizeParams p{};
  auto mode = recurrent::parse_resize_mode(ctx.s("mode"));
  auto coord = recurrent::parse_coord_mode(ctx.s("coordinate_transformation_mode"));
  auto nearest = recurrent::parse_nearest_mode(ctx.s("nearest_mode"));
  if (!mode || !coord || !nearest) ctx.error("bad mode, coordinate_transformation_mode or nearest_mode");
  p.mode = *mode;
  p.coord = *coord;
  p.nearest = *nearest;
  p.cubic_a = ctx.f("cubic_coeff_a");
  p.exclude_outside = ctx.i("exclude_outside") != 0;
  p.antialias = ctx.i("antialias") != 0;
  if (p.antialias && p.mode == recurrent::ResizeMode::Nearest) ctx.error("antialias is not defined for nearest");
  auto r = recurrent::resize_axes(X.shape(), opt(2), opt(3), ctx.i("scales_with_sizes") != 0);
  if (!r.error.empty()) ctx.error(r.error);
  Tensor& Y = ctx.output(0);
  const size_t rank = X.rank();
  for (size_t a = 0; a < rank; ++a)
    if (Y.rank() != rank || Y.dim(a) != r.axes[a].out)
      ctx.internal_error("output is ", Y.type_str(), " but the scales/sizes give another shape");
  if (Y.numel() == 0) return;
  const bool crop = p.coord == recurrent::CoordMode::TfCropAndResize;
  if (crop && (!roi || roi->numel() != int64_t(2 * rank)))
    ctx.error("tf_crop_and_resize needs roi with ", 2 * rank, " values");
  std::vector<AxisTaps> axes;
  for (size_t a = 0; a < rank; ++a) {
    double start = crop ? roi->get_f64(int64_t(a)) : 0, end = crop ? roi->get_f64(int64_t(rank + a)) : 1;
    axes.push_back(axis_taps(r.axes[a], p, start, end));
  }
  const bool nn = p.mode == recurrent::ResizeMode::Nearest;
  const double extra = ctx.f("extrapolation_value");
  visit_dtype(X.dtype(), [&]<class T>() { resize_typed<T>(X, Y, axes, nn, extra); });
}

}  // namespace cuvil
