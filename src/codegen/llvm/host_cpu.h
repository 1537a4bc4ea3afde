// This CPU as LLVM sees it (name and features), without starting the JIT: the model cache's `cpu` key part
// (python/cuvil/cache.py), asked before anything is compiled or loaded.
#pragma once

#include <string>

namespace cuvil::codegen {

// "znver4 +avx512f,-amx-tile,..." (features sorted).
std::string host_cpu_description();

}  // namespace cuvil::codegen
