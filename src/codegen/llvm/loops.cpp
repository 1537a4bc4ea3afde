// Loop skeletons: row offsets, the per-row values and stores, the element loop over a row (or a flat range), and
// the columns kernels' steps of W lanes walking down their columns.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

// ---- rows
// row_off for flat index `row` over the first `outer_dims` dims.
void Emitter::set_row_offsets(Value* row, size_t outer_dims) {
  size_t nops = K.operands.size();
  row_off.assign(nops, B.getInt64(0));
  Value* rem = row;
  for (size_t d = outer_dims; d-- > 0;) {
    Value* idx = d == 0 ? rem : B.CreateURem(rem, dim[d]);
    if (d > 0) rem = B.CreateUDiv(rem, dim[d]);
    for (size_t o = 0; o < nops; ++o) row_off[o] = B.CreateAdd(row_off[o], B.CreateMul(idx, stride[o][d]));
  }
}

void Emitter::begin_row(Value* row) {
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

void Emitter::per_row_stores() {
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
void Emitter::element_loop(Value* lo, Value* hi) {
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

// ---- columns: W lanes of the innermost dim at a time (no unrolling: each step holds its own loops), a masked
// step for the tail.
void Emitter::column_loop(Value* lo, Value* hi) {
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

// Per expression: whether it is a row reduction or reads one's result (directly or through others).
std::vector<bool> Emitter::reduction_dependent() const {
  std::vector<bool> dep(K.exprs.size(), false);
  for (size_t i = 0; i < K.exprs.size(); ++i) {
    const Expr& e = K.exprs[i];
    dep[i] = is_row_reduction(e.op);
    for (int a : {e.a, e.b, e.c})
      if (a >= 0 && dep[size_t(a)]) dep[i] = true;
  }
  return dep;
}

// A column-level value that needs no walk down the columns: a column-broadcast load, the column's length, or
// math on such values (uval holds its operands).
Value* Emitter::column_value(const Expr& e, const Lanes& l) {
  if (e.op == Op::load) return load(e, l);
  if (e.op == Op::row_size)
    return splat(B.CreateSIToFP(splat_i64_1(dim[size_t(K.rank) - 2]), vec(scalar_ty(e.type), 1)), l.w);
  return compute(e, arg1(e.a), arg1(e.b), arg1(e.c), l.w);
}

// Whether one walk down the columns can compute the reductions and the element-level outputs together: no
// element-level output and no reduction's input depends on a reduction's result, every reduction is a plain
// sum/prod/max/min, and there are no scans, TopK or shifted loads. A squeeze-excitation block's SiLU and its
// spatial mean (timm's x.mean((2, 3)) on channels-last data) then compute the SiLU once, not once per walk.
bool Emitter::column_one_walk() const {
  if (K.has_scans() || K.has_shifted_loads()) return false;
  const std::vector<bool> dep = reduction_dependent();
  bool any_reduction = false;
  for (const Expr& e : K.exprs) {
    if (e.op == Op::row_topk || e.op == Op::row_topk_index || e.op == Op::row_argmax || e.op == Op::row_argmin)
      return false;
    if (!is_row_reduction(e.op)) continue;
    if (e.a >= 0 && dep[size_t(e.a)]) return false;  // (Softmax down the columns: its sum reads x - max)
    any_reduction = true;
  }
  bool elements = false;
  for (const Store& s : K.stores) {
    const Operand& o = K.operands[size_t(s.operand)];
    if (o.entries > 0) return false;
    if (o.per_row) continue;
    if (dep[size_t(s.expr)]) return false;
    elements = true;
  }
  return any_reduction && elements;
}

// column_step in one walk (column_one_walk): the column-level values that need no reduction first, then each row
// of the columns once, its reductions' inputs and its element-level outputs from one memo, then the reductions'
// results and what depends on them, and the per-row outputs. Each reduction still combines element after element
// down the column, so its result is the two-walk one bit for bit.
void Emitter::column_step_one_walk(const Lanes& l) {
  const std::vector<Value*> base = row_off;
  const std::vector<bool> after = reduction_dependent();  // computed after the walk
  uval.assign(K.exprs.size(), nullptr);
  std::vector<int> reductions;
  Carried init;
  for (size_t i = 0; i < K.exprs.size(); ++i) {
    const Expr& e = K.exprs[i];
    if (is_row_reduction(e.op)) {
      reductions.push_back(int(i));
      init.push_back(identity(e.op, vec(scalar_ty(e.type), l.w), is_unsigned(e.type)));
    } else if (uniform[i] && !after[i]) {
      uval[i] = column_value(e, l);
    }
  }
  Carried acc = loop(B.getInt64(0), dim[size_t(K.rank) - 2], B.getInt64(1), init, [&](Value* r, const Carried& a) {
    down_column(base, r);
    std::vector<Value*> memo(K.exprs.size(), nullptr);
    Carried next;
    for (size_t q = 0; q < reductions.size(); ++q) {
      const Expr& e = K.exprs[size_t(reductions[q])];
      next.push_back(combine(e.op, a[q], elem(e.a, l, memo), is_unsigned(e.type)));
    }
    store_elements(l, &memo);
    return next;
  });
  row_off = base;
  for (size_t q = 0; q < reductions.size(); ++q) uval[size_t(reductions[q])] = acc[q];
  for (size_t i = 0; i < K.exprs.size(); ++i)
    if (uniform[i] && after[i] && !is_row_reduction(K.exprs[i].op)) uval[i] = column_value(K.exprs[i], l);
  for (const Store& s : K.stores) {
    const Operand& o = K.operands[size_t(s.operand)];
    if (o.per_row) store_at(s.operand, l, to_storage(uval[size_t(s.expr)], o.dtype));
  }
}

// The column-level values of these lanes (uval holds them W wide), the per-row outputs, then one more walk
// down the columns for the element-level outputs.
void Emitter::column_step(const Lanes& l) {
  if (column_one_walk()) {
    column_step_one_walk(l);
    return;
  }
  const std::vector<Value*> base = row_off;
  Value* rows = dim[size_t(K.rank) - 2];
  uval.assign(K.exprs.size(), nullptr);
  for (size_t i = 0; i < K.exprs.size(); ++i) {
    if (!uniform[i]) continue;
    const Expr& e = K.exprs[i];
    if (e.op == Op::row_topk) uval[i] = reduce_column_topk(int(i), l, base);
    else if (e.op == Op::row_topk_index) uval[i] = topk[size_t(e.a)].idx[0];
    else if (is_row_reduction(e.op)) uval[i] = reduce_column(e, l, base);
    else uval[i] = column_value(e, l);
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

void Emitter::down_column(const std::vector<Value*>& base, Value* r) {
  column_pos = r;
  for (size_t o = 0; o < base.size(); ++o)
    row_off[o] = B.CreateAdd(base[o], B.CreateMul(r, stride[o][size_t(K.rank) - 2]));
}

}  // namespace cuvil::codegen
