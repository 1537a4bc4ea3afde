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
#include <string>

#include "ir/ops/activation.h"

namespace cuvil::cpu {

// Whether this CPU runs the AVX-512 product (the library itself is built for baseline x86-64).
bool gemm_supported();

// B [K, N] (or stored [N, K] when trans_b) times alpha, in panels of kGemmPanel columns: panel p holds rows
// k = 0 .. K-1 of columns p * kGemmPanel .. + width(p) - 1 contiguously. The last panel is as narrow as the
// columns left allow in whole vectors of 16 (zeros past N): N = 64 is a panel of 48 and one of 16, not 96
// columns of work.
// Panels stored ahead of time (an artifact's `gemm_panels` section, given through onednn::provide_packed) are
// used where they lie when they were made for exactly this B, k, n, trans_b and alpha under this layout tag;
// packing at prepare is recorded (onednn::PackRecorder) so that a save can store them.
inline constexpr int64_t kGemmPanel = 48;
class PackedB {
 public:
  PackedB(const float* b, int64_t k, int64_t n, bool trans_b, float alpha);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kGemmPanel - 1) / kGemmPanel; }
  int64_t width(int64_t p) const { return std::min(kGemmPanel, (n_ - p * kGemmPanel + 15) / 16 * 16); }
  const float* panel(int64_t p) const { return data_.get() + p * k_ * kGemmPanel; }
  // Whether the panels are stored ones (not packed by this object).
  bool provided() const { return provided_; }

 private:
  // Hands the panels to a save's recorder, if one is alive (onednn::note_packed).
  void note(const float* b, const std::string& from, const std::string& to, size_t nbytes, float alpha) const;
  int64_t k_, n_;
  bool provided_ = false;
  std::shared_ptr<const float> data_;
};

// The panels' layout and what they are made from, as PackedImage's `to` and `from` (kernels/onednn/prepacked.h):
// the tag names the panel width, the element type, the ISA the tile needs and a layout revision; the key names
// B's dims and storage order. Panels under another tag are never used.
std::string gemm_layout_tag();
std::string gemm_source_key(int64_t k, int64_t n, bool trans_b);
// The panels' byte size for B [k, n] (0 when it overflows or k, n are not positive).
size_t gemm_panels_nbytes(int64_t k, int64_t n);

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
