// The f32 product of gemm.h. Blocking, from the outside in:
//   rows in blocks of up to row_block_bytes() of A's K block (half the core's L2),
//   K in blocks of at most kMaxKBlock (the first block starts from bias + sum, the last applies the activation;
//   the rows' A block stays in L2 while the panels pass),
//   panels of 48 columns (a panel's K block, 48 x kc floats, streams from L2 into the tile),
//   rows in tiles of 8: 24 zmm accumulators, 3 loads of B and 8 broadcasts of A per k.
// Threads take contiguous ranges of panels (of rows when there are too few panels to share), so no two write
// the same part of C and every element's sum runs in the same order whatever the thread count.
#include "kernels/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>

#include <unistd.h>

#include "kernels/cpu/cpu_util.h"
#include "kernels/onednn/prepacked.h"
#include "kernels/workers.h"
#include "support/huge_pages.h"
#include "support/log.h"

namespace cuvil::cpu {

namespace {

constexpr int kTileRows = 8;
constexpr int kVecs = int(kGemmPanel / 16);     // zmm vectors across a full panel
constexpr int64_t kMaxKBlock = 1024;             // K = 3072 runs as 3 blocks of 1024
// A's rows x K block held in L2: half of it (Zen 5: 512 KB of 1 MB). Every row block streams all of B again, so
// a block sized for a smaller L2 than the core has costs a pass over the weights: on a 2 MB-L2 Xeon, ViT's 197
// rows x 768 ran as 168 + 29 rows, 197 x 768 x 3072 10 % slower than oneDNN's brgemm, 2 % in one block.
int64_t row_block_bytes() {
  static const int64_t bytes = [] {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return std::clamp<int64_t>(l2 > 0 ? l2 / 2 : 512 << 10, 256 << 10, 2 << 20);
  }();
  return bytes;
}
constexpr double kSingleThreadFlops = 4e6;       // below: the calling thread alone
// ... unless B is this large and the workers still spin: a batch-1 classifier is bound by reading its weights,
// and two cores read them twice as fast (MobileNetV2's 5 MB: 0.19 -> 0.08 ms)
constexpr double kThreadedWeightBytes = 1 << 20;

// One tile: rows [0, R) x the panel's `cols` columns of C (V vectors wide), over kc values of k. first: start from
// bias + sum (else from C, the previous K blocks' partial sums).
template <int R, int V>
__attribute__((target("avx512f"))) void tile(int64_t kc, const float* a, int64_t lda, const float* bp, float* c,
                                             int64_t ldc, int64_t cols, bool first, const float* bias,
                                             const float* sum, float sum_scale, const char* prefetch,
                                             int64_t prefetch_lines, const float* clamp) {
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) {
    int64_t live = std::clamp<int64_t>(cols - 16 * v, 0, 16);
    mask[v] = __mmask16((1u << live) - 1u);
  }
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      if (!first) {
        acc[r][v] = _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v);
        continue;
      }
      __m512 x = bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
      if (sum)
        x = _mm512_fmadd_ps(_mm512_set1_ps(sum_scale), _mm512_maskz_loadu_ps(mask[v], sum + r * ldc + 16 * v), x);
      acc[r][v] = x;
    }
  // The tile's prefetches are spread evenly over its k loop, `per` lines every `every` steps: issued all at the
  // start they overflow the core's outstanding-miss queue (cold FFN products 1-6 % slower, alternated runs).
  int64_t every = prefetch_lines > 0 ? std::max<int64_t>(1, kc / prefetch_lines) : kc;
  // One row (a batch-1 classifier) streams its panels in order, which the hardware prefetcher follows better
  // alone: the software prefetch made MobileNetV2's 1280 x 1000 classifier 10 % slower in cache.
  if (R == 1) prefetch_lines = 0, every = (kc + 3) / 4 * 4;
  int64_t per = prefetch_lines > kc ? (prefetch_lines + kc - 1) / kc : 1, issued = 0;
  for (int64_t k0 = 0; k0 < kc; k0 += every) {
    for (int64_t j = 0; j < per && issued < prefetch_lines; ++j, ++issued)
      _mm_prefetch(prefetch + issued * 64, _MM_HINT_T1);
    int64_t k = k0, k1 = std::min(kc, k0 + every);
    if constexpr (R == 1) {
      // One row: V accumulators alone would wait on the FMA latency, so four steps of k go to four sets, added
      // at the end (with the prefetch change above, 1280 x 1000 in cache: 0.089 -> 0.081 ms, ORT 0.076; inside
      // MobileNetV2, weights partly evicted: 0.34 on oneDNN -> 0.19, ORT 0.24).
      __m512 part[3][V];
      for (int u = 0; u < 3; ++u)
        for (int v = 0; v < V; ++v) part[u][v] = _mm512_setzero_ps();
      for (; k + 4 <= k1; k += 4) {
        for (int v = 0; v < V; ++v) {
          acc[0][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[k]), _mm512_load_ps(bp + k * (16 * V) + 16 * v), acc[0][v]);
          part[0][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 1]), _mm512_load_ps(bp + (k + 1) * (16 * V) + 16 * v),
                                       part[0][v]);
          part[1][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 2]), _mm512_load_ps(bp + (k + 2) * (16 * V) + 16 * v),
                                       part[1][v]);
          part[2][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[k + 3]), _mm512_load_ps(bp + (k + 3) * (16 * V) + 16 * v),
                                       part[2][v]);
        }
      }
      for (int v = 0; v < V; ++v)
        acc[0][v] = _mm512_add_ps(_mm512_add_ps(acc[0][v], part[0][v]), _mm512_add_ps(part[1][v], part[2][v]));
    }
    for (; k < k1; ++k) {
      __m512 b[V];
      for (int v = 0; v < V; ++v) b[v] = _mm512_load_ps(bp + k * (16 * V) + 16 * v);
      for (int r = 0; r < R; ++r) {
        __m512 x = _mm512_set1_ps(a[r * lda + k]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
      }
    }
  }
  if (clamp) {  // a Relu or Clip on the way out: max(lo, min(hi, x)), NaN kept as the unary kernels keep it
    __m512 lo = _mm512_set1_ps(clamp[0]), hi = _mm512_set1_ps(clamp[1]);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) {
        __m512 x = acc[r][v];
        x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
        acc[r][v] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), x, hi);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, bool, const float*,
                        const float*, float, const char*, int64_t, const float*);
