// Per-op lowering records: everything the code generator knows about one graph op, in one place. Each op that
// generates has one record, written in src/codegen/ops/<family>.cpp and collected into one table indexed by
// OpKind (op_lowering()); can_generate, the iteration block, lower_body and the fusion facts the passes see read
// the records, never op kinds. Adding an element-wise op with generated code means adding its record (usually
// `supports` and `lower`); the defaults describe a plain element-wise op.
//
// A lowering writes the op's formula as its reference kernel (src/kernels/ref) has it, into an ExprBuilder, from
// the expressions of its inputs (-1 for absent inputs and for those read at compile time, InputRole::axes).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "codegen/expr_builder.h"
#include "codegen/lower.h"
#include "ir/op_schema.h"
#include "support/error.h"

namespace cuvil::codegen {

// What input i of a node is to the kernel (kernels/fusion_facts.h has the roles), with what its view needs.
struct InputUse {
  InputRole role = InputRole::element;
  int64_t axis = -1;          // along_axis: the dim of input 0 the input runs along; per_row with class targets:
                              // the dim of input 0 holding the classes
  std::vector<int64_t> perm;  // permuted: the permutation it is read through (a Transpose's)
  // per_row: the values are class indices, each checked before the run to be a class or `ignore` (a loss's
  // targets; the reference reports any other value, which the kernel would silently skip)
  bool class_targets = false;
  std::optional<int64_t> ignore;
};

// What output o of a node is to the kernel, with the count of values per row of an `entries` output.
struct OutputUse {
  OutputRole role = OutputRole::element;
  int64_t entries = 0;
};

// How a node's stored results relate to its inputs' values, which decides what a 16-bit float or narrow integer
// result needs: computed values round to the stored type (f16/bf16) and wrap into it (i8 ... u32); picked ones are
// one of the inputs' values, already within the type (no wrap); passed ones are an input's value itself (neither).
enum class Stores : uint8_t { computed, picked, passed };

struct OpLowering {
  // Whether the op generates at n's dtypes and attributes, once the generic checks passed (storable dtypes, known
  // output ranks, f64 only where `f64`); when not, *why says what stands in the way. Null: always.
  bool (*supports)(const Node& n, std::string* why) = nullptr;
  // Whether f64 tensors generate: the lowering is arithmetic, or calls the C library for f64 (exp, log, ..., the
  // f64-only functions), or composes those without an f32-specific cut-off.
  bool f64 = false;
  // The block of n's input (of known rank `rank`) it reduces; null: element-wise (count 0).
  std::optional<ReducedBlock> (*block)(const Node& n, int64_t rank) = nullptr;
  // Reductions with axes (the Reduce ops, MeanVarianceNormalization): the axes, normalized and sorted.
  std::optional<std::vector<int64_t>> (*axes)(const Node& n, int64_t rank) = nullptr;
  // Input and output roles; null: every one an element.
  InputUse (*input)(const Node& n, size_t i) = nullptr;
  OutputUse (*output)(const Node& n, size_t o) = nullptr;
  Stores stores = Stores::computed;
  bool truncates_bf16 = false;  // a bf16 result drops its low bits (Cast, unless round_bf16) instead of rounding
  // What its code costs LLVM relative to one arithmetic op: 8 for polynomial math or per-lane calls (exp, log,
  // tanh, erf and their compositions, pow, fmod).
  int compile_weight = 1;
  // Writes the op's formula: out[o] for each output, from the expressions of the inputs `in`. False (with *why)
  // when this instance cannot generate after all (the body then runs op by op).
  bool (*lower)(ExprBuilder& L, const Node& n, const std::vector<int>& in, std::vector<int>& out,
                std::string* why) = nullptr;
};

// A lowering function's signature, for the families' definitions.
#define CUVIL_LOWERING(name)                                                                              \
  bool name([[maybe_unused]] ExprBuilder& L, [[maybe_unused]] const Node& n,                              \
            [[maybe_unused]] const std::vector<int>& in, [[maybe_unused]] std::vector<int>& out,          \
            [[maybe_unused]] std::string* why)

// The lowering of ops that are one kernel IR op on their only input.
template <Op op>
CUVIL_LOWERING(lower_unary) {
  out[0] = L.un(op, in[0]);
  return true;
}

// The records by OpKind; each family's file adds its ops' records.
class LoweringTable {
 public:
  void add(OpKind op, OpLowering record) {
    CUVIL_ASSERT(!records_[size_t(op)], "op ", op_name(op), " has two lowering records");
    CUVIL_ASSERT(record.lower, "the lowering record of ", op_name(op), " has no lowering");
    records_[size_t(op)] = record;
  }
  const OpLowering* find(OpKind op) const {
    const auto& r = records_[size_t(op)];
    return r ? &*r : nullptr;
  }

