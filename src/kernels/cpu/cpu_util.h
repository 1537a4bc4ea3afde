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
#include "kernels/parallel.h"
#include "kernels/workers.h"
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
std::unique_ptr<PreparedKernel> prepare_concat(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_resize(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_topk(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_dynamic_quantize(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_pad(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_recurrent(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_tree_ensemble(const Node& n, const std::vector<PrepareInput>& inputs);

}  // namespace cuvil::cpu