template <int V>
constexpr TileFn kTilesOf[kTileRows + 1] = {nullptr,    tile<1, V>, tile<2, V>, tile<3, V>, tile<4, V>,
                                            tile<5, V>, tile<6, V>, tile<7, V>, tile<8, V>};
// [vectors - 1][rows]
constexpr const TileFn* kTiles[kVecs] = {kTilesOf<1>, kTilesOf<2>, kTilesOf<3>};

struct Range {
  int64_t begin, end;
};

// Rows `rows` x panels `panels` of C.
void gemm_part(const float* a, int64_t lda, const PackedB& b, float* c, int64_t ldc, const GemmEpilogue& e,
               Range rows, Range panels) {
  const int64_t K = b.k(), N = b.n();
  const int64_t kblocks = (K + kMaxKBlock - 1) / kMaxKBlock;
  const int64_t kc_full = (K + kblocks - 1) / kblocks;
  const int64_t row_block = std::max<int64_t>(kTileRows, row_block_bytes() / (kc_full * 4) / kTileRows * kTileRows);
  // Relu and Clip are applied in the tile's registers; the other activations by the unary loops after it.
  const float inf = std::numeric_limits<float>::infinity();
  float bounds[2] = {-inf, inf};
  bool in_tile = e.act.kind == nn::Act::Relu || e.act.kind == nn::Act::Clip;
  if (e.act.kind == nn::Act::Relu) bounds[0] = 0.f;
  if (e.act.kind == nn::Act::Clip) bounds[0] = e.act.alpha, bounds[1] = e.act.beta;
  for (int64_t m0 = rows.begin; m0 < rows.end; m0 += row_block) {
    int64_t m1 = std::min(rows.end, m0 + row_block);
    // K blocks outside the panels: the rows' A block stays in L2 while every panel passes (with the panels
    // outside, each panel went through all of A's K blocks, more than L2 holds, and A came from L3 again).
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      int64_t k0 = kb * kc_full, kc = std::min(kc_full, K - k0);
      bool first = kb == 0, last = kb == kblocks - 1;
      for (int64_t p = panels.begin; p < panels.end; ++p) {
        int64_t col = p * kGemmPanel, cols = std::min(kGemmPanel, N - col), width = b.width(p);
        const TileFn* tiles_v = kTiles[width / 16 - 1];
        const float* bias = e.bias ? e.bias + col : nullptr;
        const float* bp = b.panel(p) + k0 * width;
        // The weights come from memory once per call: the tiles of this panel prefetch the next panel's K block
        // into L2, a share each (B 9.4 MB from memory: 5 % faster).
        const char* next = p + 1 < panels.end ? reinterpret_cast<const char*>(b.panel(p + 1) + k0 * b.width(p + 1))
                                              : nullptr;
        int64_t lines = next ? kc * b.width(p + 1) * 4 / 64 : 0, tiles = (m1 - m0 + kTileRows - 1) / kTileRows;
        int64_t share = (lines + tiles - 1) / tiles;
        for (int64_t m = m0, t = 0; m < m1; m += kTileRows, ++t) {
          int r = int(std::min<int64_t>(kTileRows, m1 - m));
          float* ct = c + m * ldc + col;
          int64_t l0 = std::min(lines, t * share);
          tiles_v[r](kc, a + m * lda + k0, lda, bp, ct, ldc, cols, first, bias, e.sum ? e.sum + m * ldc + col : nullptr,
                    e.sum_scale, next + l0 * 64, std::min(share, lines - l0), last && in_tile ? bounds : nullptr);
          if (last && !in_tile && e.act.kind != nn::Act::None)
            for (int i = 0; i < r; ++i) activate_inplace(ct + i * ldc, cols, e.act);
        }
      }
    }
  }
}

}  // namespace

