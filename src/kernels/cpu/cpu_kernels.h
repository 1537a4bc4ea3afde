// Fast hand-written CPU kernels for the ops oneDNN does not cover (element-wise, Softmax, LayerNormalization,
// transposes, ...): vectorizable loops, threaded with OpenMP (the thread count the runtime sets, shared with
// oneDNN). Each is tested against the reference kernel of its op.
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::cpu {

// A fast kernel for `n` at these input types, or null when there is none (the caller falls back).
std::unique_ptr<PreparedKernel> prepare_cpu_kernel(const Node& n, const std::vector<PrepareInput>& inputs);

// MatMul, Gemm and FusedMatMul times a constant B on Cuvil's own product (kernels/cpu/gemm.h), where the CPU has
// AVX-512 and A has at least 16 rows; null otherwise. Preferred over oneDNN's matmul (KernelOptions::cpu_gemm).
std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs);
// The same for a node whose rows vary (symbolic dims): one kernel for every row count.
std::unique_ptr<PreparedKernel> prepare_shape_generic_matmul(const Node& n);

}  // namespace cuvil::cpu
