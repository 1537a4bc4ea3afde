// Internal to src/kernels/cpu: the kernel wrapper, OpenMP work splitting and the per-family prepare functions
// that cpu_kernels.cpp dispatches to.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "ir/ops/activation.h"
#include "kernels/cpu/workers.h"
#include "kernels/prepared_kernel.h"

// Hot loops are compiled once per ISA level and picked at load time (GCC's ifunc clones), because the library
// is built for baseline x86-64. The levels are the x86-64 feature levels (v4: AVX-512, v3: AVX2), checked by
// CPU features: "arch=<cpu model>" clones are picked only on that vendor's models, so an AMD Zen 4 ran the
// baseline SSE loops. Results do not depend on the clone: these files are built with -ffp-contract=off.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define CUVIL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CUVIL_CPU_CLONES
#endif

namespace cuvil::cpu {

// A prepared kernel whose shape-dependent decisions live in the captured state of `fn`.
class FnKernel final : public PreparedKernel {
 public:
  FnKernel(std::function<void(KernelContext&)> fn, std::string name) : fn_(std::move(fn)), name_(std::move(name)) {}
  void run(KernelContext& ctx) override { fn_(ctx); }
  std::string impl_name() const override { return name_; }

 private:
  std::function<void(KernelContext&)> fn_;
  std::string name_;
};

template <class Fn>
std::unique_ptr<PreparedKernel> make_kernel(Fn fn, std::string name) {
  return std::make_unique<FnKernel>(std::move(fn), "cpu:" + std::move(name));
}

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

// x[0 .. n) = a(x), in place, on the same vectorized loops as the unary kernels (a fused op's activation).
void activate_inplace(float* x, int64_t n, const nn::Activation& a);

// Per-family prepare functions: null when the family has no fast kernel for this node and these inputs.
std::unique_ptr<PreparedKernel> prepare_unary(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_binary(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_pow(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_softmax(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_layer_norm(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_transpose(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_reduce(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_slice(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_topk(const Node& n, const std::vector<PrepareInput>& inputs);

}  // namespace cuvil::cpu
