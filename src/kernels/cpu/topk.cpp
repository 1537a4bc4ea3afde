// TopK for the K the generated kernels do not hold in registers (above codegen::kMaxGeneratedTopK), with K a
// constant: X seen as [outer, n, inner], each of the outer * inner slices (a row, or a column when inner > 1)
// selected on its own, slices split between the threads.
//
// Per slice, a binary heap keeps the K best elements met so far (ranked as integers, below) with the worst on
// top. The first K elements fill it; a later element enters only when it ranks strictly before the top (it comes
// later, so an equal value loses), replacing the top, which sifts down. Once the heap holds good values most
// elements of a long slice are rejected by that one comparison: random data inserts about K ln(n / K) times. The
// heap is sorted at the end, best first. The order is the reference's: NaN above every number for largest
// (below, for smallest), equal values by position. The reference sorts every slice's positions instead
// (partial_sort over all n).
#include <algorithm>
#include <bit>
#include <functional>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

// Each element becomes one unsigned integer that orders as the reference ranks: the value mapped to an unsigned
// key whose order is the value's, best first (largest: NaN above +inf; smallest: the order reversed, NaN below
// everything; -0 counts as +0, equal values being ties), in the high half, and the position's complement in the
// low half (an earlier position ranks before a later one of the same value). Ranking is then one integer compare.
// 8-, 16- and 32-bit types take 32-bit keys in a u64 (positions below 2^32), 64-bit types 64-bit keys in a u128.
template <class T>
using Key = std::conditional_t<sizeof(compute_t<T>) == 8, uint64_t, uint32_t>;
template <class T>
using Ranked = std::conditional_t<sizeof(compute_t<T>) == 8, unsigned __int128, uint64_t>;

template <class T, bool kLargest>
inline Key<T> key_of(T stored) {
  using C = compute_t<T>;
  using K = Key<T>;
  constexpr int kBits = int(sizeof(K) * 8);
  constexpr K kTop = K(1) << (kBits - 1);
  C v = C(stored);
  K k;
  if constexpr (std::is_floating_point_v<C>) {
    using Bits = std::conditional_t<sizeof(C) == 8, uint64_t, uint32_t>;
    Bits b = std::bit_cast<Bits>(v == C(0) ? C(0) : v);  // -0 as +0
    k = (b & kTop) ? K(~b) : K(b | kTop);                 // increasing with the value
    if (v != v) k = kLargest ? ~K(0) : K(0);              // NaN: first among the largest, last among the smallest
    else if (!kLargest) k = ~k;
    return k;
  } else {
    k = std::is_signed_v<C> ? K(int64_t(v)) ^ kTop : K(v);  // two's complement with the top bit flipped: ordered
    return kLargest ? k : K(~k);
  }
}

// Whether any of x[0, n) beats the f32 value t at a later position: !(x <= t) (NaN included) for the largest,
// x < t for the smallest (t a number here); compiled per ISA level, where it vectorizes.
CUVIL_CPU_CLONES bool any_beats_f32(const float* x, int64_t n, float t, bool largest) {
  bool any = false;
  if (largest) {
    for (int64_t j = 0; j < n; ++j) any |= !(x[j] <= t);
  } else {
    for (int64_t j = 0; j < n; ++j) any |= x[j] < t;
  }
  return any;
}

