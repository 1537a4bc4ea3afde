// Generated kernels as machine code in an artifact: which kernels a graph uses (asked of a recording source
// while an executor prepares it), and, at load, the artifact's shared object of those kernels loaded from memory
// (memfd + dlopen) and served by kernel text and schedule. The runtime library links no compiler: the shared
// object is made at save time by the compiler library (codegen/llvm/aot.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/kernel_code.h"
#include "ir/graph.h"

namespace cuvil::artifact {

using KernelList = std::vector<std::pair<codegen::Kernel, codegen::Schedule>>;

// What a kernel is looked up by: its text and schedule (no host or build: the shared object is the artifact's).
std::string kernel_key(const codegen::Kernel& k, const codegen::Schedule& s);

// The generated kernels an executor prepares for `g`: at its static input shapes, or with every symbolic dim at
// 1 and at 2 (other shapes that lower to other kernels are compiled by the loading process's compiler, when it
// has one, else run op by op). Empty when the graph has none.
KernelList kernels_of(const std::shared_ptr<const Graph>& g);

// The index section: per kernel its exported symbol and key, length-prefixed.
std::string kernel_index(const std::vector<std::pair<std::string, std::string>>& symbol_and_key);

// Loads the shared object (from memory) and resolves every indexed kernel. Throws cuvil::Error on a malformed
// index, a failed dlopen or a missing symbol.
std::shared_ptr<codegen::KernelCodeSource> open_kernel_library(std::string_view so, std::string_view index);

// The CPU features code compiled for `llvm_features` ("+avx2,+avx512f,-sse4a,...") needs, among those this
// build can test for.
std::vector<std::string> required_features(const std::string& llvm_features);

}  // namespace cuvil::artifact
