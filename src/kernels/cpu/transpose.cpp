// Transpose of any dtype (moved as 1/2/4/8-byte words), any perm.
//
// Prepare simplifies the perm: size-1 dims go, and input dims that stay neighbours in the same order merge.
// What is left is one of:
//   - the identity: a copy;
//   - the innermost dim kept in place: a loop of contiguous row copies;
//   - otherwise a batched 2-D transpose between the output's innermost dim and the output dim that reads the
//     input's innermost dim, done in square tiles so that both the reads and the writes of a tile stay within a
//     few cache lines (NCHW <-> NHWC, [.., A, B] -> [.., B, A], attention's head split all land here).
// The remaining ("batch") dims are walked as an odometer; work is split over threads by batches and tiles.
#include <array>
#include <cstring>
#include <numeric>

#include "ir/ops/transpose.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

constexpr size_t kMaxRank = 8;
constexpr int64_t kTile = 32;

struct Plan {
  size_t rank = 0;                       // after simplification
  std::array<int64_t, kMaxRank> odims{};  // output dims
  std::array<int64_t, kMaxRank> rstride{};  // input element stride read by each output dim
  std::array<int64_t, kMaxRank> ostride{};  // output element strides
  int64_t numel = 0;
  size_t width = 4;  // bytes per element
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
  // Task t = (batch, tile of a, tile of b).
  void tiles(size_t a, int64_t t0, int64_t t1) const {
    size_t r = p.rank, b = r - 1;
    int64_t na = p.odims[a], nb = p.odims[b];
    int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
    int64_t rs_b = p.rstride[b], os_a = p.ostride[a];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t batch = t / (ta * tb), tile = t % (ta * tb);
      int64_t a0 = (tile / tb) * kTile, b0 = (tile % tb) * kTile;
      int64_t a1 = std::min(na, a0 + kTile), b1 = std::min(nb, b0 + kTile);
      int64_t in = 0, out = 0, rem = batch;
      for (size_t d = r; d-- > 0;) {
        if (d == a || d == b) continue;
        int64_t i = rem % p.odims[d];
        rem /= p.odims[d];
        in += i * p.rstride[d];
        out += i * p.ostride[d];
      }
      for (int64_t i = a0; i < a1; ++i) {
        const U* s = src + in + i + b0 * rs_b;
        U* o = dst + out + i * os_a + b0;
        for (int64_t j = 0; j < b1 - b0; ++j) o[j] = s[j * rs_b];
      }
    }
  }
};

template <class U>
void run_plan(const Plan& p, const void* src_raw, void* dst_raw) {
  Mover<U> m{p, static_cast<const U*>(src_raw), static_cast<U*>(dst_raw)};
  size_t r = p.rank;
  if (p.rstride[r - 1] == 1) {  // innermost dim kept (includes the identity: one row)
    int64_t len = p.odims[r - 1], rows = p.numel / len;
    parallel_ranges(rows, len, 1, [&](int64_t r0, int64_t r1) { m.copy_rows(r0, r1); });
    return;
  }
  size_t a = 0;
  while (p.rstride[a] != 1) ++a;
  int64_t na = p.odims[a], nb = p.odims[r - 1];
  int64_t tiles = ((na + kTile - 1) / kTile) * ((nb + kTile - 1) / kTile);
  int64_t batches = p.numel / (na * nb);
  parallel_ranges(batches * tiles, kTile * kTile, 1, [&](int64_t t0, int64_t t1) { m.tiles(a, t0, t1); });
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
