// OpenMP work splitting shared by every kernel family (Cuvil's CPU kernels, oneDNN wrappers, generated kernels)
// and the runtime's copies: how many threads a piece of work pays for, and a split into one range per thread.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/workers.h"

namespace cuvil::cpu {

// Below this much work (in elements touched) a fork/join costs more than it saves: run on the calling thread.
inline constexpr int64_t kMinParallelWork = 32 * 1024;

// How many threads to use for `work` elements: none below `min_work`, and each gets at least min_work / 2.
inline int threads_for(int64_t work, int64_t min_work = kMinParallelWork) {
  if (work < min_work || omp_in_parallel()) return 1;
  int64_t by_work = work / std::max<int64_t>(min_work / 2, 1);
  return int(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), by_work)));
}

// Runs fn(begin, end) over a split of [0, n) into one contiguous range per thread. Range starts are multiples
// of `align` items (64-byte lines for floats with align 16), so threads do not write the same cache line.
// `cost` is the work per item, to decide whether threads pay off against `min_work`.
template <class Fn>
void parallel_ranges(int64_t n, int64_t cost, int64_t align, Fn&& fn, int64_t min_work = kMinParallelWork) {
  if (n <= 0) return;
  int nt = threads_for(n * std::max<int64_t>(cost, 1), min_work);
  if (nt <= 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    // The team may be smaller than asked (OMP_DYNAMIC, OMP_THREAD_LIMIT): split by the threads that came.
    int64_t team = omp_get_num_threads();
    int64_t chunk = (n + team - 1) / team;
    chunk = (chunk + align - 1) / align * align;
    int64_t begin = int64_t(omp_get_thread_num()) * chunk;
    int64_t end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  }
  note_parallel_end();
}

}  // namespace cuvil::cpu
