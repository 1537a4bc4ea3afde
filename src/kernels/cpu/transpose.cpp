// Transpose of any dtype (moved as 1/2/4/8-byte words), any perm.
//
// Prepare simplifies the perm: size-1 dims go, and input dims that stay neighbours in the same order merge.
// What is left is one of:
//   - the identity: a copy;
//   - the innermost dim kept in place: a loop of contiguous row copies;
//   - otherwise a batched 2-D transpose between the output's innermost dim and the output dim that reads the
//     input's innermost dim, done in tiles whose reads and writes stay within a few runs of cache lines
//     (NCHW <-> NHWC, [.., A, B] -> [.., B, A], attention's head split all land here).
// The remaining ("batch") dims are walked as an odometer; work is split over threads by batches and tiles.
// 4-byte words move through 16 x 16 blocks transposed in AVX-512 registers where the CPU has it (three planes
// into rows of 3, an RGB image to NHWC, or two into rows of 2, a channel shuffle, through permutes; a strided scalar loop otherwise, and at the edges), and outputs of 16 MB and more are written with non-temporal
// stores: 64 MB of NCHW -> NHWC (64 channels) went from 7-13 GB/s to about 50, read and written bytes counted.
#include <array>
#include <cstring>
#include <numeric>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CUVIL_TRANSPOSE_AVX512 1
#endif

#include "ir/ops/transpose.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

constexpr size_t kMaxRank = 8;
constexpr int64_t kStreamingBytes = int64_t(16) << 20;

struct Plan {
  size_t rank = 0;                       // after simplification
  std::array<int64_t, kMaxRank> odims{};  // output dims
  std::array<int64_t, kMaxRank> rstride{};  // input element stride read by each output dim
  std::array<int64_t, kMaxRank> ostride{};  // output element strides
  int64_t numel = 0;
  size_t width = 4;  // bytes per element
  // The 2-D tiles case (set by choose_tiles): the output dim reading the input's innermost, the tile shape,
  // and whether whole 16 x 16 blocks are written with non-temporal stores.
  size_t a = 0;
  int64_t tile_a = 0, tile_b = 0;
  bool stream = false;
  bool planes3 = false;  // 4-byte words, output rows of 3 read from 3 planes: interleave3 (with AVX-512)
  bool planes2 = false;  // the same with rows of 2: interleave2
};

// Simplifies (shape, perm) into the plan; false when deeper than kMaxRank.
bool make_plan(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm, Plan& p) {
  size_t r = shape.size();
  // Keep input dims of size > 1, renumbered.
  std::vector<int64_t> keep_index(r, -1), kshape;
  for (size_t d = 0; d < r; ++d)
    if (shape[d] != 1) keep_index[d] = int64_t(kshape.size()), kshape.push_back(shape[d]);
  std::vector<int64_t> kperm;
  for (int64_t d : perm)
    if (keep_index[size_t(d)] >= 0) kperm.push_back(keep_index[size_t(d)]);
  // Merge runs of output dims that read consecutive input dims.
  std::vector<std::vector<int64_t>> groups;  // input dims of each merged output dim
  for (int64_t d : kperm) {
    if (!groups.empty() && groups.back().back() + 1 == d) groups.back().push_back(d);
    else groups.push_back({d});
  }
  if (groups.size() > kMaxRank) return false;
  // The merged input: its dims are the groups in input order.
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a][0] < groups[b][0]; });
  std::vector<int64_t> gsize(groups.size()), in_stride(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    gsize[g] = 1;
    for (int64_t d : groups[g]) gsize[g] *= kshape[size_t(d)];
  }
  int64_t s = 1;
  for (size_t k = order.size(); k-- > 0;) {
    in_stride[order[k]] = s;
    s *= gsize[order[k]];
  }
  p.rank = groups.size();
  p.numel = s;
  int64_t os = 1;
  for (size_t g = p.rank; g-- > 0;) {
    p.odims[g] = gsize[g];
    p.rstride[g] = in_stride[g];
    p.ostride[g] = os;
    os *= gsize[g];
  }
  return true;
}

