// Reference kernels of the reduction family (semantics and IR forms: src/ir/ops/reduction.cpp).
//
// Floats accumulate in double; integer sums and products accumulate in uint64_t, which wraps like the integer
// type itself would (without signed-overflow undefined behaviour) and is truncated back at the end.
#include <algorithm>
#include <numeric>
#include <optional>

#include "kernels/ref/reduction_util.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

using ref::AxisSplit;
using ref::from_f64;
using ref::is_nan;
using ref::to_f64;

// ---- Reduce*

// The accumulator of sums and products: double for floats, wrapping uint64_t for integers.
template <class T>
using sum_t = std::conditional_t<is_float_v<T>, double, uint64_t>;

template <class T>
sum_t<T> to_sum(T v) {
  if constexpr (is_float_v<T>) return to_f64(v);
  else return uint64_t(v);  // modular: keeps the low bits of negative values
}

template <class T>
T from_sum(sum_t<T> a) {
  if constexpr (is_float_v<T>) return from_f64<T>(a);
  else return T(a);  // modular (C++20)
}

template <class T>
struct SumOp {
  using Acc = sum_t<T>;
  Acc init() const { return Acc(0); }
  void add(Acc& a, T v) const { a += to_sum(v); }
  T finish(Acc a, int64_t) const { return from_sum<T>(a); }
};

template <class T>
struct MeanOp : SumOp<T> {
  T finish(sum_t<T> a, int64_t count) const {
    if constexpr (is_float_v<T>) {
      return from_f64<T>(a / double(count));  // 0/0 = NaN for an empty reduction, like numpy
    } else {
      T s = T(a);
      if (count == 0) return T(0);
      if constexpr (std::is_signed_v<T>) return T(int64_t(s) / count);
      else return T(uint64_t(s) / uint64_t(count));
    }
  }
};

template <class T>
struct ProdOp {
  using Acc = sum_t<T>;
  Acc init() const { return Acc(1); }
  void add(Acc& a, T v) const { a *= to_sum(v); }
  T finish(Acc a, int64_t) const { return from_sum<T>(a); }
};

template <class T>
struct SumSquareOp : SumOp<T> {
  void add(sum_t<T>& a, T v) const { a += to_sum(v) * to_sum(v); }
};

template <class T>
struct L1Op : SumOp<T> {
  void add(sum_t<T>& a, T v) const {
    if constexpr (is_float_v<T>) a += std::fabs(to_f64(v));
    else if constexpr (std::is_signed_v<T>) a += v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    else a += uint64_t(v);
  }
};

template <class T>
struct L2Op {
  using Acc = double;
  Acc init() const { return 0; }
  void add(Acc& a, T v) const { a += to_f64(v) * to_f64(v); }
  T finish(Acc a, int64_t) const { return from_f64<T>(std::sqrt(a)); }
};

template <class T>
struct LogSumOp {
  using Acc = double;
  Acc init() const { return 0; }
  void add(Acc& a, T v) const { a += to_f64(v); }
  T finish(Acc a, int64_t) const { return from_f64<T>(std::log(a)); }
};

// Max/Min compare in the type itself (exact for 64-bit integers); NaN wins, like numpy. An empty reduction gives
// -inf/+inf for floats and the type's lowest/highest value for integers (ONNX opset 18).
template <class T, bool kMax>
struct ExtremeOp {
  using Acc = compute_t<T>;
  Acc init() const {
    if constexpr (is_float_v<T>)
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    else return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  void add(Acc& a, T v) const {
    Acc x = Acc(v);
    if (is_nan(x) || (kMax ? x > a : x < a)) a = is_nan(a) ? a : x;
  }
  T finish(Acc a, int64_t) const { return T(a); }
};

// The mask over `rank` dims that marks `axes` (negative ones count from the back; one given twice is an error).
// Empty axes mark every dim where `empty_means_all`, none otherwise.
std::vector<bool> axes_mask(const KernelContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                            bool empty_means_all) {
  std::vector<bool> mask(size_t(rank), axes.empty() && empty_means_all);
  for (int64_t a : axes) {
    int64_t n = ref::normalize_axis(ctx, a, rank);
    if (mask[size_t(n)]) ctx.error("axis ", a, " is given more than once in axes");
    mask[size_t(n)] = true;
  }
  return mask;
}

// Which axes a Reduce* node reduces (mask over x's dims); nullopt when it reduces nothing (empty axes with
// noop_with_empty_axes), after copying x to y.
std::optional<std::vector<bool>> reduce_mask(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    if (a.dtype() != DType::i64 || a.rank() != 1) ctx.error("axes must be a 1-D int64 tensor, got ", a.type_str());
    axes = a.to_i64_vector();
  }
  if (axes.empty() && ctx.i("noop_with_empty_axes") != 0) {
    if (x.nbytes()) std::memcpy(ctx.output(0).raw(), x.raw(), x.nbytes());
    return std::nullopt;
  }
  return axes_mask(ctx, axes, int64_t(x.rank()), /*empty_means_all=*/true);
}

