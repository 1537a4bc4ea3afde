// Emits explicit vector code: every element-level value is a <W x T> vector (W = the schedule's width), row-level
// values are <1 x T>. The loops are written out here rather than left to LLVM's vectorizers, so the reduction order
// of kernel_ir.h holds whatever the schedule, and tails use masked loads and stores instead of scalar remainders.
//
// Math: exp, log, tanh and erf are straight-line polynomial code (no calls), the same algorithms as
// src/kernels/cpu/vec_math.h with fused multiply-adds; sin, cos, tan, atan and pow compute in f64 (sin/cos/tan with
// an exact reduction by pi/2 for every finite float). Bounds, measured against the C library over wide sweeps and
// every binade in tests/unit/codegen_test.cpp: exp and log within 2 ulp, tanh and erf within 3e-7 relative
// (absolute near 0 where the result is tiny), sin, cos, tan, atan and pow within 1 ulp. NaN propagates; exp
// over/underflows to inf/0; log(0) = -inf, log(<0) = NaN; sin/cos/tan(+-inf) = NaN.
// f64 math and fmod (any float type) call the C library per lane instead (call_per_lane): the reference kernels'
// own results, bit for bit.
#include "codegen/llvm/emit.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <span>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "support/erf_polynomial.h"
#include "support/exp_polynomial.h"
#include "support/error.h"

namespace cuvil::codegen {

namespace {

using llvm::Value;

class Emitter {
 public:
  Emitter(llvm::LLVMContext& c, llvm::Module& m, const Kernel& k, const Schedule& s)
      : C(c), M(m), B(c), K(k), S(s), uniform(k.row_uniform()) {
    for (size_t i = 0; i < k.exprs.size(); ++i)
      if (k.exprs[i].op == Op::scan_sum) scans.push_back(int(i));
  }

  void emit(const std::string& symbol, const llvm::TargetMachine& tm) {
    auto* ptr_ty = llvm::PointerType::get(C, 0);
    auto* i64 = B.getInt64Ty();
    auto* fty = llvm::FunctionType::get(B.getVoidTy(), {ptr_ty, ptr_ty, ptr_ty, i64, i64}, false);
    F = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, M);
    F->addFnAttr(llvm::Attribute::NoUnwind);
    F->addFnAttr("target-cpu", tm.getTargetCPU());
    F->addFnAttr("target-features", tm.getTargetFeatureString());
    llvm::StringRef features = tm.getTargetFeatureString();
    avx512f = features.contains("+avx512f");
    avx512vl = features.contains("+avx512vl");
    // Without these, tuning for recent Xeons splits 512-bit vectors in two.
    F->addFnAttr("prefer-vector-width", "512");
    F->addFnAttr("min-legal-vector-width", "512");
    auto arg = F->arg_begin();
    Value* dims_p = &*arg++;
    Value* strides_p = &*arg++;
    Value* ptrs_p = &*arg++;
    Value* begin = &*arg++;
    Value* end = &*arg++;
    auto* entry = llvm::BasicBlock::Create(C, "entry", F);
    B.SetInsertPoint(entry);
    size_t rank = size_t(K.rank), nops = K.operands.size();
    for (size_t d = 0; d < rank; ++d)
      dim.push_back(B.CreateLoad(i64, B.CreateConstGEP1_64(i64, dims_p, d), "dim" + std::to_string(d)));
    stride.resize(nops);
    for (size_t o = 0; o < nops; ++o) {
      for (size_t d = 0; d < rank; ++d)
        stride[o].push_back(B.CreateLoad(i64, B.CreateConstGEP1_64(i64, strides_p, o * rank + d)));
      ptr.push_back(B.CreateLoad(ptr_ty, B.CreateConstGEP1_64(ptr_ty, ptrs_p, o)));
    }
    Value* inner = dim[rank - 1];
    if (K.has_row_reductions() && !K.columns) choose_cache();
    if (cache_expr >= 0 && S.streaming_stores) {
      auto* buf = B.CreateAlloca(llvm::ArrayType::get(B.getFloatTy(), kStackRowCache));
      buf->setAlignment(llvm::Align(64));
      stack_cache = buf;
    }
    if (Value* aligned = streaming_possible(begin, inner)) {
      // Two copies of the loops: streaming stores where every streamed output and every row start is aligned to
      // the vector, plain stores otherwise (vmovntps faults on a misaligned address).
      auto* nt = llvm::BasicBlock::Create(C, "streaming", F);
      auto* plain = llvm::BasicBlock::Create(C, "plain", F);
      B.CreateCondBr(aligned, nt, plain);
      B.SetInsertPoint(nt);
      streaming = true;
      emit_loops(begin, end, inner);
      // Streaming stores are weakly ordered: fenced before the caller (or another thread) reads the output.
      B.CreateCall(llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::x86_sse_sfence));
      B.CreateRetVoid();
      B.SetInsertPoint(plain);
      streaming = false;
    }
    emit_loops(begin, end, inner);
    B.CreateRetVoid();
    std::string err;
    llvm::raw_string_ostream os(err);
    CUVIL_CHECK(!llvm::verifyFunction(*F, &os), "internal error: generated kernel does not verify: ", os.str());
  }

 private:
  llvm::LLVMContext& C;
  llvm::Module& M;
  llvm::IRBuilder<> B;
  const Kernel& K;
  const Schedule& S;
  std::vector<bool> uniform;
  llvm::Function* F = nullptr;
  std::vector<Value*> dim;
  std::vector<std::vector<Value*>> stride;
  std::vector<Value*> ptr;
  std::vector<Value*> row_off;  // per operand: element offset of the current row's start
  bool avx512f = false, avx512vl = false;  // the target's, for the few x86 instructions used directly
  std::vector<Value*> uval;     // per row-uniform expression: its <1 x T> value for the current row (columns
                                // kernels: <W x T>, one per lane's column)
  llvm::GlobalVariable* pi_table = nullptr;  // two_over_pi_table, created on first use
  Value* column_pos = nullptr;  // columns kernels: the position down the columns being visited

  bool streaming = false;  // the element-level f32 outputs are being written with non-temporal stores

  // Rows [begin, end) (row kernels), flat elements [begin, end) (element-wise kernels) or flat positions of the
  // outer rows x the innermost dim (columns kernels).
  void emit_loops(Value* begin, Value* end, Value* inner) {
    if (K.columns) {
      stretches(begin, end, inner, [&](Value* row, Value* col, Value* cnt) {
        set_row_offsets(row, size_t(K.rank) - 2);
        column_loop(col, B.CreateAdd(col, cnt));
      });
      return;
    }
    if (K.has_rows()) {
      loop(begin, end, B.getInt64(1), {}, [&](Value* row, const std::vector<Value*>&) {
        begin_row(row);
        per_row_stores();
        element_loop(B.getInt64(0), inner);
        return std::vector<Value*>{};
      });
      return;
    }
    // Flat elements [begin, end): one stretch of a row at a time.
    stretches(begin, end, inner, [&](Value* row, Value* col, Value* cnt) {
      begin_row(row);
      element_loop(col, B.CreateAdd(col, cnt));
    });
  }

  // Flat positions [begin, end) over rows of `inner` positions, one stretch of a row at a time: f(row, first
  // position in the row, count).
  void stretches(Value* begin, Value* end, Value* inner, const std::function<void(Value*, Value*, Value*)>& f) {
    auto* head = llvm::BasicBlock::Create(C, "pos.head", F);
    auto* body = llvm::BasicBlock::Create(C, "pos.body", F);
    auto* exit = llvm::BasicBlock::Create(C, "pos.exit", F);
    llvm::BasicBlock* pre = B.GetInsertBlock();
    B.CreateBr(head);
    B.SetInsertPoint(head);
    llvm::PHINode* pos = B.CreatePHI(B.getInt64Ty(), 2, "pos");
    pos->addIncoming(begin, pre);
    B.CreateCondBr(B.CreateICmpSLT(pos, end), body, exit);
    B.SetInsertPoint(body);
    Value* row = B.CreateUDiv(pos, inner);
    Value* col = B.CreateSub(pos, B.CreateMul(row, inner));
    Value* cnt = min64(B.CreateSub(inner, col), B.CreateSub(end, pos));
    f(row, col, cnt);
    Value* next = B.CreateAdd(pos, cnt);
    pos->addIncoming(next, B.GetInsertBlock());
    B.CreateBr(head);
    B.SetInsertPoint(exit);
  }

  // With Schedule::streaming_stores: the run-time condition under which the element-level f32 outputs may be
  // written with non-temporal stores (each dense with its base aligned to 64 bytes, rows a multiple of 16
  // elements, and an element-wise kernel's range starting at a multiple of 16, so that every full vector store
  // is aligned), or null when the kernel has nothing to stream. Masked tail stores stay plain.
  Value* streaming_possible(Value* begin, Value* inner) {
    int w = S.vector_width;
    if (!S.streaming_stores || K.columns || (w != 4 && w != 8 && w != 16)) return nullptr;
    Value* ok = nullptr;
    for (const Store& s : K.stores) {
      const Operand& o = K.operands[size_t(s.operand)];
      if (o.per_row || o.dtype != DType::f32) continue;
      Value* p = ptr[size_t(s.operand)];
      Value* a = B.CreateICmpEQ(B.CreateAnd(B.CreatePtrToInt(p, B.getInt64Ty()), B.getInt64(63)), B.getInt64(0));
      for (size_t d = 0; d < stride[size_t(s.operand)].size(); ++d) {
        // Dense: the innermost stride 1 and each outer stride the product of the dims inside it.
        Value* want = B.getInt64(1);
        for (size_t e = d + 1; e < dim.size(); ++e) want = B.CreateMul(want, dim[e]);
        a = B.CreateAnd(a, B.CreateICmpEQ(stride[size_t(s.operand)][d], want));
      }
      ok = ok ? B.CreateAnd(ok, a) : a;
    }
    if (!ok) return nullptr;
    auto multiple_of_16 = [&](Value* x) { return B.CreateICmpEQ(B.CreateAnd(x, B.getInt64(15)), B.getInt64(0)); };
    ok = B.CreateAnd(ok, multiple_of_16(inner));
    if (stack_cache) ok = B.CreateAnd(ok, B.CreateICmpSLE(inner, B.getInt64(kStackRowCache)));
    return K.has_rows() ? ok : B.CreateAnd(ok, multiple_of_16(begin));
  }

  // One vector position: W lanes starting at inner index j, with an optional mask of live lanes.
  struct Lanes {
    int w;
    Value* j;
    Value* mask;
  };

