// Kernel IR -> LLVM IR (the emitter: emitter.h lists its parts). Only the files of src/codegen/llvm/ include LLVM
// headers (they cost seconds per TU, and the runtime library links no LLVM). The generated function has the
// signature of GeneratedFn (kernel_code.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/kernel_code.h"
#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace cuvil::codegen {

// A module holding one function `symbol` that computes `k` as scheduled, targeted at `tm`'s CPU.
std::unique_ptr<llvm::Module> emit_kernel(llvm::LLVMContext& ctx, const llvm::TargetMachine& tm, const Kernel& k,
                                          const Schedule& s, const std::string& symbol);

}  // namespace cuvil::codegen
