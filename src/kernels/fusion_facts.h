// What the kernel generator computes, as the graph passes see it: fuse-elementwise groups nodes into kernels by
// these facts; decompose-ops and split-reductions keep a rewrite only when its pieces generate. Passes reach them
// through PassContext::fusion and never include the generator: src/codegen implements FusionFacts (from its
// per-op lowering records) and registers it when its library loads; a process without a generator gets facts
// under which nothing generates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cuvil {

// The dims a node reduces (the Softmax family, LayerNormalization, the Reduce ops), scans (CumSum), looks across
// (LRN's window over the channels) or selects from (TopK): a block of `count` consecutive dims of its input
// followed by `after` dims that are not reduced (0: the block is trailing, a row kernel; otherwise a columns
// kernel). count 0 for element-wise ops. Blocks of different kinds never share a kernel (reductions run in passes
// before the output pass, where scans and windows work), nor do scans in opposite directions.
struct ReducedBlock {
  enum class Kind : uint8_t { reduce, scan, reverse_scan, window, select };
  int count = 0;
  int after = 0;
  Kind kind = Kind::reduce;
  bool operator==(const ReducedBlock&) const = default;
};

// What one input of a node is to a generated kernel.
enum class InputRole : uint8_t {
  element,     // read at each element of the iteration space, broadcast to it
  axes,        // read at compile time (a Reduce op's axes, CumSum's axis, TopK's K, Expand's shape): it stays a
               // constant of the kernel's body, never one of the kernel's inputs
  along_axis,  // one value per position along a dim of input 0, whatever its own rank (InstanceNormalization's
               // scale, per-axis quantization parameters, a loss's class weights): read as a view
  per_row,     // one value per row, in the space's shape without the reduced dims (a loss's targets): a view
  permuted,    // read through permuted strides (a Transpose's input): a view
  window,      // read at neighbouring positions along the row, from memory (LRN's input)
  divisor,     // divides integers: checked for zeros before the kernel runs
  exponent,    // a signed integer exponent tensor: checked for negative values before the kernel runs
};
// Whether an input in role r must be one of the kernel's inputs, never a value computed inside the kernel: what
// is read through other strides than the iteration space's or checked before the kernel runs. Fusion keeps the
// producers of such inputs out of the reader's group.
constexpr bool must_be_kernel_input(InputRole r) { return r != InputRole::element && r != InputRole::axes; }

// What one output of a node is to a generated kernel.
enum class OutputRole : uint8_t {
  element,      // one value per element of the iteration space
  per_row,      // one value per row, the reduced dims kept at size 1 (keepdims; LayerNormalization's statistics)
  row_dropped,  // one value per row, the reduced dims dropped (no keepdims; a loss)
  entries,      // K values per row (TopK): no element of the space, so nothing in the kernel reads it
};

class FusionFacts {
 public:
  virtual ~FusionFacts() = default;
  // Whether generated code computes node n (its op, dtypes and attributes; shapes need only known ranks). When
  // not, *why (if given) says what stands in the way.
  virtual bool can_generate(const Node& n, std::string* why = nullptr) const = 0;
  // The block n reduces (count 0: element-wise); nullopt when its axes are not one block or not known.
  virtual std::optional<ReducedBlock> reduced_block(const Node& n) const = 0;
  // The axes a reduction with axes (a Reduce op, MeanVarianceNormalization) reduces, normalized and sorted;
  // nullopt for other ops, or when the axes are not constant or not valid.
  virtual std::optional<std::vector<int64_t>> reduced_axes(const Node& n) const = 0;
  // Whether generated kernels read and write tensors of dtype t.
  virtual bool storable(DType t) const = 0;
  virtual InputRole input_role(const Node& n, size_t i) const = 0;
  virtual OutputRole output_role(const Node& n, size_t o) const = 0;
  // What n's generated code costs LLVM relative to one arithmetic op (8 for polynomial math or calls): LLVM's time
  // on a kernel grows faster than its length, so fusion bounds a kernel's total.
  virtual int compile_weight(const Node& n) const = 0;
  // Whether generated code would read n's input as vectors gathered from many rows (a Transpose that moves the
  // innermost dim): slower than n's own kernel, so n is left out of kernels.
  virtual bool gathers(const Node& n) const = 0;
};

// The facts of the generator linked into this process (none registered: facts under which nothing generates).
const FusionFacts& fusion_facts();
// Registers the generator's facts (src/codegen does, as its library loads); `facts` must outlive the process.
void register_fusion_facts(const FusionFacts* facts);

}  // namespace cuvil
