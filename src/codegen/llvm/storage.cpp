// Memory <-> registers: the LLVM types of scalars and storage dtypes, loads (contiguous, broadcast, gathered,
// shifted along the row) and the widening and narrowing of 16-bit floats and narrow integers.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

llvm::Type* Emitter::scalar_ty(Scalar s) {
  switch (s) {
    case Scalar::f32: return B.getFloatTy();
    case Scalar::i32: return B.getInt32Ty();
    case Scalar::i64: case Scalar::u64: return B.getInt64Ty();
    case Scalar::i1: return B.getInt1Ty();
    case Scalar::f64: return B.getDoubleTy();
  }
  return nullptr;
}

llvm::Type* Emitter::storage_ty(DType d) {
  if (d == DType::boolean || d == DType::i8 || d == DType::u8) return B.getInt8Ty();
  if (d == DType::i16 || d == DType::u16) return B.getInt16Ty();
  if (d == DType::u32) return B.getInt32Ty();
  if (d == DType::bf16) return B.getInt16Ty();  // bits; widened by shifting into an f32's high half
  if (d == DType::f16) return B.getHalfTy();
  return scalar_ty(scalar_of(d));
}

Value* Emitter::to_storage(Value* v, DType d) {
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
Value* Emitter::from_storage(Value* v, DType d) {
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
Value* Emitter::round_bf16(Value* v, bool truncate) {
  llvm::Type* it = ivec(v);
  Value* x = B.CreateBitCast(v, it);
  Value* r = x;
  if (!truncate)
    r = B.CreateAdd(x, B.CreateAdd(ic(it, 0x7fff), B.CreateAnd(B.CreateLShr(x, ic(it, 16)), ic(it, 1))));
  r = B.CreateAnd(r, ic(it, int64_t(0xffff0000u)));
  Value* nan = B.CreateOr(B.CreateAnd(x, ic(it, int64_t(0xffff0000u))), ic(it, 0x400000));
  return B.CreateBitCast(B.CreateSelect(B.CreateFCmpUNO(v, v), nan, r), v->getType());
}

// The elements x.imm positions further along the row (down the columns), 0 beyond the row's ends.
Value* Emitter::shifted_load(const Expr& x, const Lanes& l) {
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

Value* Emitter::load(const Expr& x, const Lanes& l) {
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

}  // namespace cuvil::codegen