  // ---- types and constants
  llvm::Type* scalar_ty(Scalar s) {
    switch (s) {
      case Scalar::f32: return B.getFloatTy();
      case Scalar::i32: return B.getInt32Ty();
      case Scalar::i64: case Scalar::u64: return B.getInt64Ty();
      case Scalar::i1: return B.getInt1Ty();
      case Scalar::f64: return B.getDoubleTy();
    }
    return nullptr;
  }
  llvm::Type* storage_ty(DType d) {
    if (d == DType::boolean || d == DType::i8 || d == DType::u8) return B.getInt8Ty();
    if (d == DType::i16 || d == DType::u16) return B.getInt16Ty();
    if (d == DType::u32) return B.getInt32Ty();
    if (d == DType::bf16) return B.getInt16Ty();  // bits; widened by shifting into an f32's high half
    if (d == DType::f16) return B.getHalfTy();
    return scalar_ty(scalar_of(d));
  }
  llvm::Type* vec(llvm::Type* t, int w) { return llvm::FixedVectorType::get(t, unsigned(w)); }
  int width(Value* v) { return int(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements()); }
  Value* fc(Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
  Value* ic(llvm::Type* t, int64_t v) { return llvm::ConstantInt::get(t, uint64_t(v), true); }
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

  // ---- loops: for (iv = lo; iv < hi; iv += step) with loop-carried values
  using Carried = std::vector<Value*>;
  Carried loop(Value* lo, Value* hi, Value* step, Carried init,
               const std::function<Carried(Value*, const Carried&)>& body) {
    llvm::BasicBlock* pre = B.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(C, "loop.head", F);
    auto* bb = llvm::BasicBlock::Create(C, "loop.body", F);
    auto* exit = llvm::BasicBlock::Create(C, "loop.exit", F);
    B.CreateBr(head);
    B.SetInsertPoint(head);
    llvm::PHINode* iv = B.CreatePHI(B.getInt64Ty(), 2, "iv");
    iv->addIncoming(lo, pre);
    Carried phis;
    for (Value* v : init) {
      llvm::PHINode* p = B.CreatePHI(v->getType(), 2);
      p->addIncoming(v, pre);
      phis.push_back(p);
    }
    B.CreateCondBr(B.CreateICmpSLT(iv, hi), bb, exit);
    B.SetInsertPoint(bb);
    Carried next = body(iv, phis);
    Value* ivn = B.CreateAdd(iv, step);
    llvm::BasicBlock* latch = B.GetInsertBlock();
    B.CreateBr(head);
    iv->addIncoming(ivn, latch);
    for (size_t i = 0; i < phis.size(); ++i) llvm::cast<llvm::PHINode>(phis[i])->addIncoming(next[i], latch);
    B.SetInsertPoint(exit);
    return phis;
  }

  // if (cond) vals = then(vals): the values after, merged.
  Carried if_then(Value* cond, const Carried& vals, const std::function<Carried(Carried)>& then) {
    llvm::BasicBlock* pre = B.GetInsertBlock();
    auto* bb = llvm::BasicBlock::Create(C, "if.then", F);
    auto* done = llvm::BasicBlock::Create(C, "if.done", F);
    B.CreateCondBr(cond, bb, done);
    B.SetInsertPoint(bb);
    Carried after = then(vals);
    llvm::BasicBlock* end = B.GetInsertBlock();
    B.CreateBr(done);
    B.SetInsertPoint(done);
    Carried merged;
    for (size_t i = 0; i < vals.size(); ++i) {
      llvm::PHINode* p = B.CreatePHI(vals[i]->getType(), 2);
      p->addIncoming(vals[i], pre);
      p->addIncoming(after[i], end);
      merged.push_back(p);
    }
    return merged;
  }

  // ---- rows
  // row_off for flat index `row` over the first `outer_dims` dims.
  void set_row_offsets(Value* row, size_t outer_dims) {
    size_t nops = K.operands.size();
    row_off.assign(nops, B.getInt64(0));
    Value* rem = row;
    for (size_t d = outer_dims; d-- > 0;) {
      Value* idx = d == 0 ? rem : B.CreateURem(rem, dim[d]);
      if (d > 0) rem = B.CreateUDiv(rem, dim[d]);
      for (size_t o = 0; o < nops; ++o) row_off[o] = B.CreateAdd(row_off[o], B.CreateMul(idx, stride[o][d]));
    }
  }

  void begin_row(Value* row) {
    set_row_offsets(row, size_t(K.rank) - 1);
    // Row-level values in SSA order: each row reduction runs its own pass over the row.
    uval.assign(K.exprs.size(), nullptr);
    for (size_t i = 0; i < K.exprs.size(); ++i) {
      if (!uniform[i]) continue;
      const Expr& e = K.exprs[i];
      if (e.op == Op::row_topk) uval[i] = reduce_row_topk(int(i));
      else if (e.op == Op::row_topk_index) uval[i] = topk[size_t(e.a)].idx[0];
      else if (is_row_reduction(e.op)) uval[i] = reduce_row(e);
      else if (e.op == Op::load) uval[i] = load(e, {1, B.getInt64(0), nullptr});
      else if (e.op == Op::row_size) uval[i] = B.CreateSIToFP(splat_i64_1(dim[size_t(K.rank) - 1]), vec(scalar_ty(e.type), 1));
      else uval[i] = compute(e, arg1(e.a), arg1(e.b), arg1(e.c), 1);
    }
  }
  Value* splat_i64_1(Value* v) { return B.CreateInsertElement(llvm::PoisonValue::get(vec(B.getInt64Ty(), 1)), v, uint64_t(0)); }
  Value* arg1(int e) { return e < 0 ? nullptr : uval[size_t(e)]; }

  void per_row_stores() {
    for (const Store& s : K.stores) {
      const Operand& o = K.operands[size_t(s.operand)];
      if (!o.per_row) continue;
      if (o.entries > 0) {  // TopK's K pairs, one after another along the output's row
        store_entries(s, {1, B.getInt64(0), nullptr});
        continue;
      }
      Value* v = to_storage(uval[size_t(s.expr)], o.dtype);
      Value* p = B.CreateGEP(storage_ty(o.dtype), ptr[size_t(s.operand)], row_off[size_t(s.operand)]);
      B.CreateAlignedStore(B.CreateExtractElement(v, uint64_t(0)), p, llvm::Align(dtype_size(o.dtype)));
    }
  }

  // Element-level stores for inner indices [lo, hi): W*U per iteration, then masked W-wide steps.
  void element_loop(Value* lo, Value* hi) {
    bool any = false;
    for (const Store& s : K.stores) any = any || !K.operands[size_t(s.operand)].per_row;
    if (!any) return;
    if (!scans.empty()) return scan_loop(lo, hi);
    int w = S.vector_width, u = S.unroll;
    Value* span = B.CreateSub(hi, lo);
    Value* main_end = B.CreateAdd(lo, B.CreateMul(B.CreateSDiv(span, B.getInt64(w * u)), B.getInt64(w * u)));
    loop(lo, main_end, B.getInt64(w * u), {}, [&](Value* j, const Carried&) {
      for (int q = 0; q < u; ++q) store_elements({w, B.CreateAdd(j, B.getInt64(q * w)), nullptr});
      return Carried{};
    });
    loop(main_end, hi, B.getInt64(w), {}, [&](Value* j, const Carried&) {
      Value* lanes = positions(j, w);
      Value* mask = B.CreateICmpSLT(lanes, B.CreateVectorSplat(unsigned(w), hi));
      store_elements({w, j, mask});
      return Carried{};
    });
  }

  // ---- scans: running sums carried from step to step along the row (or down the columns)
  std::vector<int> scans;            // the scan expressions
  std::vector<Value*> scan_carry;    // per scan: the sum of the elements before this step (rows: every lane the
                                     // same; columns: each lane its column's)
  Carried scan_zeros(int w) {
    Carried z;
    for (int e : scans) z.push_back(llvm::Constant::getNullValue(vec(scalar_ty(K.exprs[size_t(e)].type), w)));
    return z;
  }
  // Row kernels: kScanLanes-wide steps from the row's start (or its end), carrying the running sums; the step
  // holding the row's tail (masked) comes last (or first). The width is the kernel IR's, not the schedule's: it
  // fixes how the sums associate. No unrolling: each step waits for the one before.
  void scan_loop(Value* lo, Value* hi) {
    int w = kScanLanes;
    Value* main_end = B.CreateAdd(lo, B.CreateMul(B.CreateSDiv(B.CreateSub(hi, lo), B.getInt64(w)), B.getInt64(w)));
    auto step = [&](Value* j, Value* mask, const Carried& c) {
      scan_carry = c;
      store_elements({w, j, mask});
      return scan_carry;
    };
    auto tail = [&](Value* j) { return B.CreateICmpSLT(positions(j, w), B.CreateVectorSplat(unsigned(w), hi)); };
    if (!K.scans_reverse()) {
      Carried c = loop(lo, main_end, B.getInt64(w), scan_zeros(w),
                       [&](Value* j, const Carried& a) { return step(j, nullptr, a); });
      loop(main_end, hi, B.getInt64(w), c, [&](Value* j, const Carried& a) { return step(j, tail(j), a); });
      return;
    }
    Carried c = if_then(B.CreateICmpSLT(main_end, hi), scan_zeros(w),
                        [&](Carried a) { return step(main_end, tail(main_end), a); });
    Value* full = B.CreateSDiv(B.CreateSub(main_end, lo), B.getInt64(w));
    loop(B.getInt64(0), full, B.getInt64(1), c, [&](Value* q, const Carried& a) {
      return step(B.CreateSub(main_end, B.CreateMul(B.CreateAdd(q, B.getInt64(1)), B.getInt64(w))), nullptr, a);
    });
  }
  // The value of scan expression e at these lanes, v being its operand's; advances its carry. Columns: each
  // lane adds its element to its own column's sum, in the reference's order. Rows: the running sum within the
  // vector (log2 W shifted adds; masked-off lanes count 0), plus the carry; the carry becomes the last lane's
  // (the first's, from the end).
  Value* scan(int e, Value* v, const Lanes& l) {
    const Expr& x = K.exprs[size_t(e)];
    size_t k = size_t(std::find(scans.begin(), scans.end(), e) - scans.begin());
    bool exclusive = (int(x.imm) & kScanExclusive) != 0, reverse = (int(x.imm) & kScanReverse) != 0;
    bool f = is_float(x.type);
    auto add = [&](Value* a, Value* b) { return f ? B.CreateFAdd(a, b) : B.CreateAdd(a, b); };
    Value* carry = scan_carry[k];
    if (K.columns) {
      Value* incl = add(carry, v);
      scan_carry[k] = incl;
      return exclusive ? carry : incl;
    }
    Value* zero = llvm::Constant::getNullValue(v->getType());
    if (l.mask) v = B.CreateSelect(l.mask, v, zero);
    auto shifted = [&](Value* p, int by) {  // lane i takes lane i - by (from the end: i + by); 0 past the edge
      std::vector<int> idx;
      for (int i = 0; i < l.w; ++i) {
        int src = reverse ? i + by : i - by;
        idx.push_back(src < 0 || src >= l.w ? l.w + i : src);
      }
      return B.CreateShuffleVector(p, zero, idx);
    };
    Value* p = v;
    for (int by = 1; by < l.w; by *= 2) p = add(p, shifted(p, by));
    Value* incl = add(carry, p);
    scan_carry[k] = B.CreateShuffleVector(incl, std::vector<int>(size_t(l.w), reverse ? 0 : l.w - 1));
    return exclusive ? add(carry, shifted(p, 1)) : incl;
  }

  // ---- columns: W lanes of the innermost dim at a time (no unrolling: each step holds its own loops), a masked
  // step for the tail.
  void column_loop(Value* lo, Value* hi) {
    int w = S.vector_width;
    Value* main_end = B.CreateAdd(lo, B.CreateMul(B.CreateSDiv(B.CreateSub(hi, lo), B.getInt64(w)), B.getInt64(w)));
    loop(lo, main_end, B.getInt64(w), {}, [&](Value* j, const Carried&) {
      column_step({w, j, nullptr});
      return Carried{};
    });
    loop(main_end, hi, B.getInt64(w), {}, [&](Value* j, const Carried&) {
      Value* lanes = positions(j, w);
      column_step({w, j, B.CreateICmpSLT(lanes, B.CreateVectorSplat(unsigned(w), hi))});
      return Carried{};
    });
  }

  // The column-level values of these lanes (uval holds them W wide), the per-row outputs, then one more walk
  // down the columns for the element-level outputs.
  void column_step(const Lanes& l) {
    const std::vector<Value*> base = row_off;
    Value* rows = dim[size_t(K.rank) - 2];
    uval.assign(K.exprs.size(), nullptr);
    for (size_t i = 0; i < K.exprs.size(); ++i) {
      if (!uniform[i]) continue;
      const Expr& e = K.exprs[i];
      if (e.op == Op::row_topk) uval[i] = reduce_column_topk(int(i), l, base);
      else if (e.op == Op::row_topk_index) uval[i] = topk[size_t(e.a)].idx[0];
      else if (is_row_reduction(e.op)) uval[i] = reduce_column(e, l, base);
      else if (e.op == Op::load) uval[i] = load(e, l);
      else if (e.op == Op::row_size) uval[i] = splat(B.CreateSIToFP(splat_i64_1(rows), vec(scalar_ty(e.type), 1)), l.w);
      else uval[i] = compute(e, arg1(e.a), arg1(e.b), arg1(e.c), l.w);
    }
    bool elements = false;
    for (const Store& s : K.stores) {
      const Operand& o = K.operands[size_t(s.operand)];
      if (o.entries > 0) store_entries(s, l);
      else if (o.per_row) store_at(s.operand, l, to_storage(uval[size_t(s.expr)], o.dtype));
      else elements = true;
    }
    if (elements)  // (from the columns' ends when the scans run that way)
      loop(B.getInt64(0), rows, B.getInt64(1), scan_zeros(l.w), [&](Value* r, const Carried& c) {
        scan_carry = c;
        down_column(base, K.scans_reverse() ? B.CreateSub(B.CreateSub(rows, B.getInt64(1)), r) : r);
        store_elements(l);
        return scan_carry;
      });
    row_off = base;
  }
  // ---- TopK: per lane, the K best (value, position) pairs of its column so far, best first, in registers.
  // Positions arrive in order, so an element enters where it beats a pair strictly (equal values keep the
  // earlier first); slots not yet filled (position -1) lose to everything. Each element is inserted by a
  // network of selects: slot k takes slot k-1's pair where the element beats slot k-1, the element where it
  // beats slot k only, else keeps its own.
  struct TopK {
    std::vector<Value*> val, idx;
  };
  std::map<size_t, TopK> topk;  // per row_topk expression: its K pairs for the current lanes (row)
  // Whether v (at a later position) goes before the pair (w, at) of row_topk x.
  Value* topk_beats(const Expr& x, Value* v, Value* w, Value* at) {
    bool largest = x.imm > 0;
    Value* empty = B.CreateICmpSLT(at, llvm::Constant::getNullValue(at->getType()));
    Value* better;
    if (v->getType()->isFPOrFPVectorTy()) {
      Value* vn = B.CreateFCmpUNO(v, v);
      Value* wn = B.CreateFCmpUNO(w, w);
      better = largest ? B.CreateOr(B.CreateAnd(vn, B.CreateNot(wn)), B.CreateFCmpOGT(v, w))
                       : B.CreateOr(B.CreateAnd(wn, B.CreateNot(vn)), B.CreateFCmpOLT(v, w));
    } else {
      bool u = is_unsigned(x.type);
      better = largest ? icmp_gt(v, w, u) : icmp_gt(w, v, u);
    }
    return B.CreateOr(empty, better);
  }
  // Pairs `a` (K values, then K positions) with (v, pos) entered where it belongs.
  Carried topk_insert(const Expr& x, const Carried& a, Value* v, Value* pos) {
    size_t k = a.size() / 2;
    Carried next(2 * k);
    Value* prev_beaten = nullptr;  // the element beats slot q - 1
    for (size_t q = 0; q < k; ++q) {
      Value* b = topk_beats(x, v, a[q], a[k + q]);
      Value* nv = B.CreateSelect(b, v, a[q]);
      Value* ni = B.CreateSelect(b, pos, a[k + q]);
      if (prev_beaten) {
        nv = B.CreateSelect(prev_beaten, a[q - 1], nv);
        ni = B.CreateSelect(prev_beaten, a[k + q - 1], ni);
      }
      next[q] = nv, next[k + q] = ni;
      prev_beaten = b;
    }
    return next;
  }
  Carried topk_empty(const Expr& x, int w) {
    size_t k = size_t(std::abs(int64_t(x.imm)));
    Carried init;
    for (size_t q = 0; q < k; ++q) init.push_back(llvm::Constant::getNullValue(vec(scalar_ty(x.type), w)));
    for (size_t q = 0; q < k; ++q) init.push_back(llvm::ConstantInt::get(vec(B.getInt64Ty(), w), uint64_t(-1), true));
    return init;
  }
  // Row kernels: one set of pairs for the row. W elements at a time are compared with the last pair; the few
  // that beat it enter one by one, in order.
  Value* reduce_row_topk(int e) {
    const Expr& x = K.exprs[size_t(e)];
    int w = std::min(S.vector_width, 64);  // (the lanes that beat are found through a 64-bit mask)
    Value* inner = dim[size_t(K.rank) - 1];
    Value* main_end = B.CreateMul(B.CreateSDiv(inner, B.getInt64(w)), B.getInt64(w));
    auto step = [&](Value* j, Value* mask, const Carried& a) {
      size_t k = a.size() / 2;
      std::vector<Value*> memo(K.exprs.size(), nullptr);
      Value* v = elem(x.a, {w, j, mask}, memo);
      Value* b = topk_beats(x, v, splat(a[k - 1], w), splat(a[2 * k - 1], w));
      if (mask) b = B.CreateAnd(mask, b);
      // The lanes that beat it, lowest first: one per set bit of the mask.
      llvm::Type* bits_ty = B.getIntNTy(unsigned(w));
      Value* bits = B.CreateZExt(B.CreateBitCast(b, bits_ty), B.getInt64Ty());
      Value* count = B.CreateZExt(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, B.CreateBitCast(b, bits_ty)),
                                  B.getInt64Ty());
      Carried c = a;
      c.push_back(bits);
      Carried done = loop(B.getInt64(0), count, B.getInt64(1), c, [&](Value*, const Carried& d) {
        Value* rest = d.back();
        Value* lane = B.CreateIntrinsic(llvm::Intrinsic::cttz, {B.getInt64Ty()}, {rest, B.getTrue()});
        Value* ve = B.CreateInsertElement(llvm::PoisonValue::get(d[0]->getType()), B.CreateExtractElement(v, lane),
                                          uint64_t(0));
        Carried next = topk_insert(x, Carried(d.begin(), d.end() - 1), ve, splat_i64_1(B.CreateAdd(j, lane)));
        next.push_back(B.CreateAnd(rest, B.CreateSub(rest, B.getInt64(1))));
        return next;
      });
      done.pop_back();
      return done;
    };
    Carried acc = loop(B.getInt64(0), main_end, B.getInt64(w), topk_empty(x, 1),
                       [&](Value* j, const Carried& a) { return step(j, nullptr, a); });
    acc = loop(main_end, inner, B.getInt64(w), acc, [&](Value* j, const Carried& a) {
      return step(j, B.CreateICmpSLT(positions(j, w), B.CreateVectorSplat(unsigned(w), inner)), a);
    });
    TopK& t = topk[size_t(e)];
    size_t k = acc.size() / 2;
    t.val.assign(acc.begin(), acc.begin() + long(k));
    t.idx.assign(acc.begin() + long(k), acc.end());
    return t.val[0];
  }
  Value* reduce_column_topk(int e, const Lanes& l, const std::vector<Value*>& base) {
    const Expr& x = K.exprs[size_t(e)];
    size_t k = size_t(std::abs(int64_t(x.imm)));
    Carried init = topk_empty(x, l.w);
    Value* rows = dim[size_t(K.rank) - 2];
    Carried acc = loop(B.getInt64(0), rows, B.getInt64(1), init, [&](Value* r, const Carried& a) {
      down_column(base, r);
      std::vector<Value*> memo(K.exprs.size(), nullptr);
      Value* v = elem(x.a, l, memo);
      Value* pos = splat_i64(r, l.w);
      // Most elements beat no lane's last pair once the pairs fill: one compare, and the network is skipped.
      Value* any = B.CreateOrReduce(topk_beats(x, v, a[k - 1], a[2 * k - 1]));
      return if_then(any, a, [&](Carried c) { return topk_insert(x, c, v, pos); });
    });
    row_off = base;
    TopK& t = topk[size_t(e)];
    t.val.assign(acc.begin(), acc.begin() + long(k));
    t.idx.assign(acc.begin() + long(k), acc.end());
    return t.val[0];
  }
  // The K entries of a TopK output at these lanes (a row kernel: one lane): entry q at q times the output's
  // stride along the row (down the columns).
  void store_entries(const Store& s, const Lanes& l) {
    const Expr& x = K.exprs[size_t(s.expr)];
    const TopK& t = topk.at(size_t(x.op == Op::row_topk ? s.expr : x.a));
    const Operand& o = K.operands[size_t(s.operand)];
    size_t along = size_t(K.rank) - (K.columns ? 2 : 1);
    Value* saved = row_off[size_t(s.operand)];
    for (size_t q = 0; q < t.val.size(); ++q) {
      row_off[size_t(s.operand)] = B.CreateAdd(saved, B.CreateMul(B.getInt64(q), stride[size_t(s.operand)][along]));
      store_at(s.operand, l, to_storage(x.op == Op::row_topk ? t.val[q] : t.idx[q], o.dtype));
    }
    row_off[size_t(s.operand)] = saved;
  }

