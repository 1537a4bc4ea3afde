// Where the machine code of generated kernels comes from. The code generator's runtime half (lowering, the
// prepared kernel that runs the code) compiles nothing: it asks a KernelCodeSource. The LLVM backend
// (src/codegen/llvm, in the compiler library) installs its JIT as the process's compiler when it loads; an
// artifact (.cuv) brings its kernels linked ahead of time and serves them in a process without LLVM.
#pragma once

#include <cstdint>

#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"

namespace cuvil::codegen {

// The C signature of every generated kernel:
//   dims: kernel.rank sizes; strides: operand-major element strides; ptrs: one base pointer per operand.
// Element mode covers flat elements [begin, end) of the iteration space; row mode covers rows [begin, end).
using GeneratedFn = void (*)(const int64_t* dims, const int64_t* strides, void* const* ptrs, int64_t begin,
                             int64_t end);

class KernelCodeSource {
 public:
  virtual ~KernelCodeSource() = default;
  // The function computing `k` under `s`, or null when this source has none. Thread-safe. The code stays valid
  // while the source lives.
  virtual GeneratedFn find(const Kernel& k, const Schedule& s) = 0;
};

// The compiler of this process (the JIT), or null in a process that holds only the runtime library.
KernelCodeSource* process_compiler();
// Called by the LLVM backend once, while its library loads.
void set_process_compiler(KernelCodeSource* compiler);

}  // namespace cuvil::codegen