// Runs one accumulator per output element over every input element: op.add(acc[group(i)], x[i]).
template <class T, class Op>
void reduce_with(KernelContext& ctx, const Op& op) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::optional<std::vector<bool>> mask = reduce_mask(ctx);
  if (!mask) return;
  int64_t count = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    if ((*mask)[d]) count *= x.dim(d);
  std::vector<typename Op::Acc> acc(size_t(y.numel()), op.init());
  const T* xp = x.data<T>();
  ref::MultiIndex it(x.shape(), {ref::group_strides(x.shape(), *mask)});
  for (int64_t i = 0; i < x.numel(); ++i, it.next()) op.add(acc[size_t(it.offset(0))], xp[i]);
  T* yp = y.data<T>();
  for (int64_t o = 0; o < y.numel(); ++o) yp[o] = op.finish(acc[size_t(o)], count);
}

template <template <class> class Op>
void reduce_kernel(KernelContext& ctx) {
  ref::visit_number_dtype(ctx, ctx.input(0).dtype(), [&]<class T>() { reduce_with<T>(ctx, Op<T>{}); });
}

template <class T>
using MaxOp = ExtremeOp<T, true>;
template <class T>
using MinOp = ExtremeOp<T, false>;

// log(sum(exp(x))) shifted by the group's maximum so that large inputs do not overflow.
template <class T>
void reduce_log_sum_exp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::optional<std::vector<bool>> mask = reduce_mask(ctx);
  if (!mask) return;
  const T* xp = x.data<T>();
  std::vector<int64_t> gs = ref::group_strides(x.shape(), *mask);
  std::vector<double> mx(size_t(y.numel()), -std::numeric_limits<double>::infinity());
  std::vector<double> sum(size_t(y.numel()), 0.0);
  ref::MultiIndex it(x.shape(), {gs});
  for (int64_t i = 0; i < x.numel(); ++i, it.next()) {
    double v = to_f64(xp[i]);
    double& m = mx[size_t(it.offset(0))];
    if (std::isnan(v) || v > m) m = std::isnan(m) ? m : v;
  }
  ref::MultiIndex it2(x.shape(), {gs});
  for (int64_t i = 0; i < x.numel(); ++i, it2.next()) {
    size_t g = size_t(it2.offset(0));
    sum[g] += std::exp(to_f64(xp[i]) - mx[g]);
  }
  T* yp = y.data<T>();
  for (int64_t o = 0; o < y.numel(); ++o) {
    double m = mx[size_t(o)];
    yp[o] = from_f64<T>(std::isinf(m) ? m : m + std::log(sum[size_t(o)]));
  }
}

// ---- ArgMax / ArgMin

// Whether `a` (at a later index) replaces the current pick `b`. NaN beats every number for both ArgMax and ArgMin
// (numpy's rule); ties keep the first index unless select_last_index.
template <class C>
bool arg_better(C a, C b, bool is_max, bool last) {
  bool an = is_nan(a), bn = is_nan(b);
  if (an || bn) return an && (!bn || last);
  if (a == b) return last;
  return is_max ? a > b : a < b;
}

