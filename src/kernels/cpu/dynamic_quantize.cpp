// DynamicQuantizeLinear (f32 -> u8 on a grid found per call) in two vectorized passes, as the reference computes
// it: the range [min(x, 0), max(x, 0)] with NaN skipped, scale = (hi - lo) / 255, zero point round(0 - lo / scale)
// saturated, y = saturate(round(x / scale) + zero point), rounding half to even and dividing in float; a scale of
// 0 (x all 0) gives y = zero point = 0. The ops quantize_dynamic writes before each MatMulInteger/ConvInteger.
// Bit-identical to the reference (the same float operations); an input holding NaN takes the reference's scalar
// loop (NaN quantizes to the zero point).
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

CUVIL_CPU_CLONES Range range_of(const float* x, int64_t n) {
  float lo = 0, hi = 0;
  int nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    lo = v < lo ? v : lo;  // a NaN compares false: skipped
    hi = v > hi ? v : hi;
    nan |= v != v;
  }
  return {lo, hi, nan != 0};
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
