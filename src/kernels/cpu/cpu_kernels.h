// Fast hand-written CPU kernels for the ops oneDNN does not cover (element-wise, Softmax, LayerNormalization,
// transposes, ...): vectorizable loops, threaded with OpenMP (the thread count the runtime sets, shared with
// oneDNN). Each is tested against the reference kernel of its op.
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::cpu {

// A fast kernel for `n` at these input types, or null when there is none (the caller falls back).
std::unique_ptr<PreparedKernel> prepare_cpu_kernel(const Node& n, const std::vector<PrepareInput>& inputs);

}  // namespace cuvil::cpu