void arg_kernel(KernelContext& ctx, bool is_max) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ref::normalize_axis(ctx, ctx.i("axis"), int64_t(x.rank()));
  AxisSplit s = ref::split_at(x.shape(), axis);
  if (s.n == 0 && s.outer * s.inner > 0) ctx.error("cannot take the index of an extreme over the empty axis ", axis);
  bool last = ctx.i("select_last_index") != 0;
  int64_t* yp = ctx.output(0).data<int64_t>();
  ref::visit_number_dtype(ctx, x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* xp = x.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* row = xp + o * s.n * s.inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < s.n; ++j)
          if (arg_better(C(row[j * s.inner]), C(row[best * s.inner]), is_max, last)) best = j;
        yp[o * s.inner + i] = best;
      }
    }
  });
}

// ---- Softmax family

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

void softmax_kernel(KernelContext& ctx, SoftmaxKind kind) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t axis = ref::normalize_axis(ctx, ctx.i("axis"), int64_t(x.rank()));
  AxisSplit s = ref::split_at(x.shape(), axis);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t base = o * s.n * s.inner + i;
        auto at = [&](int64_t j) { return base + j * s.inner; };
        if (kind == SoftmaxKind::Hardmax) {
          int64_t best = 0;
          for (int64_t j = 1; j < s.n; ++j)
            if (arg_better(to_f64(xp[at(j)]), to_f64(xp[at(best)]), true, false)) best = j;
          for (int64_t j = 0; j < s.n; ++j) yp[at(j)] = T(j == best ? 1.0f : 0.0f);
          continue;
        }
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.n; ++j) m = std::max(m, to_f64(xp[at(j)]));
        double sum = 0;
        for (int64_t j = 0; j < s.n; ++j) sum += std::exp(to_f64(xp[at(j)]) - m);
        double log_sum = std::log(sum);
        for (int64_t j = 0; j < s.n; ++j) {
          double d = to_f64(xp[at(j)]) - m;
          yp[at(j)] = from_f64<T>(kind == SoftmaxKind::Softmax ? std::exp(d) / sum : d - log_sum);
        }
      }
    }
  });
}

// ---- Losses

// Computes NegativeLogLikelihoodLoss from log-probabilities lp laid out [N, C, D] (D = product of d1..dk),
// writing output 0 of the node. Shared by both loss ops.
template <class T>
void nll_loss(KernelContext& ctx, const std::vector<double>& lp, int64_t n, int64_t c, int64_t d) {
  const Tensor& target = ctx.input(1);
  std::vector<int64_t> t = target.to_i64_vector();
  std::vector<double> w;
  if (ctx.has_input(2)) {
    w = ref::to_f64_vector(ctx.input(2));
    if (int64_t(w.size()) != c) ctx.error("weight has ", w.size(), " elements for ", c, " classes");
  }
  if (int64_t(t.size()) != n * d) ctx.error("target ", target.type_str(), " does not match the input's N and d dims");
  bool has_ignore = ctx.has("ignore_index");
  int64_t ignore = has_ignore ? ctx.i("ignore_index") : 0;
  const std::string& reduction = ctx.s("reduction");
  Tensor& out = ctx.output(0);
  T* op = out.data<T>();
  double loss_sum = 0, weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < d; ++k) {
      int64_t cls = t[size_t(b * d + k)];
      double loss = 0, wt = 0;
      if (!(has_ignore && cls == ignore)) {
        if (cls < 0 || cls >= c)
          ctx.error("target value ", cls, " is out of range [0, ", c, ")", has_ignore ? " and is not ignore_index" : "");
        wt = w.empty() ? 1.0 : w[size_t(cls)];
        loss = -lp[size_t((b * c + cls) * d + k)] * wt;
      }
      if (reduction == "none") op[b * d + k] = from_f64<T>(loss);
      loss_sum += loss;
      weight_sum += wt;
    }
  }
  if (reduction == "sum") op[0] = from_f64<T>(loss_sum);
  else if (reduction == "mean") op[0] = from_f64<T>(loss_sum / weight_sum);  // all ignored: 0/0 = NaN, as ONNX
  else if (reduction != "none") ctx.error("reduction must be 'none', 'sum' or 'mean', got '", reduction, "'");
}