  // Element after element down the columns of these lanes (masked-off lanes compute garbage nobody stores).
  Value* reduce_column(const Expr& e, const Lanes& l, const std::vector<Value*>& base) {
    bool arg = e.op == Op::row_argmax || e.op == Op::row_argmin;
    Carried init;
    if (arg) {
      Arg ident = arg_identity(e, l.w);
      init = {ident.v, ident.i};
    } else {
      init = {identity(e.op, vec(scalar_ty(e.type), l.w), is_unsigned(e.type))};
    }
    Value* rows = dim[size_t(K.rank) - 2];
    Carried acc = loop(B.getInt64(0), rows, B.getInt64(1), init, [&](Value* r, const Carried& a) {
      down_column(base, r);
      std::vector<Value*> memo(K.exprs.size(), nullptr);
      Value* v = elem(e.a, l, memo);
      if (!arg) return Carried{combine(e.op, a[0], v, is_unsigned(e.type))};
      Arg c = arg_combine(e, {a[0], a[1]}, {v, splat_i64(r, l.w)});
      return Carried{c.v, c.i};
    });
    row_off = base;
    return acc[arg ? 1 : 0];
  }
  void down_column(const std::vector<Value*>& base, Value* r) {
    column_pos = r;
    for (size_t o = 0; o < base.size(); ++o)
      row_off[o] = B.CreateAdd(base[o], B.CreateMul(r, stride[o][size_t(K.rank) - 2]));
  }

  // Computes every element-level output at these lanes, then stores them (all loads precede all stores, so the
  // row cache below may live in an output's buffer).
  void store_elements(const Lanes& l) {
    std::vector<Value*> memo(K.exprs.size(), nullptr);
    if (cache_expr >= 0) memo[size_t(cache_expr)] = access_cache(l, nullptr);
    std::vector<std::pair<const Store*, Value*>> values;
    for (const Store& s : K.stores) {
      const Operand& o = K.operands[size_t(s.operand)];
      if (o.per_row) continue;
      values.emplace_back(&s, to_storage(elem(s.expr, l, memo), o.dtype));
    }
    for (auto& [s, v] : values) store_at(s->operand, l, v, streaming);
  }