#ifdef CUVIL_TRANSPOSE_AVX512
// dst[m * dst_stride + k] = src[k * src_stride + m] for m, k < 16: 16 rows in, four rounds of shuffles
// (32-bit pairs, 64-bit pairs, then 128-bit lanes twice), 16 rows out. Moves bits: any 4-byte dtype.
// (GCC 12's unpack intrinsics start from _mm512_undefined_ps, which -Wuninitialized reports.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// `stream`: the rows are written with non-temporal stores (each dst row 64-byte aligned).
__attribute__((target("avx512f"))) void transpose_16x16(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                                                        int64_t dst_stride, bool stream) {
  __m512 r[16], t[16];
  for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(src + k * src_stride);
  for (int k = 0; k < 16; k += 2) {  // per 128-bit lane L: t[k] = r[k], r[k+1] interleaved at columns 4L, 4L+1
    t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);  // ... at columns 4L+2, 4L+3
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + c], lane L: rows g..g+3 at column 4L + c
    __m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
    __m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    // Output row 4L + c is lane L of r[c], r[4 + c], r[8 + c], r[12 + c].
    __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), x1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    __m512 y0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), y1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
    r[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
  }
  if (stream)
    for (int m = 0; m < 16; ++m) _mm512_stream_ps(reinterpret_cast<float*>(dst + m * dst_stride), r[m]);
  else
    for (int m = 0; m < 16; ++m) _mm512_storeu_ps(dst + m * dst_stride, r[m]);
}

#pragma GCC diagnostic pop

// Three planes interleaved, 16 positions at a time: dst[3 p + c] = src[c * src_stride + p] for p < 16 * blocks
// (an RGB image from NCHW to NHWC, whose 3-wide output rows have no 16 x 16 block). Two two-source permutes per
// output vector: planes 0 and 1 first, then plane 2 into the remaining lanes.
__attribute__((target("avx512f"))) void interleave3(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                                                    int64_t blocks) {
  alignas(64) static const std::array<std::array<std::array<int32_t, 16>, 3>, 2> idx = [] {
    std::array<std::array<std::array<int32_t, 16>, 3>, 2> t{};
    for (int v = 0; v < 3; ++v)
      for (int l = 0; l < 16; ++l) {
        int q = 16 * v + l, pos = q / 3, plane = q % 3;
        t[0][size_t(v)][size_t(l)] = plane == 1 ? 16 + pos : pos;  // planes 0, 1 (plane 2's lanes: filler)
        t[1][size_t(v)][size_t(l)] = plane == 2 ? 16 + pos : l;   // keep, or plane 2
      }
    return t;
  }();
  __m512i i01[3], i2[3];
  for (int v = 0; v < 3; ++v)
    i01[v] = _mm512_load_si512(idx[0][size_t(v)].data()), i2[v] = _mm512_load_si512(idx[1][size_t(v)].data());
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* s = reinterpret_cast<const float*>(src) + 16 * blk;
    __m512 x0 = _mm512_loadu_ps(s), x1 = _mm512_loadu_ps(s + src_stride), x2 = _mm512_loadu_ps(s + 2 * src_stride);
    float* o = reinterpret_cast<float*>(dst) + 48 * blk;
    for (int v = 0; v < 3; ++v)
      _mm512_storeu_ps(o + 16 * v, _mm512_permutex2var_ps(_mm512_permutex2var_ps(x0, i01[v], x1), i2[v], x2));
  }
}

// Two planes interleaved, 16 positions at a time: dst[2 p + c] = src[c * src_stride + p] for p < 16 * blocks
// (ShuffleNet's channel shuffle in NHWC, [.., 2, C/2] -> [.., C/2, 2] per pixel, whose 2-wide output rows have no
// 16 x 16 block: the strided scalar loop took 0.04 ms per shuffle). One two-source permute per output vector.
// `tail` (< 16) more positions follow the blocks: with a block before them, the last 16 positions move again
// (a shuffle's 58 channels: 3 blocks and 10; masked loads and stores were slower on this AMD EPYC).
__attribute__((target("avx512f"))) void interleave2(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                                                    int64_t blocks, int64_t tail) {
  alignas(64) static const std::array<std::array<int32_t, 16>, 2> idx = [] {
    std::array<std::array<int32_t, 16>, 2> t{};
    for (int v = 0; v < 2; ++v)
      for (int l = 0; l < 16; ++l) t[size_t(v)][size_t(l)] = (l % 2 ? 16 : 0) + 8 * v + l / 2;
    return t;
  }();
  __m512i i0 = _mm512_load_si512(idx[0].data()), i1 = _mm512_load_si512(idx[1].data());
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* s = reinterpret_cast<const float*>(src) + 16 * blk;
    __m512 x0 = _mm512_loadu_ps(s), x1 = _mm512_loadu_ps(s + src_stride);
    float* o = reinterpret_cast<float*>(dst) + 32 * blk;
    _mm512_storeu_ps(o, _mm512_permutex2var_ps(x0, i0, x1));
    _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(x0, i1, x1));
  }
  if (tail > 0 && blocks > 0) {  // the last 16 positions again, overlapping the last block (same values)
    const float* s = reinterpret_cast<const float*>(src) + 16 * blocks + tail - 16;
    __m512 x0 = _mm512_loadu_ps(s), x1 = _mm512_loadu_ps(s + src_stride);
    float* o = reinterpret_cast<float*>(dst) + 2 * (16 * blocks + tail - 16);
    _mm512_storeu_ps(o, _mm512_permutex2var_ps(x0, i0, x1));
    _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(x0, i1, x1));
  }
}

