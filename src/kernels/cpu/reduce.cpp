// ReduceSum / ReduceMean of f32 over one contiguous range of axes given as a constant `axes` input: X seen as
// [outer, n, inner], reduced over n. Accumulates in double like the reference.
//   inner == 1 (trailing axes, e.g. LayerNorm-style mean over the last dim): one contiguous row sum per output.
//   inner > 1: rows of `inner` elements are added into a double accumulator row, which vectorizes across inner.
// Anything else (non-adjacent axes, no axes, empty tensors) goes to the reference kernel.
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

CUVIL_CPU_CLONES void sum_rows(const float* x, float* y, int64_t rows, int64_t n, double divisor) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += double(xr[j]);
    y[r] = float(s / divisor);
  }
}

// Columns [c0, c0 + w) of one [n, inner] slab into y[c0, c0 + w).
CUVIL_CPU_CLONES void sum_columns(const float* x, float* y, int64_t n, int64_t inner, int64_t w, double divisor,
                                  double* acc) {
  for (int64_t c = 0; c < w; ++c) acc[c] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float* xr = x + j * inner;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) acc[c] += double(xr[c]);
  }
  for (int64_t c = 0; c < w; ++c) y[c] = float(acc[c] / divisor);
}

constexpr int64_t kColumnBlock = 512;

}  // namespace

std::unique_ptr<PreparedKernel> prepare_reduce(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() < 2 || !inputs[0].present || inputs[0].dtype != DType::f32) return nullptr;
  if (!inputs[1].present || !inputs[1].value || inputs[1].value->dtype() != DType::i64) return nullptr;
  const std::vector<int64_t>& shape = inputs[0].shape;
  int64_t rank = int64_t(shape.size());
  std::vector<int64_t> axes = inputs[1].value->to_i64_vector();
  if (axes.empty() || rank == 0) return nullptr;
  std::vector<bool> mask(size_t(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return nullptr;
    if (a < 0) a += rank;
    if (mask[size_t(a)]) return nullptr;
    mask[size_t(a)] = true;
  }
  int64_t first = 0;
  while (!mask[size_t(first)]) ++first;
  int64_t last = first;
  while (last < rank && mask[size_t(last)]) ++last;
  for (int64_t d = last; d < rank; ++d)
    if (mask[size_t(d)]) return nullptr;  // not one contiguous range
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < first ? outer : d < last ? len : inner) *= shape[size_t(d)];
  if (outer * len * inner == 0) return nullptr;
  double divisor = n.op() == OpKind::ReduceMean ? double(len) : 1.0;
  std::string name = n.op() == OpKind::ReduceMean ? "reduce_mean" : "reduce_sum";
  if (inner == 1) {
    return make_kernel(
        [outer, len, divisor](KernelContext& ctx) {
          const float* x = ctx.input(0).data<float>();
          float* y = ctx.output(0).data<float>();
          parallel_ranges(outer, len, 1, [&](int64_t r0, int64_t r1) { sum_rows(x + r0 * len, y + r0, r1 - r0, len, divisor); });
        },
        name + ":rows");
  }
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  return make_kernel(
      [outer, len, inner, blocks, divisor](KernelContext& ctx) {
        const float* x = ctx.input(0).data<float>();
        float* y = ctx.output(0).data<float>();
        parallel_ranges(outer * blocks, len * std::min(inner, kColumnBlock), 1, [&](int64_t t0, int64_t t1) {
          std::vector<double> acc(size_t(std::min(inner, kColumnBlock)));
          for (int64_t t = t0; t < t1; ++t) {
            int64_t o = t / blocks, c0 = (t % blocks) * kColumnBlock;
            int64_t w = std::min(kColumnBlock, inner - c0);
            sum_columns(x + o * len * inner + c0, y + o * inner + c0, len, inner, w, divisor, acc.data());
          }
        });
      },
      name + ":columns");
}

}  // namespace cuvil::cpu