void loss_kernel(KernelContext& ctx, bool softmax_first) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.error("input must have rank >= 2, got ", x.type_str());
  AxisSplit s = ref::split_at(x.shape(), 1);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    std::vector<double> lp(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) lp[size_t(i)] = to_f64(xp[i]);
    if (softmax_first) {
      // log_softmax over the class axis
      for (int64_t b = 0; b < s.outer; ++b) {
        for (int64_t k = 0; k < s.inner; ++k) {
          auto at = [&](int64_t j) { return size_t((b * s.n + j) * s.inner + k); };
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < s.n; ++j) m = std::max(m, lp[at(j)]);
          double sum = 0;
          for (int64_t j = 0; j < s.n; ++j) sum += std::exp(lp[at(j)] - m);
          double log_sum = std::log(sum);
          for (int64_t j = 0; j < s.n; ++j) lp[at(j)] = lp[at(j)] - m - log_sum;
        }
      }
      if (ctx.num_outputs() > 1) {
        T* pp = ctx.output(1).data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) pp[i] = from_f64<T>(lp[size_t(i)]);
      }
    }
    nll_loss<T>(ctx, lp, s.outer, s.n, s.inner);
  });
}

// ---- Normalizations

// Mean and population variance of n values at p[0], p[stride], ...
template <class T>
std::pair<double, double> moments(const T* p, int64_t n, int64_t stride) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += to_f64(p[j * stride]);
  double mean = sum / double(n);
  double sq = 0;
  for (int64_t j = 0; j < n; ++j) {
    double d = to_f64(p[j * stride]) - mean;
    sq += d * d;
  }
  return {mean, sq / double(n)};
}

// Checks that a [C] parameter tensor has c elements.
std::vector<double> channel_param(const KernelContext& ctx, size_t i, int64_t c, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != c) ctx.error(what, " has ", t.numel(), " elements for ", c, " channels");
  return ref::to_f64_vector(t);
}

}  // namespace

CUVIL_REF_KERNEL(ReduceSum) { reduce_kernel<SumOp>(ctx); }
CUVIL_REF_KERNEL(ReduceMean) { reduce_kernel<MeanOp>(ctx); }
// bool (opset 20): Max is any, Min is all; an empty set gives false and true (the type's lowest and highest).
template <bool kMax>
struct BoolExtremeOp {
  using Acc = uint8_t;  // not bool: the accumulators live in a std::vector
  Acc init() const { return !kMax; }
  void add(Acc& a, bool v) const { a = kMax ? (a || v) : (a && v); }
  bool finish(Acc a, int64_t) const { return a != 0; }
};

CUVIL_REF_KERNEL(ReduceMax) {
  if (ctx.input(0).dtype() == DType::boolean) return reduce_with<bool>(ctx, BoolExtremeOp<true>{});
  reduce_kernel<MaxOp>(ctx);
}
CUVIL_REF_KERNEL(ReduceMin) {
  if (ctx.input(0).dtype() == DType::boolean) return reduce_with<bool>(ctx, BoolExtremeOp<false>{});
  reduce_kernel<MinOp>(ctx);
}
CUVIL_REF_KERNEL(ReduceProd) { reduce_kernel<ProdOp>(ctx); }
CUVIL_REF_KERNEL(ReduceL1) { reduce_kernel<L1Op>(ctx); }
CUVIL_REF_KERNEL(ReduceL2) { reduce_kernel<L2Op>(ctx); }
CUVIL_REF_KERNEL(ReduceLogSum) { reduce_kernel<LogSumOp>(ctx); }
CUVIL_REF_KERNEL(ReduceSumSquare) { reduce_kernel<SumSquareOp>(ctx); }
CUVIL_REF_KERNEL(ReduceLogSumExp) {
  ref::visit_number_dtype(ctx, ctx.input(0).dtype(), [&]<class T>() { reduce_log_sum_exp<T>(ctx); });
}

CUVIL_REF_KERNEL(ArgMax) { arg_kernel(ctx, true); }
CUVIL_REF_KERNEL(ArgMin) { arg_kernel(ctx, false); }