bool gemm_supported() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

std::string gemm_layout_tag() { return "cuvil-gemm panels48 f32 avx512f r1"; }

std::string gemm_source_key(int64_t k, int64_t n, bool trans_b) {
  return "gemm-b k=" + std::to_string(k) + " n=" + std::to_string(n) + (trans_b ? " [n,k]" : " [k,n]");
}

size_t gemm_panels_nbytes(int64_t k, int64_t n) {
  if (k <= 0 || n <= 0) return 0;
  uint64_t panels = (uint64_t(n) + kGemmPanel - 1) / kGemmPanel, bytes = 0;
  if (__builtin_mul_overflow(panels, uint64_t(k) * kGemmPanel * sizeof(float), &bytes) ||
      uint64_t(k) > (uint64_t(1) << 40))
    return 0;
  return size_t(bytes);
}

PackedB::PackedB(const float* b, int64_t k, int64_t n, bool trans_b, float alpha) : k_(k), n_(n) {
  size_t count = size_t(panels() * k * kGemmPanel);
  const std::string from = gemm_source_key(k, n, trans_b), to = gemm_layout_tag();
  onednn::ProvidedPack stored;
  bool other_layout = false;
  if (onednn::find_provided(b, alpha, from, to, count * sizeof(float), &stored, &other_layout)) {
    // Stored panels, in the artifact's mapping (64-byte aligned there): used in place, no packing.
    data_ = std::shared_ptr<const float>(std::move(stored.owner), static_cast<const float*>(stored.data));
    provided_ = true;
    onednn::count_packed(onednn::PackedHow::gemm_provided);
    note(b, from, to, count * sizeof(float), alpha);  // (saving a loaded artifact again keeps them)
    return;
  }
  if (other_layout)
    log_line("prepack", "GEMM panels of " + from + " are stored for another request (alpha or layout): packed here");
  // Weights of 2 MB and more go on huge pages: writing fresh memory faults once per page, which made the faults,
  // not the packing, the cost of preparing BERT's 340 MB of weights.
  float* d = static_cast<float*>(aligned_alloc_huge(count * sizeof(float)));
  data_ = std::shared_ptr<const float>(d, [](const float* p) { std::free(const_cast<float*>(p)); });
  // Read B in its storage order: row by row when B is [K, N] (walking each panel down K jumped a whole row per
  // step: 1.0 ms against 0.4 for 768 x 3072 in warm memory); panel by panel when it is stored [N, K], where a
  // panel's 48 rows of B are read together.
  auto fill = [&](int64_t p, int64_t kk) {
    int64_t w = width(p), col0 = p * kGemmPanel, live = std::min(w, n - col0);
    float* dst = d + p * k * kGemmPanel + kk * w;
    for (int64_t j = 0; j < w; ++j)
      dst[j] = j < live ? (trans_b ? b[(col0 + j) * k + kk] : b[kk * n + col0 + j]) * alpha : 0.f;
  };
  if (trans_b) {
    // 16 k at a time: each of the panel's rows of B gives a whole cache line per visit, instead of one float per
    // row per k, 48 rows (pages, for a 2048-wide classifier) apart: ResNet-50's 2048 x 1000 in 2.1 ms, not 7.4
    constexpr int64_t kStep = 16;
    for (int64_t p = 0; p < panels(); ++p) {
      int64_t w = width(p), col0 = p * kGemmPanel, live = std::min(w, n - col0);
      float* panel = d + p * k * kGemmPanel;
      for (int64_t k0 = 0; k0 < k; k0 += kStep) {
        int64_t k1 = std::min(k, k0 + kStep);
        for (int64_t j = 0; j < w; ++j) {
          if (j >= live) {
            for (int64_t kk = k0; kk < k1; ++kk) panel[kk * w + j] = 0.f;
            continue;
          }
          const float* row = b + (col0 + j) * k;
          for (int64_t kk = k0; kk < k1; ++kk) panel[kk * w + j] = row[kk] * alpha;
        }
      }
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t p = 0; p < panels(); ++p) fill(p, kk);
  }
  onednn::count_packed(onednn::PackedHow::gemm_packed);
  note(b, from, to, count * sizeof(float), alpha);  // (a save's recorder keeps them)
}

