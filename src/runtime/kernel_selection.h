// Kernel selection: which prepared kernel runs a node (kernels/prepared_kernel.h). The runtime chooses among the
// kernel families below it (generated code, Cuvil's CPU kernels, oneDNN, the reference kernels); no family knows
// the others.
#pragma once

#include <memory>
#include <vector>

#include "codegen/kernel_code.h"
#include "kernels/prepared_kernel.h"

namespace cuvil {

// The fastest available kernel for `n` at these input types; the reference kernel when nothing faster applies.
// Generated kernels take their code from `code` (an artifact's), else from the process's compiler.
std::unique_ptr<PreparedKernel> prepare_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                               const KernelOptions& options,
                                               const std::shared_ptr<codegen::KernelCodeSource>& code = nullptr);

// A kernel that serves every input shape the node's IR types allow, prepared once per node, or null when there is
// none (or the node's shapes are static, where a kernel per shape is faster). Used for matrix products whose
// rows or batch vary: a new batch or sequence length then prepares nothing for them (a shape-specific oneDNN
// primitive costs 0.3-1 ms to create), at a steady-state cost of about -15..+25 % on those products. Off with
// KernelOptions::shape_generic = false.
std::unique_ptr<PreparedKernel> prepare_shape_generic_kernel(const Node& n, const KernelOptions& options);

}  // namespace cuvil
