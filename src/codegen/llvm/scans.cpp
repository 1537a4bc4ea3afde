// Scans (CumSum): running sums carried from step to step along the row (kScanLanes-wide steps, fixing the
// association), or down each lane's column.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

                                   // same; columns: each lane its column's)
Carried Emitter::scan_zeros(int w) {
  Carried z;
  for (int e : scans) z.push_back(llvm::Constant::getNullValue(vec(scalar_ty(K.exprs[size_t(e)].type), w)));
  return z;
}

// Row kernels: kScanLanes-wide steps from the row's start (or its end), carrying the running sums; the step
// holding the row's tail (masked) comes last (or first). The width is the kernel IR's, not the schedule's: it
// fixes how the sums associate. No unrolling: each step waits for the one before.
void Emitter::scan_loop(Value* lo, Value* hi) {
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
Value* Emitter::scan(int e, Value* v, const Lanes& l) {
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

}  // namespace cuvil::codegen
