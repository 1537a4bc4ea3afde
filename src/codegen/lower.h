// From graph ops to the kernel IR: which ops the generator computes (asked by the fuse-elementwise pass), and the
// lowering of a FusedKernel's body at concrete input shapes into a Kernel plus its run-time dims and strides.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "ir/graph.h"
#include "kernels/fusion_facts.h"

namespace cuvil::codegen {

// The storage dtypes generated kernels read and write: f32, f16, bf16, f64, the integers and bool.
bool storable_dtype(DType t);

// Whether generated code computes node n (its op, dtypes and attributes; shapes need only known ranks). When not,
// *why (if given) says what stands in the way.
bool can_generate(const Node& n, std::string* why = nullptr);

// The dims node n reduces, scans, looks across or selects from (kernels/fusion_facts.h): count 0 for element-wise
// ops; nullopt when the reduced axes are not one block or not known at compile time.
using ReducedBlock = cuvil::ReducedBlock;
std::optional<ReducedBlock> reduced_block(const Node& n);

// The axes a Reduce op (absent: all of them) or MeanVarianceNormalization reduces, normalized and sorted; nullopt
// when they are not constant, out of range, the input's rank is unknown, or a Reduce op's empty axes mean "none".
std::optional<std::vector<int64_t>> reduced_axes(const Node& n);
// What input i / output o of n is to a generated kernel (the roles of kernels/fusion_facts.h).
InputRole input_role(const Node& n, size_t i);
OutputRole output_role(const Node& n, size_t o);

// Whether input i of n is read at compile time (the Reduce ops' and CumSum's axes, TopK's K, Expand's shape): it
// stays a constant of the kernel's body, never one of the kernel's inputs.
bool is_axes_input(const Node& n, size_t i);

// The largest K a generated TopK takes: each lane keeps its K best pairs in registers.
constexpr int kMaxGeneratedTopK = 16;

// Whether input i of n must be one of the kernel's inputs, never a value computed inside the kernel: what is read
// through other strides than the iteration space's (a Transpose's input, LRN's window over the channels,
// per-axis parameters, a loss's targets and class weights) or checked before the kernel runs (integer divisors,
// signed integer exponents, a loss's targets). Fusion keeps the producers of such inputs out of the reader's
// group.
bool must_be_kernel_input(const Node& n, size_t i);

// What n's generated code costs LLVM, relative to one arithmetic op (FusionFacts::compile_weight).
int compile_weight(const Node& n);

// The facts above as the passes see them (kernels/fusion_facts.h); registered when this library loads.
const FusionFacts& generator_facts();

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
  // Kernel inputs holding signed integer exponents: a negative one runs the body op by op (InputRole::exponent).
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

// The stages of lower_body, in order, each with what it decides (lower_body.cpp):
//   block     every node generates; the block of dims the body reduces; the outputs that hold K values per row
//   space     the iteration space (every value broadcast together) and the row within it
//   operands  the body's inputs and outputs as operands, with element strides over the space
//   views     more operands on kernel inputs read through other strides (permuted, along an axis, per row)
//   merge     dims merged wherever every operand allows: the kernel's rank, dims and innermost access kinds
//   exprs     each node's formula from its lowering record, with the roundings and wraps of stored results
// An observer sees each stage's result as text (`cuvil inspect --kernels --stages`).
using StageObserver = std::function<void(const char* stage, const std::string& text)>;

// Lowers `body` (the region of a FusedKernel node) for inputs of these shapes. Operands are the body's inputs,
// then its outputs, then the views. Returns nullopt, with the reason in *why, when the body or the shapes fall
// outside what the generator handles (the caller then runs the body op by op).
std::optional<LoweredKernel> lower_body(const Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                        std::string* why, const StageObserver& observe = {});

}  // namespace cuvil::codegen