bool has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

// Moves the elements of a plan, one word type U per element size.
template <class U>
struct Mover {
  const Plan& p;
  const U* src;
  U* dst;

  // Case "innermost kept": rows of odims[r-1] contiguous elements; rows [r0, r1).
  void copy_rows(int64_t r0, int64_t r1) const {
    size_t r = p.rank;
    int64_t len = p.odims[r - 1];
    std::array<int64_t, kMaxRank> idx{};
    int64_t rem = r0, in = 0;
    for (size_t d = r - 1; d-- > 0;) {
      idx[d] = rem % p.odims[d];
      rem /= p.odims[d];
      in += idx[d] * p.rstride[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      std::memcpy(dst + row * len, src + in, size_t(len) * sizeof(U));
      for (size_t d = r - 1; d-- > 0;) {
        in += p.rstride[d];
        if (++idx[d] < p.odims[d]) break;
        in -= p.rstride[d] * p.odims[d];
        idx[d] = 0;
      }
    }
  }

  // Case "2-D tiles": dim a = output dim reading the input's innermost (stride 1), dim b = output's innermost.
  // Task t = (batch, tile of a, tile of b), tiles of p.tile_a x p.tile_b. With p.stream, whole 16 x 16 blocks
  // may write with non-temporal stores (callers fence after).
  void tiles(int64_t t0, int64_t t1) const {
    size_t r = p.rank, a = p.a, b = r - 1;
    int64_t tile_a = p.tile_a, tile_b = p.tile_b;
    bool stream = p.stream;
    int64_t na = p.odims[a], nb = p.odims[b];
    int64_t ta = (na + tile_a - 1) / tile_a, tb = (nb + tile_b - 1) / tile_b;
    int64_t rs_b = p.rstride[b], os_a = p.ostride[a];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t batch = t / (ta * tb), tile = t % (ta * tb);
      int64_t a0 = (tile / tb) * tile_a, b0 = (tile % tb) * tile_b;
      int64_t a1 = std::min(na, a0 + tile_a), b1 = std::min(nb, b0 + tile_b);
      int64_t in = 0, out = 0, rem = batch;
      for (size_t d = r; d-- > 0;) {
        if (d == a || d == b) continue;
        int64_t i = rem % p.odims[d];
        rem /= p.odims[d];
        in += i * p.rstride[d];
        out += i * p.ostride[d];
      }
      int64_t a16 = a0, b16 = b0;  // the part of the tile covered by whole 16 x 16 blocks ends at (a16, b16)
#ifdef CUVIL_TRANSPOSE_AVX512
      if constexpr (sizeof(U) == 4) {
        if (p.planes3 && has_avx512f()) {  // three planes into rows of 3 (b0 = 0, b1 = 3)
          int64_t blocks = (a1 - a0) / 16;
          interleave3(reinterpret_cast<const uint32_t*>(src + in + a0), rs_b,
                      reinterpret_cast<uint32_t*>(dst + out + a0 * 3), blocks);
          a16 = a0 + 16 * blocks, b16 = b1;
        } else if (p.planes2 && has_avx512f()) {  // two planes into rows of 2 (b0 = 0, b1 = 2)
          int64_t blocks = (a1 - a0) / 16;
          interleave2(reinterpret_cast<const uint32_t*>(src + in + a0), rs_b,
                      reinterpret_cast<uint32_t*>(dst + out + a0 * 2), blocks, (a1 - a0) % 16);
          a16 = blocks > 0 ? a1 : a0, b16 = b1;
        } else if (has_avx512f()) {
          a16 = a0 + (a1 - a0) / 16 * 16, b16 = b0 + (b1 - b0) / 16 * 16;
          for (int64_t i = a0; i < a16; i += 16)
            for (int64_t j = b0; j < b16; j += 16) {
              U* o = dst + out + i * os_a + j;
              bool aligned = os_a % 16 == 0 && reinterpret_cast<uintptr_t>(o) % 64 == 0;
              transpose_16x16(reinterpret_cast<const uint32_t*>(src + in + i + j * rs_b), rs_b,
                              reinterpret_cast<uint32_t*>(o), os_a, stream && aligned);
            }
        }
      }
#endif
      // The rest: rows below a16 from column b16 on, and every row from a16 on. Rows below a16 are skipped when
      // the blocks covered them whole (an RGB image's 512-row tiles: the empty passes were half the transpose's
      // time in MobileNetV3-small's input transpose).
      for (int64_t i = b16 >= b1 ? a16 : a0; i < a1; ++i) {
        int64_t j0 = i < a16 ? b16 : b0;
        const U* s = src + in + i + j0 * rs_b;
        U* o = dst + out + i * os_a + j0;
        for (int64_t j = 0; j < b1 - j0; ++j) o[j] = s[j * rs_b];
      }
    }
  }
};

