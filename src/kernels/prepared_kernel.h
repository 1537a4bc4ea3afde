// A kernel prepared for one node at one set of concrete input types (dtypes and shapes).
//
// The executor asks prepare_kernel() (runtime/kernel_selection.h) once per node and shape signature, keeps the
// result, and afterwards only calls run() with the tensors of that signature: whatever depends on shapes alone
// (oneDNN primitives, packed weights, loop bounds, tiling) is decided in prepare, so run() does only the
// arithmetic. Fast kernels never change a result beyond floating-point reassociation; the reference kernels
// (src/kernels/ref) are their oracle. This header, kernel_context.h and the other files directly in src/kernels/
// are the layer every kernel family (ref/, cpu/, onednn/, src/codegen) builds on; they know no family.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel_context.h"
#include "kernels/precision.h"

namespace cuvil {

class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
  // Inputs and outputs have the types given to prepare (outputs allocated by the runtime unless data-dependent).
  virtual void run(KernelContext& ctx) = 0;
  // What runs, for profiles: "onednn:brgconv:avx512_core", "cpu:softmax", "ref:Conv".
  virtual std::string impl_name() const = 0;
  // The precision this kernel multiplies at and, where that is not what was asked, why (set by the kernel or by
  // kernel selection; see kernels/precision.h).
  PrecisionDecision precision;
  // Why a faster path was passed over for this kernel ("no fast kernel covers Gather at i64[3]", the generator's
  // reason for a fused body run op by op), or why its last call took a slower path; empty when it did not. Kernel
  // selection records it; profiles show it.
  virtual std::string fallback() const { return fallback_; }
  void set_fallback(std::string why) { fallback_ = std::move(why); }

 private:
  std::string fallback_;
};

// What prepare_kernel may use.
struct KernelOptions {
  bool fast = true;                // false: reference kernels only (the oracle; for debugging and tests)
  std::set<OpKind> reference_ops;  // ops that always run on the reference kernels
  bool winograd = true;            // 3x3 stride-1 convolutions may use Winograd (rel. error ~1e-6, not ~1e-7)
  bool cpu_gemm = true;            // products with a constant B run Cuvil's AVX-512 GEMM (off: oneDNN's matmul)
  // FusedKernel nodes run generated code (src/codegen); off, or for a body holding one of `no_codegen_ops`, the
  // body runs op by op instead. The environment variable CUVIL_NO_CODEGEN (all, or op names separated by commas)
  // adds to these.
  bool codegen = true;
  std::set<OpKind> no_codegen_ops;
  // Nodes whose shapes vary between calls (symbolic dims) may run one shape-generic kernel for every shape
  // instead of a kernel prepared per shape signature (see prepare_shape_generic_kernel).
  bool shape_generic = true;
  // The lowest precision convolutions and matrix products may use (kernels/precision.h); fp32 lowers nothing.
  Precision precision = Precision::fp32;
  // At bf16, products whose output is a graph output (the final logits) stay f32 unless this is set. int8 takes
  // them either way: its kernels dequantize into an f32 output.
  bool lower_final_outputs = false;
};

// The input types a kernel is prepared for. `value` is set for inputs whose contents are fixed (constants such as
// weights), so a kernel may pre-pack them; otherwise null.
struct PrepareInput {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const Tensor* value = nullptr;
  bool present = false;
};

// The outputs' dims that inference gives `n` at these input types (empty for a data-dependent output).
std::vector<std::vector<int64_t>> infer_output_dims(const Node& n, const std::vector<PrepareInput>& inputs);

// Wraps a plain kernel function (the reference kernels, simple fast kernels without prepared state).
std::unique_ptr<PreparedKernel> wrap_kernel(KernelFn fn, std::string name);

}  // namespace cuvil