  // `stream`: a full f32 vector goes out with a non-temporal store (see streaming_possible).
  void store_at(int operand, const Lanes& l, Value* v, bool stream = false) {
    const Operand& o = K.operands[size_t(operand)];
    Value* p = B.CreateGEP(storage_ty(o.dtype), ptr[size_t(operand)], B.CreateAdd(row_off[size_t(operand)], l.j));
    llvm::Align al(dtype_size(o.dtype));
    if (l.mask) {
      B.CreateMaskedStore(v, p, al, l.mask);
    } else if (stream && o.dtype == DType::f32 && !o.per_row) {
      llvm::StoreInst* st = B.CreateAlignedStore(v, p, llvm::Align(uint64_t(l.w) * 4));
      st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                      llvm::MDNode::get(C, llvm::ConstantAsMetadata::get(B.getInt32(1))));
    } else {
      B.CreateAlignedStore(v, p, al);
    }
  }

  // The row cache: an expensive element value that the last reduction pass computes and the output pass needs
  // again (Softmax's exp) is written into an f32 output's buffer during that pass and read back from L1 in the
  // output pass instead of being recomputed. Loads (v == null) or stores (v) the cached value at these lanes.
  int cache_expr = -1, cache_operand = -1;
  static constexpr int kStackRowCache = 4096;  // floats: 16 KB, in L1 beside the row being read
  Value* stack_cache = nullptr;                // [kStackRowCache x float] in the entry block, when streaming
  // While the output streams, the output's lines must not be read back: the values go to a stack buffer instead
  // (rows of at most kStackRowCache floats; streaming_possible checks).
  Value* access_cache(const Lanes& l, Value* v) {
    llvm::Type* vt = vec(B.getFloatTy(), l.w);
    if (v && !streaming) {
      store_at(cache_operand, l, v);
      return v;
    }
    Value* p = streaming ? B.CreateGEP(B.getFloatTy(), stack_cache, l.j)
                         : B.CreateGEP(B.getFloatTy(), ptr[size_t(cache_operand)],
                                       B.CreateAdd(row_off[size_t(cache_operand)], l.j));
    if (v) {
      if (l.mask) B.CreateMaskedStore(v, p, llvm::Align(4), l.mask);
      else B.CreateAlignedStore(v, p, llvm::Align(4));
      return v;
    }
    if (l.mask) return B.CreateMaskedLoad(vt, p, llvm::Align(4), l.mask, llvm::Constant::getNullValue(vt));
    return B.CreateAlignedLoad(vt, p, llvm::Align(4));
  }
  void choose_cache() {
    cache_expr = K.row_cache_expr();
    for (const Store& st : K.stores) {
      const Operand& o = K.operands[size_t(st.operand)];
      if (cache_expr >= 0 && !o.per_row && o.dtype == DType::f32) {
        cache_operand = st.operand;
        break;
      }
    }
  }

  Value* to_storage(Value* v, DType d) {
    int w = width(v);
    switch (d) {
      case DType::i8: case DType::u8: case DType::i16: case DType::u16: case DType::u32:
        return B.CreateTrunc(v, vec(storage_ty(d), w));  // the value is already within the type (wrap_s/wrap_u)
      case DType::boolean: return B.CreateZExt(v, vec(B.getInt8Ty(), w));
      case DType::f16: return B.CreateFPTrunc(v, vec(B.getHalfTy(), w));  // to nearest even
      case DType::bf16: {  // to nearest even (exact for values the lowering has rounded already)
        Value* bits = B.CreateBitCast(round_bf16(v), vec(B.getInt32Ty(), w));
        return B.CreateTrunc(B.CreateLShr(bits, ic(bits->getType(), 16)), vec(B.getInt16Ty(), w));
      }
      default: return v;
    }
  }
  // Widens a loaded f16/bf16 vector to f32 (exact).
  Value* from_storage(Value* v, DType d) {
    int w = width(v);
    if (d == DType::i8 || d == DType::i16) return B.CreateSExt(v, vec(B.getInt32Ty(), w));
    if (d == DType::u8 || d == DType::u16) return B.CreateZExt(v, vec(B.getInt32Ty(), w));
    if (d == DType::u32) return B.CreateZExt(v, vec(B.getInt64Ty(), w));
    if (d == DType::f16) return B.CreateFPExt(v, vec(B.getFloatTy(), w));
    if (d != DType::bf16) return v;
    Value* wide = B.CreateZExt(v, vec(B.getInt32Ty(), w));
    Value* bits = B.CreateShl(wide, ic(wide->getType(), 16));
    return B.CreateBitCast(bits, vec(B.getFloatTy(), w));
  }
  // f32 rounded to bf16 precision, to nearest even or truncated; NaN stays a (quiet) NaN.
  Value* round_bf16(Value* v, bool truncate = false) {
    llvm::Type* it = ivec(v);
    Value* x = B.CreateBitCast(v, it);
    Value* r = x;
    if (!truncate)
      r = B.CreateAdd(x, B.CreateAdd(ic(it, 0x7fff), B.CreateAnd(B.CreateLShr(x, ic(it, 16)), ic(it, 1))));
    r = B.CreateAnd(r, ic(it, int64_t(0xffff0000u)));
    Value* nan = B.CreateOr(B.CreateAnd(x, ic(it, int64_t(0xffff0000u))), ic(it, 0x400000));
    return B.CreateBitCast(B.CreateSelect(B.CreateFCmpUNO(v, v), nan, r), v->getType());
  }

  // ---- values
  // The operand expressions expression e reads at element level (row-uniform values come from uval): up to 3.
  int element_operands(int e, int (&deps)[3]) const {
    const Expr& x = K.exprs[size_t(e)];
    if (uniform[size_t(e)] || x.op == Op::load || x.op == Op::row_index) return 0;
    if (x.op == Op::scan_sum) {
      deps[0] = x.a;
      return 1;
    }
    deps[0] = x.a, deps[1] = x.b, deps[2] = x.c;
    return 3;
  }
  // Expression e at these lanes (memo: the values computed so far at them). Iterative, with an explicit stack:
  // a fused chain of 50,000 element-wise ops is an expression 50,000 deep, which recursion would have to hold
  // on the machine stack. Operands are emitted a, b, c, each before its user, as a recursion would.
  Value* elem(int e, const Lanes& l, std::vector<Value*>& memo) {
    if (memo[size_t(e)]) return memo[size_t(e)];
    struct Visit {
      int expr;
      int next;  // the operand slot to look at next
    };
    std::vector<Visit> stack{{e, 0}};
    while (!stack.empty()) {
      int x = stack.back().expr;
      int deps[3] = {-1, -1, -1};
      int nd = element_operands(x, deps);
      int& next = stack.back().next;
      while (next < nd && (deps[next] < 0 || memo[size_t(deps[next])])) ++next;
      if (next < nd) {
        int d = deps[next++];
        stack.push_back({d, 0});  // (invalidates `next`)
        continue;
      }
      stack.pop_back();
      if (!memo[size_t(x)]) memo[size_t(x)] = elem_at(x, l, memo);
    }
    return memo[size_t(e)];
  }
  // Expression e at these lanes, its element-level operands already in memo.
  Value* elem_at(int e, const Lanes& l, const std::vector<Value*>& memo) {
    const Expr& x = K.exprs[size_t(e)];
    auto operand = [&](int a) { return a >= 0 ? memo[size_t(a)] : nullptr; };
    if (uniform[size_t(e)]) return K.columns ? uval[size_t(e)] : splat(uval[size_t(e)], l.w);
    if (x.op == Op::load) return x.imm != 0 ? shifted_load(x, l) : load(x, l);
    if (x.op == Op::row_index) return K.columns ? splat_i64(column_pos, l.w) : positions(l.j, l.w);
    if (x.op == Op::scan_sum) return scan(e, operand(x.a), l);
    return compute(x, operand(x.a), operand(x.b), operand(x.c), l.w);
  }

  // The elements x.imm positions further along the row (down the columns), 0 beyond the row's ends.
  Value* shifted_load(const Expr& x, const Lanes& l) {
    Value* k = B.getInt64(uint64_t(int64_t(x.imm)));
    if (!K.columns) {  // lanes past either end of the row are masked off (and load nothing)
      Value* j = B.CreateAdd(l.j, k);
      Value* pos = positions(j, l.w);
      Value* in = B.CreateAnd(B.CreateICmpSGE(pos, llvm::Constant::getNullValue(pos->getType())),
                              B.CreateICmpSLT(pos, B.CreateVectorSplat(unsigned(l.w), dim[size_t(K.rank) - 1])));
      return load(x, {l.w, j, l.mask ? B.CreateAnd(l.mask, in) : in});
    }
    // Columns: one position for all lanes; past the ends, the column's own element is read and replaced by 0.
    size_t o = size_t(x.operand), d = size_t(K.rank) - 2;
    Value* at = B.CreateAdd(column_pos, k);
    Value* in = B.CreateAnd(B.CreateICmpSGE(at, B.getInt64(0)), B.CreateICmpSLT(at, dim[d]));
    Value* saved = row_off[o];
    row_off[o] = B.CreateAdd(saved, B.CreateMul(B.CreateSelect(in, k, B.getInt64(0)), stride[o][d]));
    Value* v = load(x, l);
    row_off[o] = saved;
    return B.CreateSelect(in, v, llvm::Constant::getNullValue(v->getType()));
  }
  Value* load(const Expr& x, const Lanes& l) {
    size_t o = size_t(x.operand);
    const Operand& op = K.operands[o];
    llvm::Type* st = storage_ty(op.dtype);
    llvm::Type* vt = vec(st, l.w);
    llvm::Align al(dtype_size(op.dtype));
    Value* v;
    if (op.inner == Access::broadcast) {
      v = B.CreateAlignedLoad(vec(st, 1), B.CreateGEP(st, ptr[o], row_off[o]), al);
      v = splat(v, l.w);
    } else if (op.inner == Access::contiguous) {
      Value* p = B.CreateGEP(st, ptr[o], B.CreateAdd(row_off[o], l.j));
      if (l.mask) v = B.CreateMaskedLoad(vt, p, al, l.mask, llvm::Constant::getNullValue(vt));
      else v = B.CreateAlignedLoad(vt, p, al);
    } else {
      Value* idx = B.CreateAdd(B.CreateVectorSplat(unsigned(l.w), l.j), iota(l.w));
      idx = B.CreateMul(idx, B.CreateVectorSplat(unsigned(l.w), stride[o][size_t(K.rank) - 1]));
      idx = B.CreateAdd(idx, B.CreateVectorSplat(unsigned(l.w), row_off[o]));
      Value* ptrs = B.CreateGEP(st, ptr[o], idx);
      Value* mask = l.mask ? l.mask : llvm::Constant::getAllOnesValue(vec(B.getInt1Ty(), l.w));
      v = B.CreateMaskedGather(vt, ptrs, al, mask, llvm::Constant::getNullValue(vt));
    }
    if (op.dtype == DType::boolean) v = B.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    return from_storage(v, op.dtype);
  }

  // ---- row reductions: kReductionLanes partials as (32 / W) accumulators of W lanes, then a halving tree
  // u: the values are unsigned (u64), ordered as such by max and min.
  Value* identity(Op op, llvm::Type* t, bool u = false) {
    if (t->isFPOrFPVectorTy()) {
      double inf = std::numeric_limits<double>::infinity();
      double v = op == Op::row_sum ? -0.0 : op == Op::row_prod ? 1.0 : is_max_op(op) ? -inf : inf;
      return llvm::ConstantFP::get(t, v);
    }
    unsigned bits = t->getScalarSizeInBits();
    if (op == Op::row_sum) return llvm::ConstantInt::get(t, 0);
    if (op == Op::row_prod) return llvm::ConstantInt::get(t, 1);
    llvm::APInt v = u ? (is_max_op(op) ? llvm::APInt::getMinValue(bits) : llvm::APInt::getMaxValue(bits))
                      : (is_max_op(op) ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getSignedMaxValue(bits));
    return llvm::ConstantInt::get(t, v);
  }
  static bool is_max_op(Op op) { return op == Op::row_max || op == Op::row_max_num; }
  // Accumulates v into acc. Max/min: v replaces acc when it is NaN or beyond it, so a NaN stays once met; equal
  // values (±0) keep the earlier one, as the reference's sequential fold does. Two compares and a blend
  // (row_max_num: one compare, a NaN v never beyond).
  Value* combine(Op op, Value* acc, Value* v, bool u = false) {
    bool f = acc->getType()->isFPOrFPVectorTy();
    if (op == Op::row_sum) return f ? B.CreateFAdd(acc, v) : B.CreateAdd(acc, v);
    if (op == Op::row_prod) return f ? B.CreateFMul(acc, v) : B.CreateMul(acc, v);
    bool is_max = is_max_op(op);
    if (!f) return B.CreateSelect(is_max ? icmp_gt(v, acc, u) : icmp_gt(acc, v, u), v, acc);
    Value* beyond = is_max ? B.CreateFCmpOGT(v, acc) : B.CreateFCmpOLT(v, acc);
    if (op == Op::row_max_num) return B.CreateSelect(beyond, v, acc);
    return B.CreateSelect(B.CreateOr(beyond, B.CreateFCmpUNO(v, v)), v, acc);
  }
  // NaN wins (a first); else a < b ? b : a for max and b < a ? b : a for min.
  Value* minmax(bool is_max, Value* a, Value* b, bool u = false) {
    if (a->getType()->isFPOrFPVectorTy()) {
      Value* pick = is_max ? B.CreateSelect(B.CreateFCmpOLT(a, b), b, a) : B.CreateSelect(B.CreateFCmpOLT(b, a), b, a);
      pick = B.CreateSelect(B.CreateFCmpUNO(b, b), b, pick);
      return B.CreateSelect(B.CreateFCmpUNO(a, a), a, pick);
    }
    return is_max ? B.CreateSelect(icmp_gt(b, a, u), b, a) : B.CreateSelect(icmp_gt(a, b, u), b, a);
  }
  Value* icmp_gt(Value* a, Value* b, bool u) { return u ? B.CreateICmpUGT(a, b) : B.CreateICmpSGT(a, b); }

  // ---- ArgMax / ArgMin: (value, position) pairs. Which of two pairs wins does not depend on the order they meet
  // (a NaN first, then the larger or smaller value, then the earlier or later position), so partials combine as
  // the other reductions' do and give the sequential scan's answer.
  struct Arg {
    Value* v;
    Value* i;
  };
  Value* arg_wins(const Expr& e, Arg a, Arg b) {  // whether b beats a
    bool is_max = e.op == Op::row_argmax;
    Value* tie = e.imm != 0 ? B.CreateICmpSGT(b.i, a.i) : B.CreateICmpSLT(b.i, a.i);
    if (!a.v->getType()->isFPOrFPVectorTy()) {
      bool u = is_unsigned(K.exprs[size_t(e.a)].type);
      Value* beyond = is_max ? icmp_gt(b.v, a.v, u) : icmp_gt(a.v, b.v, u);
      return B.CreateOr(beyond, B.CreateAnd(B.CreateICmpEQ(b.v, a.v), tie));
    }
    Value* an = B.CreateFCmpUNO(a.v, a.v);
    Value* bn = B.CreateFCmpUNO(b.v, b.v);
    Value* beyond = is_max ? B.CreateFCmpOGT(b.v, a.v) : B.CreateFCmpOLT(b.v, a.v);
    Value* numbers = B.CreateOr(beyond, B.CreateAnd(B.CreateFCmpOEQ(b.v, a.v), tie));
    Value* nans = B.CreateAnd(bn, B.CreateOr(B.CreateNot(an), tie));
    return B.CreateSelect(B.CreateOr(an, bn), nans, numbers);
  }
  Arg arg_combine(const Expr& e, Arg a, Arg b) {
    Value* wins = arg_wins(e, a, b);
    return {B.CreateSelect(wins, b.v, a.v), B.CreateSelect(wins, b.i, a.i)};
  }
  // Beaten by every element: the far end of the values, at a position every tie prefers the element's to.
  Arg arg_identity(const Expr& e, int w) {
    llvm::Type* vt = vec(scalar_ty(K.exprs[size_t(e.a)].type), w);
    int64_t far = e.imm != 0 ? -1 : std::numeric_limits<int64_t>::max();
    return {identity(e.op == Op::row_argmax ? Op::row_max : Op::row_min, vt, is_unsigned(K.exprs[size_t(e.a)].type)),
            llvm::ConstantInt::get(vec(B.getInt64Ty(), w), uint64_t(far), true)};
  }

  Value* reduce_row_arg(const Expr& e) {
    int w = std::min(S.vector_width, kReductionLanes);
    int nacc = kReductionLanes / w;
    Arg ident = arg_identity(e, w);
    Value* inner = dim[size_t(K.rank) - 1];
    Value* full_end = B.CreateMul(B.CreateSDiv(inner, B.getInt64(kReductionLanes)), B.getInt64(kReductionLanes));
    Carried init;
    for (int q = 0; q < nacc; ++q) init.push_back(ident.v), init.push_back(ident.i);
    auto step = [&](Arg acc, Value* j, Value* mask) {
      std::vector<Value*> memo(K.exprs.size(), nullptr);
      Lanes l{w, j, mask};
      Value* v = elem(e.a, l, memo);
      if (e.a == cache_expr) access_cache(l, v);
      Value* pos = positions(j, w);
      if (mask) v = B.CreateSelect(mask, v, ident.v), pos = B.CreateSelect(mask, pos, ident.i);
      return arg_combine(e, acc, {v, pos});
    };
    Carried acc = loop(B.getInt64(0), full_end, B.getInt64(kReductionLanes), init, [&](Value* j, const Carried& a) {
      Carried next;
      for (int q = 0; q < nacc; ++q) {
        Arg r = step({a[size_t(2 * q)], a[size_t(2 * q + 1)]}, B.CreateAdd(j, B.getInt64(q * w)), nullptr);
        next.push_back(r.v), next.push_back(r.i);
      }
      return next;
    });
    std::vector<Arg> parts;
    for (int q = 0; q < nacc; ++q) {
      Value* j = B.CreateAdd(full_end, B.getInt64(q * w));
      Value* mask = B.CreateICmpSLT(positions(j, w), B.CreateVectorSplat(unsigned(w), inner));
      parts.push_back(step({acc[size_t(2 * q)], acc[size_t(2 * q + 1)]}, j, mask));
    }
    while (parts.size() > 1) {
      size_t h = parts.size() / 2;
      std::vector<Arg> next;
      for (size_t q = 0; q < h; ++q) next.push_back(arg_combine(e, parts[q], parts[q + h]));
      parts = next;
    }
    Arg r = parts[0];
    for (int lanes = w; lanes > 1; lanes /= 2) {
      std::vector<int> lo, hi;
      for (int t = 0; t < lanes / 2; ++t) lo.push_back(t), hi.push_back(t + lanes / 2);
      r = arg_combine(e, {B.CreateShuffleVector(r.v, lo), B.CreateShuffleVector(r.i, lo)},
                      {B.CreateShuffleVector(r.v, hi), B.CreateShuffleVector(r.i, hi)});
    }
    return r.i;
  }

  // A row's first reduction pass reads it from memory; the passes after it find it in L1 and compute. Those
  // passes prefetch the next row (each contiguous input, the lines j .. j + 31 of the row after), so that its
  // reads overlap this row's arithmetic instead of stalling the next first pass. (Dense rows: the next row starts
  // `inner` elements on. Otherwise the prefetched lines are useless but harmless: a prefetch never faults.)
  // LayerNorm 64 MB against ONNX Runtime, alternated on a loaded machine: 0.43-0.48x with, 0.49-0.71x without;
  // Softmax 64 MB 0.88-1.11x with, 0.89-1.18x without.
  bool first_pass(const Expr& e) const {
    for (const Expr& x : K.exprs)
      if (is_row_reduction(x.op)) return &x == &e;
    return false;
  }
  void prefetch_next_row(Value* j) {
    llvm::Function* pf = llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::prefetch, {B.getPtrTy()});
    Value* inner = dim[size_t(K.rank) - 1];
    for (size_t o = 0; o < K.operands.size(); ++o) {
      const Operand& op = K.operands[o];
      if (op.is_output || op.inner != Access::contiguous) continue;
      int bytes = kReductionLanes * int(dtype_size(op.dtype));
      for (int off = 0; off < bytes; off += 64) {
        Value* p = B.CreateGEP(storage_ty(op.dtype), ptr[o], B.CreateAdd(B.CreateAdd(row_off[o], inner), j));
        p = B.CreateGEP(B.getInt8Ty(), p, B.getInt64(off));
        B.CreateCall(pf, {p, B.getInt32(0), B.getInt32(3), B.getInt32(1)});
      }
    }
  }
  // A float max/min carries its running extremum and, beside it, whether a NaN has been seen: the extremum's own
  // chain is then one vmaxps/vminps (latency 2) per vector instead of a compare, a mask or and a blend (~5), which
  // bounded Softmax's first pass. A row with a NaN gives a NaN, as combine's NaN-first rule does.
  Value* ordered_combine(Op op, Value* acc, Value* v) {
    return B.CreateSelect(is_max_op(op) ? B.CreateFCmpOGT(v, acc) : B.CreateFCmpOLT(v, acc), v, acc);
  }
  Value* reduce_row(const Expr& e) {
    if (e.op == Op::row_argmax || e.op == Op::row_argmin) return reduce_row_arg(e);
    int w = std::min(S.vector_width, kReductionLanes);
    int nacc = kReductionLanes / w;
    llvm::Type* vt = vec(scalar_ty(e.type), w);
    bool u = is_unsigned(e.type);
    Value* ident = identity(e.op, vt, u);
    bool nan_flag = (e.op == Op::row_max || e.op == Op::row_min) && vt->isFPOrFPVectorTy();
    // row_max_num needs no flag: its combine is ordered_combine already.
    auto step = [&](Value* acc, Value* v) { return nan_flag ? ordered_combine(e.op, acc, v) : combine(e.op, acc, v, u); };
    Value* no_nan = llvm::Constant::getNullValue(vec(B.getInt1Ty(), w));
    Value* inner = dim[size_t(K.rank) - 1];
    Value* full_end = B.CreateMul(B.CreateSDiv(inner, B.getInt64(kReductionLanes)), B.getInt64(kReductionLanes));
    bool prefetch = !first_pass(e);
    Carried init(size_t(nacc), ident);
    if (nan_flag) init.push_back(no_nan);  // one flag for all accumulators: its chain (kor) is short
    Carried acc = loop(B.getInt64(0), full_end, B.getInt64(kReductionLanes), init,
                       [&](Value* j, const Carried& a) {
                         Carried next;
                         Value* nan = nan_flag ? a.back() : nullptr;
                         if (prefetch) prefetch_next_row(j);
                         for (int q = 0; q < nacc; ++q) {
                           std::vector<Value*> memo(K.exprs.size(), nullptr);
                           Lanes l{w, B.CreateAdd(j, B.getInt64(q * w)), nullptr};
                           Value* v = elem(e.a, l, memo);
                           if (e.a == cache_expr) access_cache(l, v);
                           next.push_back(step(a[size_t(q)], v));
                           if (nan_flag) nan = B.CreateOr(nan, B.CreateFCmpUNO(v, v));
                         }
                         if (nan_flag) next.push_back(nan);
                         return next;
                       });
    // The last partial block, when the row has one (a row of whole blocks skips it: for rows of 128 it was a
    // fifth of each pass).
    acc = if_then(B.CreateICmpSLT(full_end, inner), acc, [&](Carried a) {
      for (int q = 0; q < nacc; ++q) {
        Value* j = B.CreateAdd(full_end, B.getInt64(q * w));
        Value* lanes = positions(j, w);
        Value* mask = B.CreateICmpSLT(lanes, B.CreateVectorSplat(unsigned(w), inner));
        std::vector<Value*> memo(K.exprs.size(), nullptr);
        Lanes l{w, j, mask};
        Value* v = elem(e.a, l, memo);
        if (e.a == cache_expr) access_cache(l, v);
        Value* live = B.CreateSelect(mask, v, ident);  // masked-off lanes add the identity: no change
        a[size_t(q)] = step(a[size_t(q)], live);
        if (nan_flag) a.back() = B.CreateOr(a.back(), B.CreateFCmpUNO(live, live));
      }
      return a;
    });
    Value* nan = nan_flag ? acc.back() : nullptr;
    if (nan_flag) acc.pop_back();
    while (acc.size() > 1) {
      size_t h = acc.size() / 2;
      Carried next;
      for (size_t q = 0; q < h; ++q) next.push_back(step(acc[q], acc[q + h]));
      acc = next;
    }
    Value* v = acc[0];
    for (int lanes = w; lanes > 1; lanes /= 2) {
      std::vector<int> lo, hi;
      for (int t = 0; t < lanes / 2; ++t) lo.push_back(t), hi.push_back(t + lanes / 2);
      v = step(B.CreateShuffleVector(v, lo), B.CreateShuffleVector(v, hi));
    }
    if (nan_flag) {
      Value* any = w == 1 ? nan : B.CreateOrReduce(nan);
      v = B.CreateSelect(any, llvm::ConstantFP::getNaN(v->getType()), v);
    }
    return v;
  }

  // ---- element-wise math on <w x T>
  Value* fma(Value* a, Value* b, Value* c) { return B.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c}); }
  Value* fabs(Value* a) { return B.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a); }
  Value* horner(Value* x, std::span<const double> coeffs) {
    Value* p = fc(x, coeffs[0]);
    for (size_t i = 1; i < coeffs.size(); ++i) p = fma(p, x, fc(x, coeffs[i]));
    return p;
  }
  Value* horner(Value* x, std::initializer_list<double> coeffs) {
    return horner(x, std::span<const double>(coeffs.begin(), coeffs.size()));
  }
  llvm::Type* ivec(Value* like) { return vec(B.getInt32Ty(), width(like)); }

  // p * 2^n for an integral n held as a float (|n| <= 150): one vscalefps where the target has AVX-512 (exact
  // scaling, rounded once, with IEEE overflow to inf and denormal results), else two multiplies by exponent-field
  // powers of two, so that denormal results also round once and n = 128 still overflows to inf.
  Value* scale_pow2(Value* p, Value* fn) {
    int w = width(p);
    if (avx512f && w % 16 == 0) {
      llvm::Function* scalef = llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::x86_avx512_mask_scalef_ps_512);
      return per_chunk(p, fn, 16, [&](Value* a, Value* b) {
        return B.CreateCall(scalef, {a, b, llvm::Constant::getNullValue(a->getType()), B.getInt16(0xffff),
                                     B.getInt32(4 /* current rounding mode */)});
      });
    }
    if (avx512vl && w == 8) {
      llvm::Function* scalef = llvm::Intrinsic::getDeclaration(&M, llvm::Intrinsic::x86_avx512_mask_scalef_ps_256);
      return B.CreateCall(scalef, {p, fn, llvm::Constant::getNullValue(p->getType()), B.getInt8(0xff)});
    }
    llvm::Type* it = ivec(p);
    Value* n = B.CreateFPToSI(fn, it);
    Value* n1 = B.CreateAShr(n, ic(it, 1));
    Value* n2 = B.CreateSub(n, n1);
    Value* s1 = B.CreateBitCast(B.CreateShl(B.CreateAdd(n1, ic(it, 127)), ic(it, 23)), p->getType());
    Value* s2 = B.CreateBitCast(B.CreateShl(B.CreateAdd(n2, ic(it, 127)), ic(it, 23)), p->getType());
    return B.CreateFMul(B.CreateFMul(p, s1), s2);
  }

  // f(a, b) applied to `chunk`-lane pieces of two <w x T> vectors (w a multiple of chunk), reassembled.
  Value* per_chunk(Value* a, Value* b, int chunk, const std::function<Value*(Value*, Value*)>& f) {
    int w = width(a);
    if (w == chunk) return f(a, b);
    std::vector<Value*> parts;
    for (int lo = 0; lo < w; lo += chunk) {
      std::vector<int> idx;
      for (int i = 0; i < chunk; ++i) idx.push_back(lo + i);
      parts.push_back(f(B.CreateShuffleVector(a, idx), B.CreateShuffleVector(b, idx)));
    }
    while (parts.size() > 1) {  // concatenate pairwise
      std::vector<Value*> next;
      for (size_t i = 0; i + 1 < parts.size(); i += 2) {
        std::vector<int> idx;
        for (int j = 0; j < 2 * width(parts[i]); ++j) idx.push_back(j);
        next.push_back(B.CreateShuffleVector(parts[i], parts[i + 1], idx));
      }
      parts = std::move(next);
    }
    return parts[0];
  }

  // e^x: x = n ln2 + r and the polynomial of support/exp_polynomial.h (the CPU kernels' exp_f computes the same
  // reduction and polynomial), times 2^n (scale_pow2). The clamp to [kLow, kHigh] keeps r exact for huge |x| and
  // still over/underflows; a NaN x passes it, so the result is NaN. `nonpositive`: x is known to be <= 0 or NaN
  // (Softmax's x - max), so the upper clamp is left out: one operation of ~17 per element of Softmax's exp pass.
  Value* exp(Value* x, bool nonpositive = false) {
    namespace xp = exp_polynomial;
    Value* xc = B.CreateSelect(B.CreateFCmpOLT(x, fc(x, xp::kLow)), fc(x, xp::kLow), x);
    if (!nonpositive) xc = B.CreateSelect(B.CreateFCmpOGT(xc, fc(x, xp::kHigh)), fc(x, xp::kHigh), xc);
    const double shift = 12582912.0;  // 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits
    Value* t = fma(xc, fc(x, xp::kLog2e), fc(x, shift));
    Value* fn = B.CreateFSub(t, fc(x, shift));
    Value* r = fma(fn, fc(x, -xp::kLn2High), xc);
    r = fma(fn, fc(x, -xp::kLn2Low), r);
    return scale_pow2(horner(r, xp::kPoly), fn);
  }
  // Whether expression e is a - max(a) over a's row (or column): <= 0, or NaN.
  bool nonpositive(int e) const {
    const Expr& x = K.exprs[size_t(e)];
    if (x.op != Op::sub) return false;
    const Expr& m = K.exprs[size_t(x.b)];
    return is_max_op(m.op) && m.a == x.a && is_float(x.type);
  }

  // log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by
  // the odd series to s^11 (truncation < 2e-11 relative). Denormals are scaled by 2^23 first.
  Value* log(Value* x) {
    llvm::Type* it = ivec(x);
    Value* tiny = B.CreateFCmpOLT(x, fc(x, 1.17549435e-38));
    Value* xs = B.CreateSelect(tiny, B.CreateFMul(x, fc(x, 8388608.0)), x);
    Value* bits = B.CreateBitCast(xs, it);
    Value* e = B.CreateSub(B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255)), ic(it, 127));
    e = B.CreateSelect(tiny, B.CreateSub(e, ic(it, 23)), e);
    Value* m = B.CreateBitCast(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x3f800000)), x->getType());
    Value* big = B.CreateFCmpOGT(m, fc(x, 1.41421356237309505));
    m = B.CreateSelect(big, B.CreateFMul(m, fc(x, 0.5)), m);
    e = B.CreateSelect(big, B.CreateAdd(e, ic(it, 1)), e);
    Value* f = B.CreateFSub(m, fc(x, 1.0));
    Value* s = B.CreateFDiv(f, B.CreateFAdd(f, fc(x, 2.0)));
    Value* z = B.CreateFMul(s, s);
    Value* p = horner(z, {1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3});
    Value* s2 = B.CreateFAdd(s, s);
    Value* logm = fma(B.CreateFMul(s2, z), p, s2);
    Value* fe = B.CreateSIToFP(e, x->getType());
    Value* r = fma(fe, fc(x, 0.693359375), fma(fe, fc(x, -2.12194440e-4), logm));
    double inf = std::numeric_limits<double>::infinity();
    r = B.CreateSelect(B.CreateFCmpOEQ(x, fc(x, 0.0)), fc(x, -inf), r);
    r = B.CreateSelect(B.CreateFCmpOLT(x, fc(x, 0.0)), fc(x, std::numeric_limits<double>::quiet_NaN()), r);
    r = B.CreateSelect(B.CreateFCmpOEQ(x, fc(x, inf)), x, r);
    return B.CreateSelect(B.CreateFCmpUNO(x, x), x, r);
  }

  // tanh: |x| < 0.9: x P(x^2), P of degree 7 fitted for relative error (1e-9); else 1 - 2 / (e^2|x| + 1), |x|
  // clamped at 9.1, past which tanh rounds to 1. Error over every float: 1.27 ulp (Codegen.
  // DISABLED_MathEveryFloat); 128K floats in cache, one thread: 35 us. The degree-19 Taylor series it
  // replaces (below 0.55): 1.6 ulp, 38 us. A reciprocal by rcp14 and a Newton step instead of the division: 40 us.
  Value* tanh(Value* x) {
    Value* a = fabs(x);
    a = B.CreateSelect(B.CreateFCmpOGT(a, fc(x, 9.1)), fc(x, 9.1), a);  // a NaN stays (and takes the exp piece)
    Value* p = horner(B.CreateFMul(a, a), {-0.0004501337534748018, 0.00256651034578681, -0.008244953118264675,
                                           0.021651461720466614, -0.053925320506095886, 0.1333291083574295,
                                           -0.33333316445350647, 1.0});
    Value* small = B.CreateFMul(a, p);
    Value* d = B.CreateFAdd(exp(B.CreateFAdd(a, a)), fc(x, 1.0));
    Value* large = B.CreateFSub(fc(x, 1.0), B.CreateFDiv(fc(x, 2.0), d));
    Value* r = B.CreateSelect(B.CreateFCmpOLT(a, fc(x, 0.9)), small, large);
    return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
  }
  // erf: the polynomials of support/erf_polynomial.h (the CPU kernels' erf_f computes the same bits). Both are
  // computed and one selected. GELU over 128K floats in cache, one thread, alternated: this 37-39 us, the previous
  // (Taylor series + A&S tail with e^(-x^2), 3.24 ulp) 55-60, E by one Horner chain 42 (each vector waits on
  // fourteen dependent multiply-adds), a (5, 3) rational + tail 33-37 (but its f32 evaluation errs 4.7 ulp near 1),
  // one chain with coefficients picked per lane by blends or vpermps slower still.
  Value* erf(Value* x) {
    namespace ep = erf_polynomial;
    Value* a = fabs(x);
    // a NaN stays (and takes the tail)
    a = B.CreateSelect(B.CreateFCmpOGT(a, fc(x, ep::kClamp)), fc(x, ep::kClamp), a);
    Value* p = horner(B.CreateFMul(a, a), ep::kSmall);
    Value* v = B.CreateFSub(a, fc(x, ep::kCenter));
    Value* v2 = B.CreateFMul(v, v);
    Value* e = fma(v, horner(v2, ep::kTailOdd), horner(v2, ep::kTailEven));
    Value* r = B.CreateSelect(B.CreateFCmpOLT(a, fc(x, ep::kSplit)), B.CreateFMul(a, p), B.CreateFSub(fc(x, 1.0), e));
    return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
  }

  // ---- sin, cos, tan, atan: f64 arithmetic on the f32 argument, rounded once to f32 at the end.
  llvm::Type* dvec(int w) { return vec(B.getDoubleTy(), w); }
  Value* roundeven(Value* v) { return B.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, v); }

  // x = q pi/2 + r, |r| <= pi/4 (plus a rounding), r in f64; only q's low two bits matter.
  // |x| < 2^20: Cody-Waite with pi/2 in three parts, the first of 33 bits, so that n c1 and x - n c1 are exact.
  // Larger finite |x| (a branch taken only when some lane needs it): Payne-Hanek with a table of 2/pi's bits per
  // exponent (two_over_pi_table), accurate to about 2^-61 in the fraction of a quadrant.
  struct Reduced {
    Value* r;
    Value* q;
  };
  Reduced reduce_half_pi(Value* x) {
    int w = width(x);
    llvm::Type* dt = dvec(w);
    llvm::Type* it = ivec(x);
    Value* xd = B.CreateFPExt(x, dt);
    Value* ax = fabs(x);
    Value* small = B.CreateFCmpOLT(ax, fc(x, 0x1p20));
    Value* n = roundeven(B.CreateFMul(xd, fc(xd, 0x1.45f306dc9c883p-1)));
    n = B.CreateSelect(small, n, llvm::Constant::getNullValue(dt));  // NaN and huge lanes: r = x, q = 0 here
    Value* nn = B.CreateFNeg(n);
    Value* r = fma(nn, fc(xd, 0x1.921fb544p+0), xd);
    r = fma(nn, fc(xd, 0x1.0b4611a626331p-34), r);
    r = fma(nn, fc(xd, 0x1.1701b839a2520p-88), r);
    Value* q = B.CreateFPToSI(n, it);

    Value* huge = B.CreateAnd(B.CreateNot(small), B.CreateFCmpOLT(ax, fc(x, std::numeric_limits<double>::infinity())));
    Carried rq = if_then(B.CreateOrReduce(huge), {r, q}, [&](const Carried&) {
      // |x| = m 2^k, m a 24-bit integer, k = e - 150 in [-3, 104]; x 2/pi mod 4 = m (h + mi + lo) mod 4 where the
      // table holds (2^k 2/pi) mod 4 in three 29-bit pieces: m h and m mi are exact products.
      Value* bits = B.CreateBitCast(x, it);
      Value* e = B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255));
      Value* m = B.CreateSIToFP(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x800000)), dt);
      Value* row = B.CreateSelect(huge, B.CreateSub(e, ic(it, 147)), llvm::Constant::getNullValue(it));
      row = B.CreateMul(B.CreateZExt(row, vec(B.getInt64Ty(), w)), B.CreateVectorSplat(unsigned(w), B.getInt64(3)));
      llvm::GlobalVariable* table = two_over_pi_table();
      auto piece = [&](int j) {
        Value* idx = B.CreateAdd(row, B.CreateVectorSplat(unsigned(w), B.getInt64(uint64_t(j))));
        Value* ptrs = B.CreateGEP(B.getDoubleTy(), table, idx);
        return B.CreateMaskedGather(dt, ptrs, llvm::Align(8), huge, llvm::Constant::getNullValue(dt));
      };
      Value* ph = B.CreateFMul(m, piece(0));
      Value* fours = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, B.CreateFMul(ph, fc(xd, 0.25)));
      ph = B.CreateFSub(ph, B.CreateFMul(fc(xd, 4.0), fours));
      Value* pm = B.CreateFMul(m, piece(1));
      Value* pl = B.CreateFMul(m, piece(2));
      Value* nh = roundeven(B.CreateFAdd(ph, pm));
      // ph - nh is exact, and so is + pm when small
      Value* f = B.CreateFAdd(B.CreateFAdd(B.CreateFSub(ph, nh), pm), pl);
      Value* rh = fma(f, fc(xd, 0x1.921fb54442d18p+0), B.CreateFMul(f, fc(xd, 0x1.1a62633145c07p-54)));
      Value* qh = B.CreateFPToSI(nh, it);
      Value* negative = B.CreateICmpSLT(bits, llvm::Constant::getNullValue(it));  // x = -(n pi/2 + r)
      rh = B.CreateSelect(negative, B.CreateFNeg(rh), rh);
      qh = B.CreateSelect(negative, B.CreateNeg(qh), qh);
      return Carried{B.CreateSelect(huge, rh, r), B.CreateSelect(huge, qh, q)};
    });
    return {rq[0], rq[1]};
  }

  // (2^k 2/pi) mod 4 for k = -3..104 as three doubles each: the bits of weight 2^1..2^-27, 2^-28..2^-56 and
  // 2^-57..2^-85. 2/pi to 256 bits (checked against a 400-bit Machin computation).
  llvm::GlobalVariable* two_over_pi_table() {
    if (pi_table) return pi_table;
    static const char kHex[] = "A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561";
    auto bit = [&](int i) {  // bit i after the binary point (i >= 1)
      if (i < 1) return 0;
      int d = i - 1, c = kHex[d / 4];
      int v = c <= '9' ? c - '0' : c - 'A' + 10;
      return (v >> (3 - d % 4)) & 1;
    };
    std::vector<double> vals;
    for (int k = -3; k <= 104; ++k)
      for (int hi : {1, -28, -57}) {
        uint64_t acc = 0;
        for (int j = hi; j > hi - 29; --j) acc = acc << 1 | uint64_t(bit(k - j));
        vals.push_back(std::ldexp(double(acc), hi - 28));
      }
    llvm::Constant* init = llvm::ConstantDataArray::get(C, vals);
    pi_table = new llvm::GlobalVariable(M, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, "two_over_pi");
    pi_table->setAlignment(llvm::Align(64));
    return pi_table;
  }

  // sin and cos of |r| <= pi/4 by Taylor series in f64 (truncation below 1e-12 relative), picked and signed by
  // the quadrant; tan as their quotient. Within 1 ulp of the f32 result (one f64 -> f32 rounding); +-inf -> NaN.
  Value* trig(Op op, Value* x) {
    Reduced red = reduce_half_pi(x);
    Value* r = red.r;
    Value* z = B.CreateFMul(r, r);
    Value* ps = horner(z, {1.0 / 6227020800, -1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6});
    Value* s = fma(B.CreateFMul(r, z), ps, r);
    Value* pc = horner(z, {-1.0 / 87178291200, 1.0 / 479001600, -1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24});
    Value* c = fma(B.CreateFMul(z, z), pc, fma(z, fc(z, -0.5), fc(z, 1.0)));
    llvm::Type* it = red.q->getType();
    Value* q = op == Op::cos ? B.CreateAdd(red.q, ic(it, 1)) : red.q;
    Value* odd = B.CreateICmpNE(B.CreateAnd(q, ic(it, 1)), llvm::Constant::getNullValue(it));
    Value* v;
    if (op == Op::tan) {
      v = B.CreateSelect(odd, B.CreateFNeg(B.CreateFDiv(c, s)), B.CreateFDiv(s, c));
    } else {
      v = B.CreateSelect(odd, c, s);
      Value* neg = B.CreateICmpNE(B.CreateAnd(q, ic(it, 2)), llvm::Constant::getNullValue(it));
      v = B.CreateSelect(neg, B.CreateFNeg(v), v);
    }
    Value* y = B.CreateFPTrunc(v, x->getType());
    Value* inf = B.CreateFCmpOEQ(fabs(x), fc(x, std::numeric_limits<double>::infinity()));
    return B.CreateSelect(inf, fc(x, std::numeric_limits<double>::quiet_NaN()), y);
  }

  // atan: |x| > 1 through pi/2 - atan(1/|x|), then above tan(pi/8) through pi/4 + atan((t - 1) / (t + 1)), so the
  // odd Taylor series runs on |u| <= 0.4143 (to u^25: truncation below 2e-12 relative), all in f64.
  Value* atan(Value* x) {
    Value* xd = B.CreateFPExt(x, dvec(width(x)));
    Value* a = fabs(xd);
    Value* inv = B.CreateFCmpOGT(a, fc(xd, 1.0));
    Value* t = B.CreateSelect(inv, B.CreateFDiv(fc(xd, 1.0), a), a);
    Value* big = B.CreateFCmpOGT(t, fc(xd, 0x1.a827999fcef32p-2));
    Value* u = B.CreateSelect(big, B.CreateFDiv(B.CreateFSub(t, fc(xd, 1.0)), B.CreateFAdd(t, fc(xd, 1.0))), t);
    Value* z = B.CreateFMul(u, u);
    Value* p = horner(z, {-1.0 / 25, 1.0 / 23, -1.0 / 21, 1.0 / 19, -1.0 / 17, 1.0 / 15, -1.0 / 13, 1.0 / 11,
                          -1.0 / 9, 1.0 / 7, -1.0 / 5, 1.0 / 3});
    Value* at = B.CreateFSub(u, B.CreateFMul(B.CreateFMul(u, z), p));
    at = B.CreateSelect(big, B.CreateFAdd(fc(xd, 0x1.921fb54442d18p-1), at), at);
    at = B.CreateSelect(inv, B.CreateFSub(fc(xd, 0x1.921fb54442d18p+0), at), at);
    return B.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, B.CreateFPTrunc(at, x->getType()), x);
  }

  // pow(x, y) = 2^(y log2 |x|) in f64 (log2 |x| from the float's exponent and the atanh series on m in
  // [sqrt(1/2), sqrt(2)), 2^f by Taylor on |f| <= 1/2: each below 1e-15 relative), rounded once to f32: within
  // 1 ulp. Signs and special values follow C's pow: y = 0 or x = 1 give 1; a negative finite x needs an integer y
  // (odd: a negative result) or gives NaN; |x| = 1 with y = +-inf gives 1.
  Value* pow(Value* x, Value* y) {
    int w = width(x);
    llvm::Type* dt = dvec(w);
    llvm::Type* it = ivec(x);
    const double inf = std::numeric_limits<double>::infinity();
    Value* ax = fabs(x);
    Value* tiny = B.CreateFCmpOLT(ax, fc(x, 0x1p-126));
    Value* xs = B.CreateSelect(tiny, B.CreateFMul(ax, fc(x, 0x1p23)), ax);
    Value* bits = B.CreateBitCast(xs, it);
    Value* e = B.CreateSub(B.CreateAnd(B.CreateLShr(bits, ic(it, 23)), ic(it, 255)), ic(it, 127));
    e = B.CreateSelect(tiny, B.CreateSub(e, ic(it, 23)), e);
    Value* m = B.CreateBitCast(B.CreateOr(B.CreateAnd(bits, ic(it, 0x7fffff)), ic(it, 0x3f800000)), x->getType());
    m = B.CreateFPExt(m, dt);
    Value* big = B.CreateFCmpOGT(m, fc(m, 1.41421356237309505));
    m = B.CreateSelect(big, B.CreateFMul(m, fc(m, 0.5)), m);
    e = B.CreateSelect(big, B.CreateAdd(e, ic(it, 1)), e);
    Value* s = B.CreateFDiv(B.CreateFSub(m, fc(m, 1.0)), B.CreateFAdd(m, fc(m, 1.0)));
    Value* z = B.CreateFMul(s, s);
    Value* logm = B.CreateFMul(B.CreateFAdd(s, s),
                               horner(z, {1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0}));
    Value* l2 = fma(logm, fc(m, 1.4426950408889634), B.CreateSIToFP(e, dt));
    l2 = B.CreateSelect(B.CreateFCmpOEQ(ax, fc(x, 0.0)), fc(m, -inf), l2);
    l2 = B.CreateSelect(B.CreateFCmpOEQ(ax, fc(x, inf)), fc(m, inf), l2);
    Value* t = B.CreateFMul(B.CreateFPExt(y, dt), l2);
    t = B.CreateSelect(B.CreateFCmpOEQ(l2, fc(m, 0.0)), fc(m, 0.0), t);  // |x| = 1, even for y = +-inf
    // 2^t with t clamped to [-300, 300] (beyond the f32 range either way); NaN lanes are replaced below.
    t = B.CreateSelect(B.CreateFCmpOLT(t, fc(m, -300.0)), fc(m, -300.0), t);
    t = B.CreateSelect(B.CreateFCmpOGT(t, fc(m, 300.0)), fc(m, 300.0), t);
    t = B.CreateSelect(B.CreateFCmpUNO(t, t), fc(m, 0.0), t);
    Value* n = roundeven(t);
    Value* g = B.CreateFMul(B.CreateFSub(t, n), fc(m, 0.69314718055994531));
    Value* p = horner(g, {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                          1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0});
    llvm::Type* i64v = vec(B.getInt64Ty(), w);
    Value* two_n = B.CreateBitCast(B.CreateShl(B.CreateAdd(B.CreateFPToSI(n, i64v), ic(i64v, 1023)), ic(i64v, 52)), dt);
    Value* r = B.CreateFPTrunc(B.CreateFMul(p, two_n), x->getType());
    // signs and special values
    Value* fy = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, y);
    Value* y_int = B.CreateFCmpOEQ(fy, y);
    Value* half_floor = B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, B.CreateFMul(y, fc(y, 0.5)));
    Value* y_odd = B.CreateAnd(y_int, B.CreateFCmpONE(B.CreateFMul(half_floor, fc(y, 2.0)), y));
    Value* x_neg = B.CreateICmpSLT(B.CreateBitCast(x, it), llvm::Constant::getNullValue(it));
    r = B.CreateSelect(B.CreateAnd(x_neg, y_odd), B.CreateFNeg(r), r);
    Value* neg_finite = B.CreateAnd(B.CreateFCmpOLT(x, fc(x, 0.0)), B.CreateFCmpOGT(x, fc(x, -inf)));
    Value* nan = fc(x, std::numeric_limits<double>::quiet_NaN());
    r = B.CreateSelect(B.CreateAnd(neg_finite, B.CreateNot(y_int)), nan, r);
    r = B.CreateSelect(B.CreateFCmpUNO(x, y), nan, r);
    return B.CreateSelect(B.CreateOr(B.CreateFCmpOEQ(y, fc(y, 0.0)), B.CreateFCmpOEQ(x, fc(x, 1.0))), fc(x, 1.0), r);
  }

  Value* cast(Value* a, Scalar from, Scalar to, int w) {
    llvm::Type* t = vec(scalar_ty(to), w);
    if (from == to) return a;
    if (to == Scalar::i1)
      return is_float(from) ? B.CreateFCmpUNE(a, fc(a, 0.0)) : B.CreateICmpNE(a, llvm::Constant::getNullValue(a->getType()));
    if (from == Scalar::i1) return is_float(to) ? B.CreateUIToFP(a, t) : B.CreateZExt(a, t);
    if (is_float(from) && is_float(to)) return to == Scalar::f64 ? B.CreateFPExt(a, t) : B.CreateFPTrunc(a, t);
    if (is_float(to)) return from == Scalar::u64 ? B.CreateUIToFP(a, t) : B.CreateSIToFP(a, t);
    if (is_float(from)) {  // saturating to i64 (NaN -> 0), then modular to i32, as the reference Cast
      llvm::Type* i64v = vec(B.getInt64Ty(), w);
      Value* i = B.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64v, a->getType()}, {a});
      if (to == Scalar::u64) {  // from 2^63 up: unsigned, saturating at 2^64 - 1; below: i64's bits
        Value* high = B.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {i64v, a->getType()}, {a});
        i = B.CreateSelect(B.CreateFCmpOGE(a, fc(a, 9223372036854775808.0)), high, i);
      }
      return to == Scalar::i32 ? B.CreateTrunc(i, t) : i;
    }
    // between integers: i32 sign-extends (to u64 too, as C's conversion); u64 and i64 share their bits
    if (to == Scalar::i32) return B.CreateTrunc(a, t);
    return from == Scalar::i32 ? B.CreateSExt(a, t) : a;
  }

  // The C library's `name` applied lane by lane (the JIT resolves it: jit.cpp's math_functions()). f64 math calls
  // it, as the reference kernels do, so the results are theirs bit for bit; so does fmod, which no short
  // polynomial computes exactly.
  Value* call_per_lane(const char* name, std::initializer_list<Value*> args) {
    llvm::Type* t = (*args.begin())->getType();
    llvm::Type* s = t->getScalarType();
    std::vector<llvm::Type*> params(args.size(), s);
    llvm::FunctionCallee fn = M.getOrInsertFunction(name, llvm::FunctionType::get(s, params, false));
    Value* r = llvm::PoisonValue::get(t);
    for (int i = 0; i < width(*args.begin()); ++i) {
      std::vector<Value*> lane;
      for (Value* a : args) lane.push_back(B.CreateExtractElement(a, uint64_t(i)));
      r = B.CreateInsertElement(r, B.CreateCall(fn, lane), uint64_t(i));
    }
    return r;
  }

  Value* compute(const Expr& x, Value* a, Value* b, Value* c, int w) {
    bool f = x.a >= 0 && is_float(K.exprs[size_t(x.a)].type);
    bool u = x.a >= 0 && is_unsigned(K.exprs[size_t(x.a)].type);
    // f64 math: the C library function of the op's name (exp, log, ..., pow, expm1, sinh, ...).
    if (x.type == Scalar::f64 && x.op != Op::fmod && is_transcendental(x.op))
      return x.op == Op::pow ? call_per_lane("pow", {a, b}) : call_per_lane(op_name(x.op), {a});
    switch (x.op) {
      case Op::constant:
        if (is_float(x.type)) return llvm::ConstantFP::get(vec(scalar_ty(x.type), w), x.imm);
        // (the lowering writes only integers a double holds exactly; u64 from 2^63 up has no i64 form)
        return llvm::ConstantInt::get(vec(scalar_ty(x.type), w),
                                      x.imm >= 9223372036854775808.0 ? uint64_t(x.imm) : uint64_t(int64_t(x.imm)));
      case Op::neg: return f ? B.CreateFNeg(a) : B.CreateNeg(a);
      case Op::abs: return f ? fabs(a) : u ? a : B.CreateSelect(B.CreateICmpSLT(a, llvm::Constant::getNullValue(a->getType())), B.CreateNeg(a), a);
      case Op::exp: return exp(a, nonpositive(x.a));
      case Op::log: return log(a);
      case Op::sqrt: return B.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
      case Op::tanh: return tanh(a);
      case Op::erf: return erf(a);
      case Op::sin: case Op::cos: case Op::tan: return trig(x.op, a);
      case Op::atan: return atan(a);
      case Op::round_bf16: return round_bf16(a);
      case Op::trunc_bf16: return round_bf16(a, true);
      case Op::round_f16: return B.CreateFPExt(B.CreateFPTrunc(a, vec(B.getHalfTy(), w)), a->getType());
      case Op::pow: return pow(a, b);
      case Op::fmod: return call_per_lane(x.type == Scalar::f64 ? "fmod" : "fmodf", {a, b});
      case Op::idiv: case Op::irem: {
        if (u) {  // a zero divisor (masked-off lanes) must not reach the divide
          Value* zero = B.CreateICmpEQ(b, llvm::Constant::getNullValue(b->getType()));
          Value* safe = B.CreateSelect(zero, llvm::ConstantInt::get(b->getType(), 1), b);
          return x.op == Op::idiv ? B.CreateUDiv(a, safe) : B.CreateURem(a, safe);
        }
        // Neither a zero divisor (masked-off lanes load 0) nor INT_MIN / -1 may reach the divide, which would
        // trap; a constant divisor folds the selects away.
        llvm::Type* t = a->getType();
        Value* minus_one = B.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(t));
        Value* zero = B.CreateICmpEQ(b, llvm::Constant::getNullValue(t));
        Value* safe = B.CreateSelect(B.CreateOr(minus_one, zero), llvm::ConstantInt::get(t, 1), b);
        Value* q = x.op == Op::idiv ? B.CreateSDiv(a, safe) : B.CreateSRem(a, safe);
        return B.CreateSelect(minus_one, x.op == Op::idiv ? B.CreateNeg(a) : llvm::Constant::getNullValue(t), q);
      }
      case Op::shl: return B.CreateShl(a, b);
      case Op::lshr: return B.CreateLShr(a, b);
      case Op::wrap_s: case Op::wrap_u: {
        Value* low = B.CreateTrunc(a, vec(B.getIntNTy(unsigned(x.imm)), w));
        return x.op == Op::wrap_s ? B.CreateSExt(low, a->getType()) : B.CreateZExt(low, a->getType());
      }
      case Op::floor: return B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a);
      case Op::ceil: return B.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, a);
      case Op::round: return B.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, a);
      case Op::recip: return B.CreateFDiv(fc(a, 1.0), a);
      case Op::logical_not: return B.CreateNot(a);
      case Op::is_nan: return B.CreateFCmpUNO(a, a);
      case Op::is_inf: return B.CreateFCmpOEQ(fabs(a), fc(a, std::numeric_limits<double>::infinity()));
      case Op::add: return f ? B.CreateFAdd(a, b) : B.CreateAdd(a, b);
      case Op::sub: return f ? B.CreateFSub(a, b) : B.CreateSub(a, b);
      case Op::mul: return f ? B.CreateFMul(a, b) : B.CreateMul(a, b);
      case Op::div: return B.CreateFDiv(a, b);
      case Op::max: return minmax(true, a, b, u);
      case Op::min: return minmax(false, a, b, u);
      case Op::lt: return f ? B.CreateFCmpOLT(a, b) : u ? B.CreateICmpULT(a, b) : B.CreateICmpSLT(a, b);
      case Op::le: return f ? B.CreateFCmpOLE(a, b) : u ? B.CreateICmpULE(a, b) : B.CreateICmpSLE(a, b);
      case Op::gt: return f ? B.CreateFCmpOGT(a, b) : u ? B.CreateICmpUGT(a, b) : B.CreateICmpSGT(a, b);
      case Op::ge: return f ? B.CreateFCmpOGE(a, b) : u ? B.CreateICmpUGE(a, b) : B.CreateICmpSGE(a, b);
      case Op::eq: return f ? B.CreateFCmpOEQ(a, b) : B.CreateICmpEQ(a, b);
      case Op::logical_and: return B.CreateAnd(a, b);
      case Op::logical_or: return B.CreateOr(a, b);
      case Op::logical_xor: return B.CreateXor(a, b);
      case Op::select: return B.CreateSelect(a, b, c);
      case Op::cast: return cast(a, K.exprs[size_t(x.a)].type, x.type, w);
      default: fail("internal error: kernel IR op ", op_name(x.op), " reached element-wise emission");
    }
  }
};

}  // namespace

std::unique_ptr<llvm::Module> emit_kernel(llvm::LLVMContext& ctx, const llvm::TargetMachine& tm, const Kernel& k,
                                          const Schedule& s, const std::string& symbol) {
  CUVIL_CHECK(s.valid(), "invalid schedule ", s.str());
  k.validate();
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  Emitter(ctx, *m, k, s).emit(symbol, tm);
  return m;
}

}  // namespace cuvil::codegen
