// Softmax and LogSoftmax over one axis of an f32 tensor, in the exact max-subtract form of the reference:
// m = max(x), e = exp(x - m), y = e / sum(e) (or (x - m) - log(sum(e))). The sum is accumulated in double, so
// long rows lose nothing to it; the rest is float with exp_f (<= 1 ulp). NaN anywhere in a group, or an inf that
// makes x - m NaN, gives NaN for the whole group, as in the reference.
//
// Innermost axis: one row at a time, each pass a contiguous vectorized loop. Any other axis ([outer, n, inner]
// with inner > 1): the passes run across a block of columns of the inner dim at once, so loads stay contiguous.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vec_math.h"

namespace cuvil::cpu {

namespace {

CUVIL_CPU_CLONES void softmax_row(const float* x, float* y, int64_t n, bool log) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  double sum = 0;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += double(exp_f(x[j] - m));
    float log_sum = float(std::log(sum));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - log_sum;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      float e = exp_f(x[j] - m);
      y[j] = e;
      sum += double(e);
    }
    float inv = float(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }
}

// w columns of one [n, inner] slab; m and sum are scratch of w elements.
CUVIL_CPU_CLONES void softmax_columns(const float* x, float* y, int64_t n, int64_t inner, int64_t w, bool log,
                                      float* m, double* sum) {
  for (int64_t c = 0; c < w; ++c) m[c] = -std::numeric_limits<float>::infinity(), sum[c] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float* xr = x + j * inner;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) m[c] = xr[c] > m[c] ? xr[c] : m[c];
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* xr = x + j * inner;
    float* yr = y + j * inner;
    if (log) {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) sum[c] += double(exp_f(xr[c] - m[c]));
    } else {
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) {
        float e = exp_f(xr[c] - m[c]);
        yr[c] = e;
        sum[c] += double(e);
      }
    }
  }
  if (log) {
    for (int64_t c = 0; c < w; ++c) sum[c] = std::log(sum[c]);
    for (int64_t j = 0; j < n; ++j) {
      const float* xr = x + j * inner;
      float* yr = y + j * inner;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) yr[c] = (xr[c] - m[c]) - float(sum[c]);
    }
  } else {
    float* inv = m;  // the maxima are no longer needed
    for (int64_t c = 0; c < w; ++c) inv[c] = float(1.0 / sum[c]);
    for (int64_t j = 0; j < n; ++j) {
      float* yr = y + j * inner;
#pragma omp simd
      for (int64_t c = 0; c < w; ++c) yr[c] *= inv[c];
    }
  }
}

constexpr int64_t kColumnBlock = 256;

}  // namespace

std::unique_ptr<PreparedKernel> prepare_softmax(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() != 1 || !inputs[0].present || inputs[0].dtype != DType::f32) return nullptr;
  const std::vector<int64_t>& shape = inputs[0].shape;
  int64_t rank = int64_t(shape.size());
  int64_t axis = AttrReader(n).i("axis");
  if (rank == 0 || axis < -rank || axis >= rank) return nullptr;
  if (axis < 0) axis += rank;
  int64_t outer = 1, len = shape[size_t(axis)], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[size_t(d)];
  if (outer * len * inner == 0) return nullptr;
  bool log = n.op() == OpKind::LogSoftmax;
  std::string name = log ? "logsoftmax" : "softmax";
  if (inner == 1) {
    return make_kernel(
        [outer, len, log](KernelContext& ctx) {
          const float* x = ctx.input(0).data<float>();
          float* y = ctx.output(0).data<float>();
          parallel_ranges(outer, len * 4, 1, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) softmax_row(x + r * len, y + r * len, len, log);
          });
        },
        name + ":rows");
  }
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  return make_kernel(
      [outer, len, inner, blocks, log](KernelContext& ctx) {
        const float* x = ctx.input(0).data<float>();
        float* y = ctx.output(0).data<float>();
        int64_t width = std::min(inner, kColumnBlock);
        parallel_ranges(outer * blocks, len * width * 4, 1, [&](int64_t t0, int64_t t1) {
          std::vector<float> m(static_cast<size_t>(width));
          std::vector<double> sum(static_cast<size_t>(width));
          for (int64_t t = t0; t < t1; ++t) {
            int64_t o = t / blocks, c0 = (t % blocks) * kColumnBlock;
            int64_t w = std::min(kColumnBlock, inner - c0);
            int64_t base = o * len * inner + c0;
            softmax_columns(x + base, y + base, len, inner, w, log, m.data(), sum.data());
          }
        });
      },
      name + ":columns");
}

}  // namespace cuvil::cpu
