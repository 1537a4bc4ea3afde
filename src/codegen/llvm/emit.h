// Kernel IR -> LLVM IR (the emitter: emitter.h lists its parts). src/codegen/llvm and jit.cpp are the only places
// that include LLVM headers (they cost seconds per TU).
//
// The generated function has the C signature
//   void kernel(const int64_t* dims, const int64_t* strides, void* const* ptrs, int64_t begin, int64_t end)
// dims: kernel.rank sizes; strides: operand-major element strides; ptrs: one base pointer per operand.
// Element mode covers flat elements [begin, end) of the iteration space; row mode covers rows [begin, end).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace cuvil::codegen {

using GeneratedFn = void (*)(const int64_t* dims, const int64_t* strides, void* const* ptrs, int64_t begin,
                          int64_t end);

// A module holding one function `symbol` that computes `k` as scheduled, targeted at `tm`'s CPU.
std::unique_ptr<llvm::Module> emit_kernel(llvm::LLVMContext& ctx, const llvm::TargetMachine& tm, const Kernel& k,
                                          const Schedule& s, const std::string& symbol);

}  // namespace cuvil::codegen