void PackedB::note(const float* b, const std::string& from, const std::string& to, size_t nbytes, float alpha) const {
  onednn::PackedImage image;
  image.source = b;
  image.source_nbytes = size_t(k_) * size_t(n_) * sizeof(float);
  image.scale = alpha;
  image.from = from;
  image.to = to;
  image.data = data_.get();
  image.nbytes = nbytes;
  onednn::note_packed(image, data_);
}

void gemm(const float* a, int64_t m, int64_t lda, const PackedB& b, float* c, int64_t ldc, const GemmEpilogue& e) {
  if (m <= 0 || b.n() <= 0) return;
  const int64_t panels = b.panels();
  double flops = 2.0 * double(m) * double(b.n()) * double(b.k());
  bool big_b = double(b.k()) * double(b.n()) * 4 >= kThreadedWeightBytes;
  bool small = flops < kSingleThreadFlops && !(big_b && workers_spinning());
  int nt = small || omp_in_parallel() ? 1 : omp_get_max_threads();
  if (nt <= 1) {
    gemm_part(a, lda, b, c, ldc, e, {0, m}, {0, panels});
    return;
  }
  // Panels when each thread gets at least two of them; else rows, in whole tiles.
  bool by_panels = panels >= 2 * int64_t(nt);
#pragma omp parallel num_threads(nt)
  {
    int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    if (by_panels) {
      gemm_part(a, lda, b, c, ldc, e, {0, m}, {panels * t / team, panels * (t + 1) / team});
    } else {
      int64_t tiles = (m + kTileRows - 1) / kTileRows;
      int64_t r0 = std::min(m, tiles * t / team * kTileRows), r1 = std::min(m, tiles * (t + 1) / team * kTileRows);
      if (r0 < r1) gemm_part(a, lda, b, c, ldc, e, {r0, r1}, {0, panels});
    }
  }
  note_parallel_end();
}

}  // namespace cuvil::cpu
