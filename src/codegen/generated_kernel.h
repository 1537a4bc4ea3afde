// The prepared kernel of a FusedKernel node: its body lowered at the input shapes, compiled (or found in the JIT
// cache) and run over the iteration space split across the runtime's threads.
#pragma once

#include <memory>
#include <vector>

#include "codegen/kernel_code.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "kernels/prepared_kernel.h"

namespace cuvil::codegen {

// The schedule a lowered kernel runs with (vector width, unrolling, streaming stores).
Schedule choose_schedule(const LoweredKernel& lk);

// Null when code generation is off for this node (KernelOptions), its body falls outside what the generator
// handles at these shapes, or no code is to be had: `code` (an artifact's kernels; may be null) is asked first,
// then the process's compiler (kernel_code.h), absent without LLVM. The caller then runs the body op by op;
// *why (if given) then says why (empty when `n` is no FusedKernel), for the profile.
std::unique_ptr<PreparedKernel> prepare_generated_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                         const KernelOptions& options,
                                                         const std::shared_ptr<KernelCodeSource>& code = nullptr,
                                                         std::string* why = nullptr);

}  // namespace cuvil::codegen
