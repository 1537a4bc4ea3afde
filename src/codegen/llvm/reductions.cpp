// Row and column reductions with one association order whatever the schedule: kReductionLanes interleaved
// partials then a halving tree along a row, element after element down a column; ArgMax/ArgMin as (value,
// position) pairs; the NaN flag beside float extremes; prefetching of the next row.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

// Element after element down the columns of these lanes (masked-off lanes compute garbage nobody stores).
Value* Emitter::reduce_column(const Expr& e, const Lanes& l, const std::vector<Value*>& base) {
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

// ---- row reductions: kReductionLanes partials as (32 / W) accumulators of W lanes, then a halving tree
// u: the values are unsigned (u64), ordered as such by max and min.
Value* Emitter::identity(Op op, llvm::Type* t, bool u) {
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

// Accumulates v into acc. Max/min: v replaces acc when it is NaN or beyond it, so a NaN stays once met; equal
// values (±0) keep the earlier one, as the reference's sequential fold does. Two compares and a blend
// (row_max_num: one compare, a NaN v never beyond).
Value* Emitter::combine(Op op, Value* acc, Value* v, bool u) {
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
Value* Emitter::minmax(bool is_max, Value* a, Value* b, bool u) {
  if (a->getType()->isFPOrFPVectorTy()) {
    Value* pick = is_max ? B.CreateSelect(B.CreateFCmpOLT(a, b), b, a) : B.CreateSelect(B.CreateFCmpOLT(b, a), b, a);
    pick = B.CreateSelect(B.CreateFCmpUNO(b, b), b, pick);
    return B.CreateSelect(B.CreateFCmpUNO(a, a), a, pick);
  }
  return is_max ? B.CreateSelect(icmp_gt(b, a, u), b, a) : B.CreateSelect(icmp_gt(a, b, u), b, a);
}

Value* Emitter::arg_wins(const Expr& e, Arg a, Arg b) { // whether b beats a
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

Emitter::Arg Emitter::arg_combine(const Expr& e, Arg a, Arg b) {
  Value* wins = arg_wins(e, a, b);
  return {B.CreateSelect(wins, b.v, a.v), B.CreateSelect(wins, b.i, a.i)};
}

// Beaten by every element: the far end of the values, at a position every tie prefers the element's to.
Emitter::Arg Emitter::arg_identity(const Expr& e, int w) {
  llvm::Type* vt = vec(scalar_ty(K.exprs[size_t(e.a)].type), w);
  int64_t far = e.imm != 0 ? -1 : std::numeric_limits<int64_t>::max();
  return {identity(e.op == Op::row_argmax ? Op::row_max : Op::row_min, vt, is_unsigned(K.exprs[size_t(e.a)].type)),
          llvm::ConstantInt::get(vec(B.getInt64Ty(), w), uint64_t(far), true)};
}

Value* Emitter::reduce_row_arg(const Expr& e) {
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
bool Emitter::first_pass(const Expr& e) const {
  for (const Expr& x : K.exprs)
    if (is_row_reduction(x.op)) return &x == &e;
  return false;
}

void Emitter::prefetch_next_row(Value* j) {
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
Value* Emitter::ordered_combine(Op op, Value* acc, Value* v) {
  return B.CreateSelect(is_max_op(op) ? B.CreateFCmpOGT(v, acc) : B.CreateFCmpOLT(v, acc), v, acc);
}

Value* Emitter::reduce_row(const Expr& e) {
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

}  // namespace cuvil::codegen
