// LayerNormalization (opset 17) over f32 rows: X seen as [rows, cols] with cols the product of dims [axis, rank).
// Per row, two passes with double accumulators — mean, then the mean square of (x - mean) — as the reference
// does (no E[x^2] - mean^2 cancellation); then y = (x - mean) * inv_std * scale + bias in float.
//
// Scale and B must broadcast only within the normalized dims (the usual [cols] or [..., cols] shapes): they are
// expanded once to dense [cols] vectors (at prepare time when constant). Nodes that ask for the Mean or
// InvStdDev outputs go to the reference kernel.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

CUVIL_CPU_CLONES void normalize_row(const float* x, float* y, int64_t n, double eps, const float* scale,
                                    const float* bias) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += double(x[j]);
  float mean = float(sum / double(n));
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < n; ++j) {
    float d = x[j] - mean;
    sq += double(d) * double(d);
  }
  float inv = float(1.0 / std::sqrt(sq / double(n) + eps));
  if (bias) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * inv * scale[j];
  }
}

// Whether a parameter of shape p broadcasts to X's shape through the normalized dims alone, i.e. right-aligned,
// each of its dims outside [axis, rank) is 1 and each inside is 1 or X's.
bool within_normalized_dims(const std::vector<int64_t>& p, const std::vector<int64_t>& x, size_t axis) {
  if (p.size() > x.size()) return false;
  size_t off = x.size() - p.size();
  for (size_t d = 0; d < p.size(); ++d) {
    int64_t pd = p[d], xd = x[off + d];
    if (off + d < axis ? pd != 1 : (pd != 1 && pd != xd)) return false;
  }
  return true;
}

// The parameter tensor t broadcast to the normalized dims `dims`, as a dense vector.
std::vector<float> expand(const Tensor& t, const std::vector<int64_t>& dims) {
  size_t r = dims.size();
  std::vector<int64_t> shape(r, 1);
  // Drop t's leading dims that lie outside the normalized dims (all 1), right-align the rest.
  for (size_t d = 0; d < std::min(r, t.rank()); ++d) shape[r - 1 - d] = t.dim(t.rank() - 1 - d);
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (size_t d = r; d-- > 0;) {
    st[d] = shape[d] == 1 ? 0 : s;
    s *= shape[d];
  }
  std::vector<float> out(size_t(shape_numel(dims)));
  const float* src = t.data<float>();
  std::vector<int64_t> idx(r, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += idx[d] * st[d];
    out[i] = src[off];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_layer_norm(const Node& n, const std::vector<PrepareInput>& inputs) {
  for (size_t k = 1; k < n.num_outputs(); ++k)
    if (n.output(k)) return nullptr;  // Mean / InvStdDev requested
  if (inputs.size() < 2 || !inputs[0].present || !inputs[1].present) return nullptr;
  bool has_bias = inputs.size() > 2 && inputs[2].present;
  for (size_t i = 0; i < (has_bias ? 3u : 2u); ++i)
    if (inputs[i].dtype != DType::f32) return nullptr;
  const std::vector<int64_t>& xs = inputs[0].shape;
  int64_t rank = int64_t(xs.size());
  AttrReader attrs(n);
  int64_t axis = attrs.i("axis");
  if (rank == 0 || axis < -rank || axis >= rank) return nullptr;
  if (axis < 0) axis += rank;
  std::vector<int64_t> norm_dims(xs.begin() + axis, xs.end());
  int64_t cols = shape_numel(norm_dims), rows = shape_numel(xs) / std::max<int64_t>(cols, 1);
  if (cols == 0 || rows == 0) return nullptr;
  if (!within_normalized_dims(inputs[1].shape, xs, size_t(axis))) return nullptr;
  if (has_bias && !within_normalized_dims(inputs[2].shape, xs, size_t(axis))) return nullptr;
  double eps = attrs.f("epsilon");
  // Constant parameters are expanded now; others at each run.
  std::vector<float> scale, bias;
  if (inputs[1].value) scale = expand(*inputs[1].value, norm_dims);
  if (has_bias && inputs[2].value) bias = expand(*inputs[2].value, norm_dims);
  bool scale_const = inputs[1].value != nullptr, bias_const = has_bias && inputs[2].value;
  return make_kernel(
      [=](KernelContext& ctx) {
        std::vector<float> run_scale, run_bias;
        const float* sp = scale.data();
        const float* bp = has_bias ? bias.data() : nullptr;
        if (!scale_const) sp = (run_scale = expand(ctx.input(1), norm_dims)).data();
        if (has_bias && !bias_const) bp = (run_bias = expand(ctx.input(2), norm_dims)).data();
        const float* x = ctx.input(0).data<float>();
        float* y = ctx.output(0).data<float>();
        parallel_ranges(rows, cols * 3, 1, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) normalize_row(x + r * cols, y + r * cols, cols, eps, sp, bp);
        });
      },
      "layernorm");
}

}  // namespace cuvil::cpu
