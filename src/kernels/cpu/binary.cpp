// Binary element-wise f32 kernels (Add, Sub, Mul, Div) with numpy broadcasting, and Pow by a constant 2 or 0.5.
//
// Broadcasting is decided at prepare time: dims of size 1 in the output are dropped, and neighbouring dims that
// both inputs treat alike (both present, or both broadcast, in each input) are merged. What is left is a short
// loop nest whose innermost dim is contiguous in the output and, for each input, either contiguous or a
// repeated scalar — so [B,S,768] + [768], [N,C,H,W] * [1,C,1,1], x + scalar and same-shape operands all become
// one vectorizable row loop. The output may be one of the inputs (in place): element i of that input is read
// before element i of the output is written.
#include <array>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

constexpr size_t kMaxRank = 8;

struct AddOp { static float f(float a, float b) { return a + b; } };
struct SubOp { static float f(float a, float b) { return a - b; } };
struct MulOp { static float f(float a, float b) { return a * b; } };
struct DivOp { static float f(float a, float b) { return a / b; } };

// One output row of n elements; va/vb: whether each input runs along the row (else one element repeats).
template <class Op>
void row(const float* a, const float* b, float* y, int64_t n, bool va, bool vb) {
  if (va && vb) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(a[i], b[i]);
  } else if (va) {
    float s = b[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(a[i], s);
  } else if (vb) {
    float s = a[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = Op::f(s, b[i]);
  } else {
    float v = Op::f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

using RowFn = void (*)(const float*, const float*, float*, int64_t, bool, bool);

// The merged loop nest: dims (outermost first) with each input's element strides; the last dim is the row.
struct Plan {
  size_t rank = 0;
  std::array<int64_t, kMaxRank> dims{}, sa{}, sb{};
  int64_t numel = 0;
};

// Right-aligns the input shapes to the output's and merges dims; false when they do not broadcast or the
// merged nest is deeper than kMaxRank.
bool make_plan(const std::vector<int64_t>& a, const std::vector<int64_t>& b, Plan& plan) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> ad(r, 1), bd(r, 1), od(r);
  std::copy(a.begin(), a.end(), ad.begin() + ptrdiff_t(r - a.size()));
  std::copy(b.begin(), b.end(), bd.begin() + ptrdiff_t(r - b.size()));
  for (size_t d = 0; d < r; ++d) {
    if (ad[d] != bd[d] && ad[d] != 1 && bd[d] != 1) return false;
    od[d] = ad[d] == 1 ? bd[d] : ad[d];
  }
  plan.numel = shape_numel(od);
  // Merge from the innermost dim outwards; a dim's "kind" per input is whether it is broadcast there.
  std::vector<int64_t> dims, ka, kb;  // innermost first
  for (size_t d = r; d-- > 0;) {
    if (od[d] == 1) continue;
    int64_t pa = ad[d] == 1 ? 0 : 1, pb = bd[d] == 1 ? 0 : 1;
    if (!dims.empty() && ka.back() == pa && kb.back() == pb) {
      dims.back() *= od[d];
    } else {
      dims.push_back(od[d]);
      ka.push_back(pa);
      kb.push_back(pb);
    }
  }
  if (dims.empty()) dims = {1}, ka = {1}, kb = {1};
  if (dims.size() > kMaxRank) return false;
  plan.rank = dims.size();
  int64_t stride_a = 1, stride_b = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = plan.rank - 1 - k;
    plan.dims[d] = dims[k];
    plan.sa[d] = ka[k] ? stride_a : 0;
    plan.sb[d] = kb[k] ? stride_b : 0;
    if (ka[k]) stride_a *= dims[k];
    if (kb[k]) stride_b *= dims[k];
  }
  return true;
}

// Runs output elements [begin, end): starts mid-row if it must, then whole rows, walking the outer dims as an
// odometer.
void run_range(const Plan& p, RowFn fn, const float* a, const float* b, float* y, int64_t begin, int64_t end) {
  size_t r = p.rank;
  int64_t inner = p.dims[r - 1];
  bool va = p.sa[r - 1] != 0, vb = p.sb[r - 1] != 0;
  std::array<int64_t, kMaxRank> idx{};
  int64_t row_index = begin / inner, col = begin % inner;
  int64_t oa = 0, ob = 0;
  for (size_t d = r - 1; d-- > 0;) {
    idx[d] = row_index % p.dims[d];
    row_index /= p.dims[d];
    oa += idx[d] * p.sa[d];
    ob += idx[d] * p.sb[d];
  }
  int64_t at = begin;
  while (at < end) {
    int64_t len = std::min(inner - col, end - at);
    fn(a + oa + col * p.sa[r - 1], b + ob + col * p.sb[r - 1], y + at, len, va, vb);
    at += len;
    col = 0;
    for (size_t d = r - 1; d-- > 0;) {
      oa += p.sa[d];
      ob += p.sb[d];
      if (++idx[d] < p.dims[d]) break;
      oa -= p.sa[d] * p.dims[d];
      ob -= p.sb[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

CUVIL_CPU_CLONES void row_add(const float* a, const float* b, float* y, int64_t n, bool va, bool vb) {
  row<AddOp>(a, b, y, n, va, vb);
}
CUVIL_CPU_CLONES void row_sub(const float* a, const float* b, float* y, int64_t n, bool va, bool vb) {
  row<SubOp>(a, b, y, n, va, vb);
}
CUVIL_CPU_CLONES void row_mul(const float* a, const float* b, float* y, int64_t n, bool va, bool vb) {
  row<MulOp>(a, b, y, n, va, vb);
}
CUVIL_CPU_CLONES void row_div(const float* a, const float* b, float* y, int64_t n, bool va, bool vb) {
  row<DivOp>(a, b, y, n, va, vb);
}

// Pow(x, 2) = x * x: the reference's double pow of a float squared is exact, and so rounds to the same float.
CUVIL_CPU_CLONES void pow_square(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
}

// Pow(x, 0.5) = sqrt(x) (correctly rounded in float and in double alike) except where pow differs: pow(-0, 0.5)
// is +0 (adding +0 turns -0 into +0 and changes nothing else) and pow(-inf, 0.5) is +inf.
void pow_sqrt(const float* x, float* y, int64_t n) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] == -inf ? inf : std::sqrt(x[i]) + 0.0f;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_binary(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() != 2 || !inputs[0].present || !inputs[1].present) return nullptr;
  if (inputs[0].dtype != DType::f32 || inputs[1].dtype != DType::f32) return nullptr;
  RowFn fn = nullptr;
  switch (n.op()) {
    case OpKind::Add: fn = row_add; break;
    case OpKind::Sub: fn = row_sub; break;
    case OpKind::Mul: fn = row_mul; break;
    case OpKind::Div: fn = row_div; break;
    default: return nullptr;
  }
  Plan plan;
  if (!make_plan(inputs[0].shape, inputs[1].shape, plan)) return nullptr;
  return make_kernel(
      [plan, fn](KernelContext& ctx) {
        const float* a = ctx.input(0).data<float>();
        const float* b = ctx.input(1).data<float>();
        Tensor& out = ctx.output(0);
        if (out.numel() != plan.numel) ctx.internal_error("output ", out.type_str(), " does not match the plan");
        float* y = out.data<float>();
        parallel_ranges(plan.numel, 1, 16, [&](int64_t b0, int64_t e0) { run_range(plan, fn, a, b, y, b0, e0); });
      },
      std::string("binary:") + std::string(op_name(n.op())));
}

std::unique_ptr<PreparedKernel> prepare_pow(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() != 2 || !inputs[0].present || !inputs[1].present || !inputs[1].value) return nullptr;
  if (inputs[0].dtype != DType::f32) return nullptr;
  const Tensor& e = *inputs[1].value;
  // A scalar exponent that does not raise the output's rank.
  if (e.numel() != 1 || e.rank() > inputs[0].shape.size() || e.dtype() == DType::boolean) return nullptr;
  double p = e.get_f64(0);
  void (*fn)(const float*, float*, int64_t) = p == 2.0 ? pow_square : p == 0.5 ? pow_sqrt : nullptr;
  if (!fn) return nullptr;
  return make_kernel(
      [fn](KernelContext& ctx) {
        const Tensor& x = ctx.input(0);
        const float* xp = x.data<float>();
        float* yp = ctx.output(0).data<float>();
        parallel_ranges(x.numel(), 1, 16, [&](int64_t b, int64_t e) { fn(xp + b, yp + b, e - b); });
      },
      p == 2.0 ? "pow:square" : "pow:sqrt");
}

}  // namespace cuvil::cpu