CUVIL_REF_KERNEL(Softmax) { softmax_kernel(ctx, SoftmaxKind::Softmax); }
CUVIL_REF_KERNEL(LogSoftmax) { softmax_kernel(ctx, SoftmaxKind::LogSoftmax); }
CUVIL_REF_KERNEL(Hardmax) { softmax_kernel(ctx, SoftmaxKind::Hardmax); }

namespace {

// CumSum and CumProd: a running sum (product) along the axis, inclusive or exclusive, forward or reversed.
void cumulative_kernel(KernelContext& ctx, bool product) {
  const Tensor& x = ctx.input(0);
  const Tensor& a = ctx.input(1);
  if (a.numel() != 1 || a.rank() > 1 || is_float(a.dtype())) ctx.error("axis must be an integer scalar, got ", a.type_str());
  int64_t axis = ref::normalize_axis(ctx, a.get_i64(0), int64_t(x.rank()));
  bool exclusive = ctx.i("exclusive") != 0, reverse = ctx.i("reverse") != 0;
  AxisSplit s = ref::split_at(x.shape(), axis);
  Tensor& y = ctx.output(0);
  ref::visit_number_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        sum_t<T> acc = product ? 1 : 0;
        for (int64_t step = 0; step < s.n; ++step) {
          int64_t j = reverse ? s.n - 1 - step : step;
          int64_t at = (o * s.n + j) * s.inner + i;
          sum_t<T> v = to_sum(xp[at]);
          if (!exclusive) acc = product ? sum_t<T>(acc * v) : sum_t<T>(acc + v);
          yp[at] = from_sum<T>(acc);
          if (exclusive) acc = product ? sum_t<T>(acc * v) : sum_t<T>(acc + v);
        }
      }
    }
  });
}

}  // namespace

CUVIL_REF_KERNEL(CumSum) { cumulative_kernel(ctx, false); }
CUVIL_REF_KERNEL(CumProd) { cumulative_kernel(ctx, true); }

CUVIL_REF_KERNEL(TopK) {
  const Tensor& x = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  if (kt.numel() != 1 || kt.rank() > 1 || is_float(kt.dtype())) ctx.error("K must hold one integer, got ", kt.type_str());
  int64_t axis = ref::normalize_axis(ctx, ctx.i("axis"), int64_t(x.rank()));
  AxisSplit s = ref::split_at(x.shape(), axis);
  int64_t k = kt.get_i64(0);
  if (k < 0 || k > s.n) ctx.error("K = ", k, " is out of range [0, ", s.n, "] for axis ", axis, " of ", x.type_str());
  bool largest = ctx.i("largest") != 0;  // sorted=0 allows any order; sorted output is one of them
  Tensor& values = ctx.output(0);
  int64_t* ip = ctx.num_outputs() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
  ref::visit_number_dtype(ctx, x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* xp = x.data<T>();
    T* vp = values.data<T>();
    std::vector<int64_t> idx(size_t(s.n));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* row = xp + o * s.n * s.inner + i;
        auto val = [&](int64_t j) { return C(row[j * s.inner]); };
        // NaN ranks above every number; equal values keep index order.
        auto before = [&](int64_t a, int64_t b) {
          C va = val(a), vb = val(b);
          bool an = is_nan(va), bn = is_nan(vb);
          if (an != bn) return largest ? an : bn;
          if (!an && va != vb) return largest ? va > vb : va < vb;
          return a < b;
        };
        std::iota(idx.begin(), idx.end(), int64_t(0));
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = (o * k + j) * s.inner + i;
          vp[at] = row[idx[size_t(j)] * s.inner];
          if (ip) ip[at] = idx[size_t(j)];
        }
      }
    }
  });
}

