// The emitter of one kernel (emit.h's emit_kernel): explicit vector code, every element-level value a <W x T>
// vector (W = the schedule's width), row-level values <1 x T>. The loops are written out rather than left to
// LLVM's vectorizers, so the reduction order of kernel_ir.h holds whatever the schedule, and tails use masked
// loads and stores instead of scalar remainders. One class, its parts in one file per concern:
//
//   emit.cpp         the function, its entry and the loop structure per kernel kind
//   loops.cpp        rows (offsets, per-row values and stores, the element loop) and columns (W lanes at a time)
//   values.cpp       the expression DAG at a vector of lanes; each kernel IR op's instructions; casts; libm calls
//   storage.cpp      loads (contiguous, broadcast, gathered, shifted) and the storage types' conversions
//   stores.cpp       element stores: masked, streaming (non-temporal); the row cache
//   reductions.cpp   row and column reductions, ArgMax/ArgMin pairs
//   scans.cpp        running sums along rows and down columns
//   topk.cpp         the TopK insertion network
//   vector_math.cpp  exp, log, tanh, erf, trigonometry, pow (a class of its own: VectorMath)
#pragma once

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/kernel_ir.h"
#include "codegen/llvm/control_flow.h"
#include "codegen/llvm/ir_helpers.h"
#include "codegen/llvm/vector_math.h"
#include "codegen/schedule.h"
#include "support/error.h"

namespace cuvil::codegen {

using llvm::Value;

class Emitter {
 public:
  Emitter(llvm::LLVMContext& c, llvm::Module& m, const Kernel& k, const Schedule& s)
      : C(c), M(m), B(c), K(k), S(s), uniform(k.row_uniform()), rounded_quotient(rounded_quotients(k)) {
    for (size_t i = 0; i < k.exprs.size(); ++i)
      if (k.exprs[i].op == Op::scan_sum) scans.push_back(int(i));
    float_round_trip = float_round_trips();
  }

  // Defines function `symbol` computing the kernel, for tm's CPU.
  void emit(const std::string& symbol, const llvm::TargetMachine& tm);

 private:
  llvm::LLVMContext& C;
  llvm::Module& M;
  llvm::IRBuilder<> B;
  const Kernel& K;
  const Schedule& S;
  std::vector<bool> uniform;
  std::vector<bool> rounded_quotient;  // per expression: an f32 divide by a constant that only round / is_nan read
  // per expression: a dequantized integer that is exactly `clamped - zero_point` in f32 (values.cpp)
  struct FloatRoundTrip {
    int clamped = -1;
    double zero_point = 0;
  };
  std::vector<FloatRoundTrip> float_round_trip;
  llvm::Function* F = nullptr;
  std::vector<Value*> dim;
  std::vector<std::vector<Value*>> stride;
  std::vector<Value*> ptr;
  std::vector<Value*> row_off;  // per operand: element offset of the current row's start
  bool avx512f = false, avx512vl = false;  // the target's, for the few x86 instructions used directly
  std::optional<VectorMath> math;          // (made once the target's features are known)
  std::vector<Value*> uval;     // per row-uniform expression: its <1 x T> value for the current row (columns
                                // kernels: <W x T>, one per lane's column)
  Value* column_pos = nullptr;  // columns kernels: the position down the columns being visited
  bool streaming = false;  // the element-level f32 outputs are being written with non-temporal stores

  // One vector position: W lanes starting at inner index j, with an optional mask of live lanes.
  struct Lanes {
    int w;
    Value* j;
    Value* mask;
  };

  // ---- emit.cpp
  void emit_loops(Value* begin, Value* end, Value* inner);
  void stretches(Value* begin, Value* end, Value* inner, const std::function<void(Value*, Value*, Value*)>& f);

  // ---- small helpers
  Value* iota(int w) {
    std::vector<llvm::Constant*> c;
    for (int i = 0; i < w; ++i) c.push_back(B.getInt64(uint64_t(i)));
    return llvm::ConstantVector::get(c);
  }
  Value* splat_i64(Value* v, int w) { return B.CreateVectorSplat(unsigned(w), v); }
  // The inner indices j, j + 1, ..., j + w - 1.
  Value* positions(Value* j, int w) { return B.CreateAdd(splat_i64(j, w), iota(w)); }
  Value* min64(Value* a, Value* b) { return B.CreateSelect(B.CreateICmpSLT(a, b), a, b); }
  Value* splat(Value* one, int w) {
    if (w == 1) return one;
    return B.CreateShuffleVector(one, std::vector<int>(size_t(w), 0));
  }
  Value* splat_i64_1(Value* v) {
    return B.CreateInsertElement(llvm::PoisonValue::get(vec(B.getInt64Ty(), 1)), v, uint64_t(0));
  }
  Value* arg1(int e) { return e < 0 ? nullptr : uval[size_t(e)]; }
  // for (iv = lo; iv < hi; iv += step) with loop-carried values; if (cond) vals = then(vals).
  Carried loop(Value* lo, Value* hi, Value* step, Carried init,
               const std::function<Carried(Value*, const Carried&)>& body) {
    return emit_loop(B, lo, hi, step, std::move(init), body);
  }
  Carried if_then(Value* cond, const Carried& vals, const std::function<Carried(Carried)>& then) {
    return emit_if(B, cond, vals, then);
  }

