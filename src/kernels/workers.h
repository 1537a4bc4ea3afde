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

// ---- Threads under load
// A parallel region ends at a barrier: every thread of the team must have run its share. When other processes
// keep the cores busy, a worker woken for a region waits for a time slice, and each region costs milliseconds
// (MobileNetV2 at 2 threads: 16-70 ms against 9-15 ms at 1 thread on this loaded 2-core machine; all-MiniLM-L6-v2
// 1156 against 186 ms, while ONNX Runtime, whose calling thread takes every chunk no worker claimed, stayed at
// its 1-thread time). So the executor asks before each kernel how many threads the machine has free, and runs
// with no more: threads not held by other runnable tasks (the kernel's count of running tasks in /proc/loadavg,
// read at most every kLoadRecheckNs), at least 1.

// Re-read the machine's runnable tasks at most this often (a read costs 5-25 us here).
inline constexpr int64_t kLoadRecheckNs = 2'000'000;
// After a parallel region, our own workers may spin (and count as running) this long: GOMP_SPINCOUNT=10000 spins
// ~0.2 ms, libgomp's default (when torch loaded it before Cuvil could set the variable) milliseconds.
inline constexpr int64_t kOwnSpinNs = 5'000'000;

// The tasks running or runnable now from /proc/loadavg's text ("0.52 0.58 0.59 3/512 12345": the 3), or -1.
int parse_runnable_tasks(const char* loadavg);
// Threads to use out of `want` on a machine of `cores` CPUs where `runnable` tasks run or wait, `own` of them
// this process's (the caller and the workers still spinning): the cores the others leave free, at least 1.
int threads_given_load(int want, int cores, int runnable, int own);
// threads_given_load for this machine now (cached for kLoadRecheckNs across threads); `want` when the load
// cannot be read, `want` <= 1, or CUVIL_IGNORE_LOAD=1 is set.
int threads_free(int want, int64_t now = now_ns());

}  // namespace cuvil::cpu