 private:
  std::array<std::optional<OpLowering>, kNumOps> records_{};
};

// The record of op, or null when the op has no generated form.
const OpLowering* op_lowering(OpKind op);
// The role of input i / output o of n by its record (elements where it has none).
InputUse input_use(const Node& n, size_t i);
OutputUse output_use(const Node& n, size_t o);

// The families (src/codegen/ops/<family>.cpp).
void add_unary_lowerings(LoweringTable& t);          // math functions, logic and tests on one value
void add_activation_lowerings(LoweringTable& t);     // Relu, Sigmoid, Gelu, Elu, Clip, ...
void add_trigonometry_lowerings(LoweringTable& t);   // sin ... atan and the hyperbolic and inverse functions
void add_binary_lowerings(LoweringTable& t);         // arithmetic, comparisons, logic, variadic folds
void add_power_lowerings(LoweringTable& t);          // Pow of every base and exponent type
void add_conversion_lowerings(LoweringTable& t);     // Cast, Identity, Dropout, Expand, Transpose, (De)Quantize
void add_reduction_lowerings(LoweringTable& t);      // the Reduce ops, ArgMax/ArgMin
void add_normalization_lowerings(LoweringTable& t);  // the Softmax family, the normalizations, LRN
void add_scan_select_lowerings(LoweringTable& t);    // CumSum, TopK
void add_loss_lowerings(LoweringTable& t);           // NegativeLogLikelihoodLoss per element

// ---- helpers the records share (op_lowering.cpp)

// The floats generated kernels compute on (f16 and bf16 in f32, rounded where the graph stores them; f64 in f64).
bool floating(DType t);
// Integers held in i32 (i8, u8, i16, u16) or i64 (u32) keep the value the narrow type stores: each op's result
// wraps back into it (wrap_s/wrap_u) as the reference's store does. u64 computes as itself (Scalar::u64).
bool narrow_int(DType t);
bool numeric(DType t);
// Whether every present input of n has a dtype for which pred holds.
bool all_inputs(const Node& n, bool (*pred)(DType));

// Sets *why (if given) to the arguments' text and returns false.
template <class... Args>
bool refuse(std::string* why, const Args&... args) {
  if (why) *why = str_cat(args...);
  return false;
}
// The common refusals: only floats / only numbers.
bool floats_only(const Node& n, std::string* why);
bool numbers_only(const Node& n, std::string* why);

// The value of a one-element tensor as a kernel immediate (a double): nullopt for an integer beyond what a double
// holds exactly (2^53 and up, unless representable), which the kernel cannot carry.
std::optional<double> immediate_i64(int64_t v);
std::optional<double> immediate(const Tensor& t);
// The constant scalar value of input i, when it has one a kernel immediate holds.
std::optional<double> scalar_input(const Node& n, size_t i);
// Axes counted from the back where negative, sorted and distinct; nullopt when one is out of range.
std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank);
// The rank of input i of n; -1 when it is absent or its rank is unknown.
int64_t input_rank(const Node& n, size_t i);
// The block sorted, distinct axes form; nullopt when there are none or they are not consecutive.
std::optional<ReducedBlock> block_of(const std::vector<int64_t>& axes, int64_t rank);
// The block the axes form once those of static size 1 in n's input are dropped: they reduce nothing (the default
// [0, 2, 3] of MeanVarianceNormalization, or PyTorch's mean over (0, 2, 3), at batch 1 is the block [2, 3]).
std::optional<ReducedBlock> block_of_sized(std::vector<int64_t> axes, const Node& n, int64_t rank);
// One dim at attribute `axis` of n: a block of one, of `kind` (a reduction over it, a scan, a selection).
std::optional<ReducedBlock> axis_block(const Node& n, int64_t rank, ReducedBlock::Kind kind);

}  // namespace cuvil::codegen