// The 2-D tiles case's shape, once at prepare. Tiles of about 16K elements, long along a (each of the tile's input
// rows a run of up to 2 KB that the prefetchers follow) and at least two blocks along b. NCHW -> NHWC of
// 64 x 512 x 512 floats took 4.3-4.6 ms in 32 x 32 tiles, 2.6-3.0 in 512 x 32; NHWC -> NCHW 4.6-4.8 against
// 1.9-2.0 in 64 x 256; 4096 x 4096 8-10.7 against 3.6-4.5. An output far larger than the caches is written
// around them (no read of the lines it replaces, nothing evicted that the next kernel reads), as the generated
// kernels' large outputs are.
void choose_tiles(Plan& p) {
  size_t r = p.rank;
  if (p.rstride[r - 1] == 1) return;  // innermost dim kept: row copies
  while (p.rstride[p.a] != 1) ++p.a;
  auto up16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  p.tile_a = std::min<int64_t>(up16(p.odims[p.a]), 512);
  p.tile_b = std::min(up16(p.odims[r - 1]), std::max<int64_t>(32, 16384 / p.tile_a / 16 * 16));
  p.stream = p.numel * int64_t(p.width) >= kStreamingBytes;
  p.planes3 = p.width == 4 && p.odims[r - 1] == 3 && p.ostride[p.a] == 3;
  p.planes2 = p.width == 4 && p.odims[r - 1] == 2 && p.ostride[p.a] == 2;
}

template <class U>
void run_plan(const Plan& p, const void* src_raw, void* dst_raw) {
  Mover<U> m{p, static_cast<const U*>(src_raw), static_cast<U*>(dst_raw)};
  size_t r = p.rank;
  if (p.rstride[r - 1] == 1) {  // innermost dim kept (includes the identity: one row)
    int64_t len = p.odims[r - 1], rows = p.numel / len;
    parallel_ranges(rows, len, 1, [&](int64_t r0, int64_t r1) { m.copy_rows(r0, r1); });
    return;
  }
  int64_t na = p.odims[p.a], nb = p.odims[r - 1];
  int64_t tiles = ((na + p.tile_a - 1) / p.tile_a) * ((nb + p.tile_b - 1) / p.tile_b);
  int64_t batches = p.numel / (na * nb);
  parallel_ranges(batches * tiles, p.tile_a * p.tile_b, 1, [&](int64_t t0, int64_t t1) {
    m.tiles(t0, t1);
#ifdef CUVIL_TRANSPOSE_AVX512
    if (p.stream) _mm_sfence();  // non-temporal stores are weakly ordered: fenced before the output is read
#endif
  });
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_transpose(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() != 1 || !inputs[0].present) return nullptr;
  const std::vector<int64_t>& shape = inputs[0].shape;
  int64_t r = int64_t(shape.size());
  std::optional<std::vector<int64_t>> perm = transpose_perm(n, r);
  if (!perm || shape_numel(shape) == 0) return nullptr;
  Plan plan;
  plan.width = dtype_size(inputs[0].dtype);
  if (plan.width != 1 && plan.width != 2 && plan.width != 4 && plan.width != 8) return nullptr;
  if (!make_plan(shape, *perm, plan)) return nullptr;
  if (plan.rank == 0) {  // every dim 1: one element
    plan.rank = 1;
    plan.odims[0] = 1;
    plan.rstride[0] = 1;
    plan.ostride[0] = 1;
    plan.numel = 1;
  }
  choose_tiles(plan);
  return make_kernel(
      [plan](KernelContext& ctx) {
        const void* src = ctx.input(0).raw();
        void* dst = ctx.output(0).raw();
        switch (plan.width) {
          case 1: return run_plan<uint8_t>(plan, src, dst);
          case 2: return run_plan<uint16_t>(plan, src, dst);
          case 4: return run_plan<uint32_t>(plan, src, dst);
          default: return run_plan<uint64_t>(plan, src, dst);
        }
      },
      "transpose");
}

}  // namespace cuvil::cpu
