// DynamicQuantizeLinear (f32 -> u8 on a grid found per call) in two vectorized passes, as the reference computes
// it: the range [min(x, 0), max(x, 0)] with NaN skipped, scale = (hi - lo) / 255, zero point round(0 - lo / scale)
// saturated, y = saturate(round(x / scale) + zero point), rounding half to even and dividing in float; a scale of
// 0 (x all 0) gives y = zero point = 0. The ops quantize_dynamic writes before each MatMulInteger/ConvInteger.
// Bit-identical to the reference (the same float operations); an input holding NaN takes the reference's scalar
// loop (NaN quantizes to the zero point).
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/ref/nn_quant.h"

namespace cuvil::cpu {

namespace {

struct Range {
  float lo = 0, hi = 0;
  bool nan = false;
};

Range range_scalar(const float* x, int64_t n, Range r = {}) {
  int nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    r.lo = v < r.lo ? v : r.lo;  // a NaN compares false: skipped
    r.hi = v > r.hi ? v : r.hi;
    nan |= v != v;
  }
  r.nan |= nan != 0;
  return r;
}

// The same range 64 floats a step (GCC leaves the loop above scalar: a min/max reduction it will not reorder).
// min_ps(v, lo) is v < lo ? v : lo exactly (a NaN v keeps lo); every lane starts at +0 and only takes values
// strictly beyond it, so -0 never enters and the lanes' combination is the scalar loop's result.
__attribute__((target("avx512f"))) Range range_avx512(const float* x, int64_t n) {
  __m512 lo[4], hi[4];
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm512_setzero_ps();
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 4; ++j) {
      __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      lo[j] = _mm512_min_ps(v, lo[j]);
      hi[j] = _mm512_max_ps(v, hi[j]);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
  alignas(64) float l[64], h[64];
  for (int j = 0; j < 4; ++j) _mm512_store_ps(l + 16 * j, lo[j]), _mm512_store_ps(h + 16 * j, hi[j]);
  Range r;
  for (int j = 0; j < 64; ++j) r.lo = l[j] < r.lo ? l[j] : r.lo, r.hi = h[j] > r.hi ? h[j] : r.hi;
  r.nan = nan != 0;
  return range_scalar(x + i, n - i, r);
}

Range range_of(const float* x, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 ? range_avx512(x, n) : range_scalar(x, n);
}

CUVIL_CPU_CLONES void quantize(const float* x, uint8_t* y, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) {
    // Clamped first (saturation gives the same result for anything beyond 1024 steps) so the conversion is exact.
    float q = x[i] / scale;
    q = q < -1024.f ? -1024.f : (q > 1024.f ? 1024.f : q);
    float v = std::nearbyint(q) + zp;
    y[i] = uint8_t(v < 0.f ? 0.f : (v > 255.f ? 255.f : v));
  }
}

void run_dynamic_quantize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float* xp = x.data<float>();
  int64_t n = x.numel();
  int nt = threads_for(n);
  std::vector<Range> parts(size_t(std::max(nt, 1)));
  parallel_ranges(n, 1, 16, [&](int64_t b, int64_t e) {
    parts[size_t(omp_get_thread_num())] = range_of(xp + b, e - b);
  });
  Range r;
  for (const Range& p : parts) r.lo = std::min(r.lo, p.lo), r.hi = std::max(r.hi, p.hi), r.nan |= p.nan;
  float scale = (r.hi - r.lo) / 255.0f;
  uint8_t zp = scale != 0 ? ref::nn::quantize_value<uint8_t>(0.0f - r.lo / scale, 0) : 0;
  uint8_t* yp = ctx.output(0).data<uint8_t>();
  if (scale == 0) {
    std::fill(yp, yp + n, zp);
  } else if (r.nan) {
    for (int64_t i = 0; i < n; ++i) yp[i] = ref::nn::quantize_value<uint8_t>(xp[i] / scale, zp);
  } else {
    parallel_ranges(n, 2, 64, [&](int64_t b, int64_t e) { quantize(xp + b, yp + b, e - b, scale, float(zp)); });
  }
  ctx.output(1).data<float>()[0] = scale;
  ctx.output(2).data<uint8_t>()[0] = zp;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_dynamic_quantize(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.empty() || inputs[0].dtype != DType::f32) return nullptr;
  return make_kernel(run_dynamic_quantize, "dynamic_quantize");
}

}  // namespace cuvil::cpu
