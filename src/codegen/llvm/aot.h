// Generated kernels compiled ahead of time for an artifact: each kernel's object (the JIT's code generation, so
// the same machine code the JIT would run) linked by lld, as a library, into one shared object whose exported
// functions the runtime library loads without LLVM (artifact/kernel_library.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "artifact/artifact.h"
#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"

namespace cuvil::codegen {

struct LinkedKernels {
  std::string shared_object;
  // Per kernel: its exported symbol and its lookup key (artifact::kernel_key).
  std::vector<std::pair<std::string, std::string>> symbols;
};

// `keys[i]` is kernels[i]'s lookup key. Throws cuvil::Error when code generation or the link fails.
LinkedKernels link_kernels(const std::vector<std::pair<Kernel, Schedule>>& kernels,
                           const std::vector<std::string>& keys);

// The LLVM version the kernels are compiled with.
const char* llvm_version();

// The generated kernels `g` runs (artifact::kernels_of), compiled and linked into `in`'s kernels section with
// their index, the CPU features they require and the LLVM version; nothing when `g` runs none.
void add_compiled_kernels(const std::shared_ptr<const Graph>& g, artifact::SaveInput& in);

}  // namespace cuvil::codegen