CUVIL_REF_KERNEL(LayerNormalization) {
  const Tensor& x = ctx.input(0);
  int64_t rank = int64_t(x.rank());
  int64_t axis = ref::normalize_axis(ctx, ctx.i("axis"), rank);
  // rows = product of dims before axis; each row of `cols` elements is normalized on its own
  AxisSplit s = ref::split_axes(x.shape(), size_t(axis), x.rank());
  int64_t rows = s.outer, cols = s.n;
  double eps = ctx.f("epsilon");
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  for (const Tensor* p : {&scale, bias}) {
    if (!p) continue;
    if (p->rank() > x.rank()) ctx.error("Scale/B ", p->type_str(), " does not broadcast to X ", x.type_str());
    for (size_t d = 0; d < p->rank(); ++d) {
      int64_t pd = p->dim(d), xd = x.dim(x.rank() - p->rank() + d);
      if (pd != 1 && pd != xd) ctx.error("Scale/B ", p->type_str(), " does not broadcast to X ", x.type_str());
    }
  }
  std::vector<double> sc = ref::to_f64_vector(scale);
  std::vector<double> bi = bias ? ref::to_f64_vector(*bias) : std::vector<double>{};
  std::vector<int64_t> sc_st = ref::broadcast_strides(scale.shape(), x.shape());
  std::vector<int64_t> bi_st = bias ? ref::broadcast_strides(bias->shape(), x.shape()) : std::vector<int64_t>(x.rank(), 0);
  Tensor& y = ctx.output(0);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    ref::MultiIndex it(x.shape(), {sc_st, bi_st});
    for (int64_t r = 0; r < rows; ++r) {
      auto [mean, var] = moments(xp + r * cols, cols, 1);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < cols; ++j, it.next()) {
        int64_t e = r * cols + j;
        double b = bias ? bi[size_t(it.offset(1))] : 0.0;
        yp[e] = from_f64<T>((to_f64(xp[e]) - mean) * inv * sc[size_t(it.offset(0))] + b);
      }
      if (ctx.num_outputs() > 1) ref::set_f64(ctx, ctx.output(1), r, mean);
      if (ctx.num_outputs() > 2) ref::set_f64(ctx, ctx.output(2), r, inv);
    }
  });
}

CUVIL_REF_KERNEL(InstanceNormalization) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.error("input must have rank >= 2, got ", x.type_str());
  AxisSplit s = ref::split_at(x.shape(), 1);
  std::vector<double> scale = channel_param(ctx, 1, s.n, "scale");
  std::vector<double> bias = channel_param(ctx, 2, s.n, "B");
  double eps = ctx.f("epsilon");
  Tensor& y = ctx.output(0);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < s.outer; ++b) {
      for (int64_t c = 0; c < s.n; ++c) {
        int64_t base = (b * s.n + c) * s.inner;
        auto [mean, var] = moments(xp + base, s.inner, 1);
        double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t j = 0; j < s.inner; ++j)
          yp[base + j] = from_f64<T>((to_f64(xp[base + j]) - mean) * inv * scale[size_t(c)] + bias[size_t(c)]);
      }
    }
  });
}

CUVIL_REF_KERNEL(BatchNormalization) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 1) ctx.error("X must have rank >= 1");
  AxisSplit s = x.rank() > 1 ? ref::split_at(x.shape(), 1) : AxisSplit{x.dim(0), 1, 1};
  int64_t channels = s.n;
  std::vector<double> scale = channel_param(ctx, 1, channels, "scale");
  std::vector<double> bias = channel_param(ctx, 2, channels, "B");
  std::vector<double> mean = channel_param(ctx, 3, channels, "input_mean");
  std::vector<double> var = channel_param(ctx, 4, channels, "input_var");
  double eps = ctx.f("epsilon"), momentum = ctx.f("momentum");
  bool training = ctx.i("training_mode") != 0;
  if (!training && ctx.num_outputs() > 1) ctx.error("running_mean/running_var outputs need training_mode=1");
  Tensor& y = ctx.output(0);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    if (training) {
      // Batch statistics over N and the spatial dims (population variance); Y uses them, the running
      // statistics blend them in.
      int64_t count = s.outer * s.inner;
      for (int64_t c = 0; c < channels; ++c) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < s.outer; ++b)
          for (int64_t j = 0; j < s.inner; ++j) sum += to_f64(xp[(b * channels + c) * s.inner + j]);
        double m = sum / double(count);
        for (int64_t b = 0; b < s.outer; ++b)
          for (int64_t j = 0; j < s.inner; ++j) {
            double d = to_f64(xp[(b * channels + c) * s.inner + j]) - m;
            sq += d * d;
          }
        double v = sq / double(count);
        if (ctx.num_outputs() > 1) ref::set_f64(ctx, ctx.output(1), c, mean[size_t(c)] * momentum + m * (1 - momentum));
        if (ctx.num_outputs() > 2) ref::set_f64(ctx, ctx.output(2), c, var[size_t(c)] * momentum + v * (1 - momentum));
        mean[size_t(c)] = m;
        var[size_t(c)] = v;
      }
    }
    // Element i of Y depends only on element i of X (the statistics are computed above), so X and Y may share
    // a buffer.
    T* yp = y.data<T>();
    for (int64_t b = 0; b < s.outer; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        double inv = 1.0 / std::sqrt(var[size_t(c)] + eps);
        for (int64_t j = 0; j < s.inner; ++j) {
          int64_t e = (b * channels + c) * s.inner + j;
          yp[e] = from_f64<T>((to_f64(xp[e]) - mean[size_t(c)]) * inv * scale[size_t(c)] + bias[size_t(c)]);
        }
      }
    }
  });
}

