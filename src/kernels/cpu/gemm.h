// Cuvil's own f32 matrix product for a constant right-hand side (a Linear layer's weights, a 1x1 convolution's
// filters): C = act(A B + bias + sum_scale * Sum), with B packed once at prepare time. On AVX-512 machines it
// replaces oneDNN's matmul for these products: an 8 x 48 register tile (24 accumulators) over K in long blocks,
// B read from panels laid out in the order the tile consumes them, the next panel prefetched. In BERT-base, whose
// weights arrive from memory at every call, the products ran at ~380 GFLOP/s on 2 cores where oneDNN 2.6's
// brgemm ran at 330-340 (the model: 67.7 ms against 70.6); with weights already in cache the two are equal
// (~390; 410-425 for the bare loop nest, against an FMA peak of 437 measured here).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "ir/ops/activation.h"

namespace cuvil::cpu {

// Whether this CPU runs the AVX-512 product (the library itself is built for baseline x86-64).
bool gemm_supported();

// B [K, N] (or stored [N, K] when trans_b) times alpha, in panels of kGemmPanel columns: panel p holds rows
// k = 0 .. K-1 of columns p * kGemmPanel .. + width(p) - 1 contiguously. The last panel is as narrow as the
// columns left allow in whole vectors of 16 (zeros past N): N = 64 is a panel of 48 and one of 16, not 96
// columns of work.
inline constexpr int64_t kGemmPanel = 48;
class PackedB {
 public:
  PackedB(const float* b, int64_t k, int64_t n, bool trans_b, float alpha);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kGemmPanel - 1) / kGemmPanel; }
  int64_t width(int64_t p) const { return std::min(kGemmPanel, (n_ - p * kGemmPanel + 15) / 16 * 16); }
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kGemmPanel; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  int64_t k_, n_;
  std::unique_ptr<float, Free> data_;
};

// What is added to the product and applied after it. Sum may be C itself (a residual written in place).
struct GemmEpilogue {
  const float* bias = nullptr;  // [N], added to every row
  const float* sum = nullptr;   // [M, N] with row stride ldc (C's)
  float sum_scale = 1.f;
  nn::Activation act;
};

// C [M, N] (row stride ldc) = act(A [M, K] (row stride lda) x B + bias + sum_scale * sum), threaded over the
// runtime's OpenMP threads. Requires gemm_supported().
void gemm(const float* a, int64_t m, int64_t lda, const PackedB& b, float* c, int64_t ldc, const GemmEpilogue& e);

}  // namespace cuvil::cpu
