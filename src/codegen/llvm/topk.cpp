// TopK: per lane, the K best (value, position) pairs of its column so far, best first, in registers. Positions
// arrive in order, so an element enters where it beats a pair strictly (equal values keep the earlier first);
// slots not yet filled (position -1) lose to everything. Each element is inserted by a network of selects: slot k
// takes slot k-1's pair where the element beats slot k-1, the element where it beats slot k only, else keeps its
// own.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

// Whether v (at a later position) goes before the pair (w, at) of row_topk x.
Value* Emitter::topk_beats(const Expr& x, Value* v, Value* w, Value* at) {
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
Carried Emitter::topk_insert(const Expr& x, const Carried& a, Value* v, Value* pos) {
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

Carried Emitter::topk_empty(const Expr& x, int w) {
  size_t k = size_t(std::abs(int64_t(x.imm)));
  Carried init;
  for (size_t q = 0; q < k; ++q) init.push_back(llvm::Constant::getNullValue(vec(scalar_ty(x.type), w)));
  for (size_t q = 0; q < k; ++q) init.push_back(llvm::ConstantInt::get(vec(B.getInt64Ty(), w), uint64_t(-1), true));
  return init;
}

// Row kernels: one set of pairs for the row. W elements at a time are compared with the last pair; the few
// that beat it enter one by one, in order.
Value* Emitter::reduce_row_topk(int e) {
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

Value* Emitter::reduce_column_topk(int e, const Lanes& l, const std::vector<Value*>& base) {
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
void Emitter::store_entries(const Store& s, const Lanes& l) {
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

}  // namespace cuvil::codegen