CUVIL_REF_KERNEL(LRN) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.error("X must have rank >= 2, got ", x.type_str());
  int64_t size = ctx.i("size");
  if (size <= 0) ctx.error("size must be positive, got ", size);
  double alpha = ctx.f("alpha"), beta = ctx.f("beta"), bias = ctx.f("bias");
  AxisSplit s = ref::split_at(x.shape(), 1);
  int64_t before = (size - 1) / 2, after = size - 1 - before;  // floor and ceil of (size - 1) / 2
  Tensor& y = ctx.output(0);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < s.outer; ++b) {
      for (int64_t c = 0; c < s.n; ++c) {
        int64_t lo = std::max<int64_t>(0, c - before), hi = std::min<int64_t>(s.n - 1, c + after);
        for (int64_t j = 0; j < s.inner; ++j) {
          double sq = 0;
          for (int64_t cc = lo; cc <= hi; ++cc) {
            double v = to_f64(xp[(b * s.n + cc) * s.inner + j]);
            sq += v * v;
          }
          int64_t e = (b * s.n + c) * s.inner + j;
          yp[e] = from_f64<T>(to_f64(xp[e]) / std::pow(bias + alpha / double(size) * sq, beta));
        }
      }
    }
  });
}

CUVIL_REF_KERNEL(MeanVarianceNormalization) {
  const Tensor& x = ctx.input(0);
  int64_t rank = int64_t(x.rank());
  std::vector<bool> mask = axes_mask(ctx, ctx.ints("axes"), rank, /*empty_means_all=*/false);
  int64_t groups = 1, count = 1;
  for (int64_t d = 0; d < rank; ++d) (mask[size_t(d)] ? count : groups) *= x.dim(size_t(d));
  std::vector<int64_t> gs = ref::group_strides(x.shape(), mask);
  Tensor& y = ctx.output(0);
  ref::visit_float_dtype(ctx, x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<double> mean(size_t(groups), 0.0), sq(size_t(groups), 0.0);
    ref::MultiIndex it(x.shape(), {gs});
    for (int64_t i = 0; i < x.numel(); ++i, it.next()) mean[size_t(it.offset(0))] += to_f64(xp[i]);
    for (double& m : mean) m /= double(count);
    ref::MultiIndex it2(x.shape(), {gs});
    for (int64_t i = 0; i < x.numel(); ++i, it2.next()) {
      double d = to_f64(xp[i]) - mean[size_t(it2.offset(0))];
      sq[size_t(it2.offset(0))] += d * d;
    }
    ref::MultiIndex it3(x.shape(), {gs});
    for (int64_t i = 0; i < x.numel(); ++i, it3.next()) {
      size_t g = size_t(it3.offset(0));
      // ONNX's function body adds 1e-9 to the standard deviation.
      yp[i] = from_f64<T>((to_f64(xp[i]) - mean[g]) / (std::sqrt(sq[g] / double(count)) + 1e-9));
    }
  });
}

CUVIL_REF_KERNEL(NegativeLogLikelihoodLoss) { loss_kernel(ctx, /*softmax_first=*/false); }
CUVIL_REF_KERNEL(SoftmaxCrossEntropyLoss) { loss_kernel(ctx, /*softmax_first=*/true); }

}  // namespace cuvil
