// Whether the OpenMP workers are still spinning after the last parallel region (a fork then costs ~3 us) or have
// gone to sleep (waking one costs 80-400 us on these virtual machines). libgomp's workers spin GOMP_SPINCOUNT
// times after a region before sleeping: ~200 us at the 10000 the scripts set (measured: fork + join 3 us up to
// 160 us after a region, 13 us at 320, 76-86 us from 640 on), milliseconds at libgomp's default, not at all with
// OMP_WAIT_POLICY=passive. Parallel regions note when they end; kernels whose work pays for a second thread only
// while it is awake (a LayerNorm right after a matrix product) ask before forking.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace cuvil::cpu {

// Well inside the spin at GOMP_SPINCOUNT=10000.
inline constexpr int64_t kSpinWindowNs = 100'000;

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace detail {
inline std::atomic<int64_t> last_region_end_ns{std::numeric_limits<int64_t>::min() / 2};
}  // namespace detail

// Called by the calling thread after each multi-threaded region (Cuvil's loops, the GEMM, oneDNN primitives).
inline void note_parallel_end() { detail::last_region_end_ns.store(now_ns(), std::memory_order_relaxed); }

// Whether a parallel region ended less than kSpinWindowNs before `now` (never under OMP_WAIT_POLICY=passive).
bool workers_spinning(int64_t now = now_ns());

}  // namespace cuvil::cpu