// The k best of the n elements at x[0], x[stride], ... into vals/idx[0], [out_stride], ..., best first. heap:
// scratch of k entries, a min-heap (its top ranks last among those kept).
template <class T, bool kLargest>
void select_slice(const T* x, int64_t n, int64_t stride, int64_t k, T* vals, int64_t* idx, int64_t out_stride,
                  Ranked<T>* heap) {
  using R = Ranked<T>;
  constexpr int kShift = int(sizeof(Key<T>) * 8);
  constexpr R kLow = (R(1) << kShift) - 1;
  auto ranked = [&](int64_t j) { return R(key_of<T, kLargest>(x[j * stride])) << kShift | (kLow - R(j)); };
  std::greater<R> min_heap;
  for (int64_t j = 0; j < k; ++j) heap[j] = ranked(j);
  std::make_heap(heap, heap + k, min_heap);
  // A later element enters when its key beats the top's (an equal key ranks after: its position is later); it
  // replaces the top, which sifts down.
  auto insert = [&](int64_t j) {
    R e = ranked(j);
    int64_t at = 0;
    for (;;) {
      int64_t c = 2 * at + 1;
      if (c >= k) break;
      if (c + 1 < k && heap[c + 1] < heap[c]) ++c;
      if (!(heap[c] < e)) break;
      heap[at] = heap[c];
      at = c;
    }
    heap[at] = e;
  };
  auto top_key = [&] { return Key<T>(heap[0] >> kShift); };
  if (stride == 1) {
    // Blocks of 64: one vectorized test against the top, then the few that enter one by one. f32 compares values
    // while the top is a number; other types, and f32 under a NaN top, compare keys.
    constexpr int64_t kBlock = 64;
    auto top_value = [&] { return x[int64_t(kLow - (heap[0] & kLow))]; };
    for (int64_t j0 = k; j0 < n; j0 += kBlock) {
      int64_t j = j0, j1 = std::min(n, j0 + kBlock);
      if constexpr (std::is_same_v<T, float>) {
        float t = top_value();
        if (t == t) {
          if (!any_beats_f32(x + j0, j1 - j0, t, kLargest)) continue;
          for (; j < j1 && t == t; ++j)
            if (kLargest ? !(x[j] <= t) : x[j] < t) {
              insert(j);
              t = top_value();
            }
        }
      } else {
        Key<T> t = top_key();
        bool any = false;
        for (int64_t i = j0; i < j1; ++i) any |= key_of<T, kLargest>(x[i]) > t;
        if (!any) continue;
      }
      for (; j < j1; ++j)
        if (key_of<T, kLargest>(x[j]) > top_key()) insert(j);
    }
  } else {
    for (int64_t j = k; j < n; ++j)
      if (key_of<T, kLargest>(x[j * stride]) > top_key()) insert(j);
  }
  std::sort_heap(heap, heap + k, min_heap);  // descending: best first
  for (int64_t j = 0; j < k; ++j) {
    int64_t pos = int64_t(kLow - (heap[j] & kLow));
    vals[j * out_stride] = x[pos * stride];  // the stored element itself
    if (idx) idx[j * out_stride] = pos;
  }
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_topk(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.size() < 2 || !inputs[0].present || !inputs[1].present || !inputs[1].value) return nullptr;
  const Tensor& kt = *inputs[1].value;
  if (kt.numel() != 1 || kt.rank() > 1 || !is_integer(kt.dtype())) return nullptr;  // the reference reports it
  const std::vector<int64_t>& shape = inputs[0].shape;
  int64_t rank = int64_t(shape.size()), axis = AttrReader(n).i("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return nullptr;
  int64_t outer = 1, len = shape[size_t(axis)], inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= shape[size_t(d)];
    if (d > axis) inner *= shape[size_t(d)];
  }
  int64_t k = kt.get_i64(0);
  if (k < 1 || k > len || inputs[0].dtype == DType::boolean) return nullptr;  // (K = 0: nothing to select)
  if (len > (int64_t(1) << 32) - 1) return nullptr;  // positions must fit the low half of a 32-bit key's word
  bool largest = AttrReader(n).i("largest") != 0;
  DType dt = inputs[0].dtype;
  return make_kernel(
      [=](KernelContext& ctx) {
        const Tensor& x = ctx.input(0);
        Tensor& values = ctx.output(0);
        int64_t* ip = ctx.num_outputs() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
        visit_dtype(dt, [&]<class T>() {
          if constexpr (!std::is_same_v<T, bool>) {
            const T* xp = x.data<T>();
            T* vp = values.data<T>();
            // Slices in order (o, i): neighbouring columns share the cache lines they read. One slice stays on
            // the calling thread.
            // Waking sleeping workers costs more than a small selection gains (the generated kernels' rule, in
            // element operations; an element of a selection counts as eight: TopK 50 of [256, 1000], 2.2 ms on
            // one thread, 1.2 on two).
            int64_t min_work = workers_spinning() ? int64_t(1) << 16 : int64_t(1) << 20;
            parallel_ranges(outer * inner, outer * inner > 1 ? 8 * len : 1, 1, [&](int64_t s0, int64_t s1) {
              std::vector<Ranked<T>> heap(static_cast<size_t>(k));
              for (int64_t s = s0; s < s1; ++s) {
                int64_t o = s / inner, i = s % inner;
                const T* slice = xp + o * len * inner + i;
                T* v = vp + o * k * inner + i;
                int64_t* ix = ip ? ip + o * k * inner + i : nullptr;
                if (largest) select_slice<T, true>(slice, len, inner, k, v, ix, inner, heap.data());
                else select_slice<T, false>(slice, len, inner, k, v, ix, inner, heap.data());
              }
            }, min_work);
          }
        });
      },
      "topk:heap");
}

}  // namespace cuvil::cpu
