// The kernel function: its signature, entry block and the loop structure per kernel kind (element-wise, rows,
// columns), twice where streaming stores may apply; and emit_kernel, the entry point.
#include "codegen/llvm/emit.h"

#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/emitter.h"

namespace cuvil::codegen {

void Emitter::emit(const std::string& symbol, const llvm::TargetMachine& tm) {
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
  math.emplace(B, M, avx512f, avx512vl);
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
  CUVIL_ASSERT(!llvm::verifyFunction(*F, &os), "generated kernel does not verify: ", os.str());
}

// Rows [begin, end) (row kernels), flat elements [begin, end) (element-wise kernels) or flat positions of the
// outer rows x the innermost dim (columns kernels).
void Emitter::emit_loops(Value* begin, Value* end, Value* inner) {
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
void Emitter::stretches(Value* begin, Value* end, Value* inner, const std::function<void(Value*, Value*, Value*)>& f) {
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