  // ---- loops.cpp
  void set_row_offsets(Value* row, size_t outer_dims);
  void begin_row(Value* row);
  void per_row_stores();
  void element_loop(Value* lo, Value* hi);
  void column_loop(Value* lo, Value* hi);
  void column_step(const Lanes& l);
  std::vector<bool> reduction_dependent() const;
  Value* column_value(const Expr& e, const Lanes& l);
  bool column_one_walk() const;
  void column_step_one_walk(const Lanes& l);
  void down_column(const std::vector<Value*>& base, Value* r);

  // ---- stores.cpp
  // The row cache: an expensive element value that the last reduction pass computes and the output pass needs
  // again (Softmax's exp) is written into an f32 output's buffer during that pass and read back from L1 in the
  // output pass instead of being recomputed.
  int cache_expr = -1, cache_operand = -1;
  static constexpr int kStackRowCache = 4096;  // floats: 16 KB, in L1 beside the row being read
  Value* stack_cache = nullptr;                // [kStackRowCache x float] in the entry block, when streaming
  Value* streaming_possible(Value* begin, Value* inner);
  // memo: values already computed at these lanes (a walk that also reduces them), else a fresh one
  void store_elements(const Lanes& l, std::vector<Value*>* memo = nullptr);
  void store_at(int operand, const Lanes& l, Value* v, bool stream = false);
  Value* access_cache(const Lanes& l, Value* v);
  void choose_cache();

  // ---- storage.cpp
  llvm::Type* scalar_ty(Scalar s);
  llvm::Type* storage_ty(DType d);
  Value* to_storage(Value* v, DType d);
  Value* from_storage(Value* v, DType d);
  Value* round_bf16(Value* v, bool truncate = false);
  Value* shifted_load(const Expr& x, const Lanes& l);
  Value* load(const Expr& x, const Lanes& l);

  // ---- values.cpp
  int element_operands(int e, int (&deps)[3]) const;
  Value* elem(int e, const Lanes& l, std::vector<Value*>& memo);
  Value* elem_at(int e, const Lanes& l, const std::vector<Value*>& memo);
  bool nonpositive(int e) const;
  Value* cast(Value* a, Scalar from, Scalar to, int w);
  Value* call_per_lane(const char* name, std::initializer_list<Value*> args);
  Value* compute(const Expr& x, Value* a, Value* b, Value* c, int w);
  static std::vector<bool> rounded_quotients(const Kernel& k);
  bool clamped_to_i32(int e) const;
  bool clamp_bounds(int e, int* t, double* lo, double* hi) const;
  bool integral(int e, int depth = 0) const;
  bool nan_free(int e, int depth = 0) const;
  std::vector<FloatRoundTrip> float_round_trips() const;
  Value* quotient_by_constant(Value* a, float divisor);

  // ---- reductions.cpp
  // ArgMax / ArgMin: (value, position) pairs. Which of two pairs wins does not depend on the order they meet (a
  // NaN first, then the larger or smaller value, then the earlier or later position), so partials combine as the
  // other reductions' do and give the sequential scan's answer.
  struct Arg {
    Value* v;
    Value* i;
  };
  static bool is_max_op(Op op) { return op == Op::row_max || op == Op::row_max_num; }
  Value* icmp_gt(Value* a, Value* b, bool u) { return u ? B.CreateICmpUGT(a, b) : B.CreateICmpSGT(a, b); }
  Value* reduce_column(const Expr& e, const Lanes& l, const std::vector<Value*>& base);
  Value* identity(Op op, llvm::Type* t, bool u = false);
  Value* combine(Op op, Value* acc, Value* v, bool u = false);
  Value* minmax(bool is_max, Value* a, Value* b, bool u = false);
  Value* arg_wins(const Expr& e, Arg a, Arg b);  // whether b beats a
  Arg arg_combine(const Expr& e, Arg a, Arg b);
  Arg arg_identity(const Expr& e, int w);
  Value* reduce_row_arg(const Expr& e);
  bool first_pass(const Expr& e) const;
  void prefetch_next_row(Value* j);
  Value* ordered_combine(Op op, Value* acc, Value* v);
  Value* reduce_row(const Expr& e);

  // ---- scans.cpp
  std::vector<int> scans;          // the scan expressions
  std::vector<Value*> scan_carry;  // per scan: the sum of the elements before this step (rows: every lane the
                                   // same; columns: each lane its column's)
  Carried scan_zeros(int w);
  void scan_loop(Value* lo, Value* hi);
  Value* scan(int e, Value* v, const Lanes& l);

  // ---- topk.cpp
  struct TopK {
    std::vector<Value*> val, idx;
  };
  std::map<size_t, TopK> topk;  // per row_topk expression: its K pairs for the current lanes (row)
  Value* topk_beats(const Expr& x, Value* v, Value* w, Value* at);
  Carried topk_insert(const Expr& x, const Carried& a, Value* v, Value* pos);
  Carried topk_empty(const Expr& x, int w);
  Value* reduce_row_topk(int e);
  Value* reduce_column_topk(int e, const Lanes& l, const std::vector<Value*>& base);
  void store_entries(const Store& s, const Lanes& l);
};

}  // namespace cuvil::codegen
