// From graph ops to the kernel IR: which ops the generator computes (asked by the fuse-elementwise pass), and the
// lowering of a FusedKernel's body at concrete input shapes into a Kernel plus its run-time dims and strides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "ir/graph.h"

namespace cuvil::codegen {

// The storage dtypes generated kernels read and write: f32, f16, bf16, f64, the integers and bool.
bool storable_dtype(DType t);

// Whether generated code computes node n (its op, dtypes and attributes; shapes need only known ranks). When not,
// *why (if given) says what stands in the way.
bool can_generate(const Node& n, std::string* why = nullptr);

// The dims node n reduces (Softmax family, LayerNormalization, the Reduce ops), scans (CumSum) or looks across
// (LRN's window over the channels): a block of `count` consecutive dims of its input followed by `after` dims
// that are not reduced (0: the block is trailing, a row kernel; otherwise a columns kernel). count 0 for
// element-wise ops; nullopt when the reduced axes are not one block or not known at compile time. Blocks of
// different kinds never share a kernel (reductions run in passes before the output pass, where scans and windows
// work), nor do scans in opposite directions.
struct ReducedBlock {
  enum class Kind : uint8_t { reduce, scan, reverse_scan, window, select };
  int count = 0;
  int after = 0;
  Kind kind = Kind::reduce;
  bool operator==(const ReducedBlock&) const = default;
};
std::optional<ReducedBlock> reduced_block(const Node& n);

// The Reduce ops: the reductions whose input 1 (axes) the kernel reads at compile time.
bool is_reduce_op(OpKind op);
// The axes a Reduce op (absent: all of them) or MeanVarianceNormalization reduces, normalized and sorted; nullopt
// when they are not constant, out of range, the input's rank is unknown, or a Reduce op's empty axes mean "none".
std::optional<std::vector<int64_t>> reduced_axes(const Node& n);
// Whether input i of n is read at compile time (the Reduce ops' and CumSum's axes, TopK's K): it stays a
// constant of the kernel's body, never one of the kernel's inputs.
bool is_axes_input(const Node& n, size_t i);

// The largest K a generated TopK takes: each lane keeps its K best pairs in registers.
constexpr int kMaxGeneratedTopK = 16;

// Whether input i of n divides integers (Div's and Mod's divisor; the base of an integer Pow with a negative
// constant exponent, x^-k = 1 / x^k) and is not a constant scalar: the kernel must read it as one of its inputs,
// which it checks for zeros before running (a value computed inside the kernel cannot be).
bool is_integer_divisor(const Node& n, size_t i);

// Whether input i of n is a signed integer exponent tensor of an integer Pow: the kernel must read it as one of
// its inputs, which it checks for negative values before running (0 to a negative power is an error the
// reference reports; the body then runs op by op).
bool is_signed_exponent(const Node& n, size_t i);

// Whether input i of n must be one of the kernel's inputs, never a value computed inside the kernel: what is read
// through other strides than the iteration space's (a Transpose's input, LRN's window over the channels,
// per-axis parameters, a loss's targets and class weights) or checked before the kernel runs (integer divisors,
// signed integer exponents, a loss's targets). Fusion keeps the producers of such inputs out of the reader's
// group.
bool must_be_kernel_input(const Node& n, size_t i);

// A kernel with what it runs over: the iteration dims after merging (dims.size() == kernel.rank) and, per operand,
// element strides over them (operand-major; 0 along broadcast dims).
struct LoweredKernel {
  Kernel kernel;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t rows = 1;     // product of all dims but the innermost (columns kernels: but the last two)
  int64_t reduced = 1;  // columns kernels: the reduced dim (rank-2)
  int64_t inner = 1;    // the innermost dim
  std::string ops;    // the body's ops, "Add+Softmax", for profiles
  // Operands after the outputs: kernel inputs read through other strides (a Transpose's permuted, a [C]
  // parameter's along its axis, a loss's targets once per row); each entry names the input whose buffer the
  // operand reads.
  std::vector<int> views;
  // Kernel inputs that divide integers: a zero among them must not reach the kernel (the reference reports it;
  // the prepared kernel checks and runs the body op by op instead).
  std::vector<int> nonzero_inputs;
  // Kernel inputs holding signed integer exponents: a negative one runs the body op by op (is_signed_exponent).
  std::vector<int> nonnegative_inputs;
  // Kernel inputs holding a loss's targets: each must be a class in [0, classes) or the ignored index. The
  // reference reports any other value, which the kernel would silently skip: the prepared kernel checks first
  // and runs the body op by op instead.
  struct ClassTargets {
    int input = -1;
    int64_t classes = 0;
    std::optional<int64_t> ignore;
    bool operator==(const ClassTargets&) const = default;
  };
  std::vector<ClassTargets> class_targets;
};

// Lowers `body` (the region of a FusedKernel node) for inputs of these shapes. Operands are the body's inputs,
// then its outputs, then the views. Returns nullopt, with the reason in *why, when the body or the shapes fall
// outside what the generator handles (the caller then runs the body op by op).
std::optional<LoweredKernel> lower_body(const Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                        std::string* why);

}  // namespace cuvil::codegen
