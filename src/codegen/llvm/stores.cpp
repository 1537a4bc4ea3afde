// Element-level stores: plain, masked for tails, or streaming (non-temporal, for outputs far larger than the
// caches, under run-time alignment checks); and the row cache that keeps Softmax's exp for the output pass.
#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

// With Schedule::streaming_stores: the run-time condition under which the element-level f32 outputs may be
// written with non-temporal stores (each dense with its base aligned to 64 bytes, rows a multiple of 16
// elements, and an element-wise kernel's range starting at a multiple of 16, so that every full vector store
// is aligned), or null when the kernel has nothing to stream. Masked tail stores stay plain.
Value* Emitter::streaming_possible(Value* begin, Value* inner) {
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

// Computes every element-level output at these lanes, then stores them (all loads precede all stores, so the
// row cache below may live in an output's buffer).
void Emitter::store_elements(const Lanes& l, std::vector<Value*>* shared) {
  std::vector<Value*> own;
  if (!shared) {
    own.assign(K.exprs.size(), nullptr);
    if (cache_expr >= 0) own[size_t(cache_expr)] = access_cache(l, nullptr);
  }
  std::vector<Value*>& memo = shared ? *shared : own;
  std::vector<std::pair<const Store*, Value*>> values;
  for (const Store& s : K.stores) {
    const Operand& o = K.operands[size_t(s.operand)];
    if (o.per_row) continue;
    values.emplace_back(&s, to_storage(elem(s.expr, l, memo), o.dtype));
  }
  for (auto& [s, v] : values) store_at(s->operand, l, v, streaming);
}

// `stream`: a full f32 vector goes out with a non-temporal store (see streaming_possible).
void Emitter::store_at(int operand, const Lanes& l, Value* v, bool stream) {
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

// While the output streams, the output's lines must not be read back: the values go to a stack buffer instead
// (rows of at most kStackRowCache floats; streaming_possible checks).
Value* Emitter::access_cache(const Lanes& l, Value* v) {
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

void Emitter::choose_cache() {
  cache_expr = K.row_cache_expr();
  for (const Store& st : K.stores) {
    const Operand& o = K.operands[size_t(st.operand)];
    if (cache_expr >= 0 && !o.per_row && o.dtype == DType::f32) {
      cache_operand = st.operand;
      break;
    }
  }
}

}  // namespace cuvil::codegen
