// The kernel IR: what one generated kernel computes, kept apart from how it loops (codegen/schedule.h).
//
// A kernel runs over an iteration space of `rank` dims whose sizes arrive at run time (kernels are shape-generic:
// a new batch or sequence length reuses the compiled code). Its operands are the fused group's inputs and outputs
// (and views: inputs read through other strides, a Transpose's permuted, a [C] parameter's along its axis or a
// loss's targets once per row), each addressed through per-dim element strides that also arrive at run time; only
// how an operand moves along the innermost dim (contiguous, broadcast or strided) is fixed at compile time,
// because the vector loop depends on it.
//
// The computation is a DAG of scalar expressions in SSA order: loads, constants, element-wise math and row
// reductions (sum/max/min/prod over a row, the value being the same for the whole row). A row is the innermost
// dim; in a `columns` kernel it is dim rank-2 at each position of the innermost dim (Softmax over the channels of
// NCHW: the vectors run along the contiguous innermost dim, and each lane reduces its own column). A kernel with
// row reductions runs row by row (column by column); one without runs over any flat range of elements. Row
// reductions have one fixed association order (kReductionLanes interleaved partial results, then a halving
// tree; a column: element after element), so no schedule can change a result: vector width and unrolling only
// change how the same operations are grouped into instructions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace cuvil::codegen {

// Partial results a row reduction keeps: element i of a row goes to partial i % kReductionLanes.
constexpr int kReductionLanes = 32;

// The type an expression computes in. Storage dtypes map onto these (bool is stored as one byte; f16 and bf16
// load as f32 and are stored rounded to nearest even).
// f64 computes f64 tensors' arithmetic and f32 products (ReduceProd); f64 exp, log, tanh, erf, sin, cos, tan, atan,
// pow and the f64-only functions (expm1, sinh, ...) call the C library's functions, lane by lane (the results the
// reference kernels give).
// u64 is held in 64-bit integers like i64; comparisons, max/min, division and conversions treat it as unsigned.
enum class Scalar : uint8_t { f32, i32, i64, i1, f64, u64 };
const char* scalar_name(Scalar s);
inline bool is_float(Scalar s) { return s == Scalar::f32 || s == Scalar::f64; }
inline bool is_unsigned(Scalar s) { return s == Scalar::u64; }
inline bool is_integer(Scalar s) { return s == Scalar::i32 || s == Scalar::i64 || s == Scalar::u64; }

// How an operand's address moves along the innermost dim.
enum class Access : uint8_t { contiguous, broadcast, strided };
const char* access_name(Access a);

struct Operand {
  DType dtype = DType::f32;  // storage: f32, f16, bf16, f64, i8-i64, u8-u64 or bool
  Access inner = Access::contiguous;
  bool is_output = false;
  bool per_row = false;  // an output stored once per row (a reduction's result): inner access broadcast in a row
                         // kernel, contiguous in a columns kernel
  bool column_broadcast = false;  // columns kernels: the stride along the reduced dim (rank-2) is 0
  int entries = 0;  // > 0: an output holding this many values per row (TopK's), the k-th at k times its stride
                    // along the row (along the reduced dim, columns kernels)
};

// The ops, one row each in kernel_ops.def (what each computes, its arity, cost and type rule).
enum class Op : uint8_t {
#define CUVIL_KERNEL_OP(name, arity, kind, rule) name,
#include "codegen/kernel_ops.def"
#undef CUVIL_KERNEL_OP
};
constexpr int kScanExclusive = 1, kScanReverse = 2;
constexpr int kScanLanes = 16;
const char* op_name(Op op);
// How many operand expressions (a, b, c) the op reads.
int arity(Op op);
bool is_row_reduction(Op op);
// exp, log, tanh, erf, sin, cos, tan, atan, pow: polynomial code (or calls) several times the cost of a load and a
// store; fmod and the f64-only functions: calls.
bool is_transcendental(Op op);
// expm1, sinh, cosh, asin, acos, asinh, acosh, atanh: defined on f64 only.
bool f64_only(Op op);

struct Expr {
  Op op{};
  Scalar type = Scalar::f32;
  int a = -1, b = -1, c = -1;  // operand expressions (earlier indices)
  int operand = -1;            // load: which operand
  double imm = 0;              // constant value
};

struct Store {
  int operand = -1;  // an output operand
  int expr = -1;
};

struct Kernel {
  int rank = 1;  // iteration dims; the last is the innermost (and the reduced one in a row kernel)
  bool columns = false;  // with row reductions: they reduce dim rank-2, lane by lane along the innermost dim
  std::vector<Operand> operands;
  std::vector<Expr> exprs;
  std::vector<Store> stores;

  bool has_row_reductions() const;
  bool has_scans() const;
  bool has_shifted_loads() const;
  // Whether the kernel runs row by row (column by column): it has row reductions, scans or shifted loads.
  bool has_rows() const { return has_row_reductions() || has_scans() || has_shifted_loads(); }
  // Whether its scans run from the rows' ends (all of them do, or none).
  bool scans_reverse() const;
  // Whether expr i has one value per row (depends only on constants, loads broadcast along the row and row
  // reductions). In a columns kernel such values still vary along the innermost dim, lane by lane.
  std::vector<bool> row_uniform() const;
  // The row cache of a row kernel (not columns): the expression the last reduction pass reduces, when it is
  // transcendental per element, f32, and an element-level f32 output needs it again (Softmax's exp). The emitter
  // keeps its values from that pass for the output pass instead of computing them twice. -1 when there is none.
  int row_cache_expr() const;
  // Per-element expressions the output pass computes (a row kernel's last loop; all of an element-wise kernel)
  // whose math costs several times a load and a store: transcendental ones and divisions, the cached expression
  // and what only it needs not counted.
  int64_t output_pass_costly_exprs() const;
  // Checks the structural rules (operand indices, SSA order, types); throws on a malformed kernel.
  void validate() const;
  // Stable text form: the hash input and what `--dump-kernels` prints.
  std::string str() const;
  // FNV-1a 64 of str(): equal kernels hash equally across processes and machines.
  uint64_t hash() const;
};

Scalar scalar_of(DType storage);
uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace cuvil::codegen
