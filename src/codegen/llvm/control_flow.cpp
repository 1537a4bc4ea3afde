#include "codegen/llvm/control_flow.h"

namespace cuvil::codegen {

Carried emit_loop(llvm::IRBuilder<>& B, llvm::Value* lo, llvm::Value* hi, llvm::Value* step, Carried init,
                  const std::function<Carried(llvm::Value*, const Carried&)>& body) {
  llvm::BasicBlock* pre = B.GetInsertBlock();
  llvm::Function* F = pre->getParent();
  llvm::LLVMContext& C = B.getContext();
  auto* head = llvm::BasicBlock::Create(C, "loop.head", F);
  auto* bb = llvm::BasicBlock::Create(C, "loop.body", F);
  auto* exit = llvm::BasicBlock::Create(C, "loop.exit", F);
  B.CreateBr(head);
  B.SetInsertPoint(head);
  llvm::PHINode* iv = B.CreatePHI(B.getInt64Ty(), 2, "iv");
  iv->addIncoming(lo, pre);
  Carried phis;
  for (llvm::Value* v : init) {
    llvm::PHINode* p = B.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    phis.push_back(p);
  }
  B.CreateCondBr(B.CreateICmpSLT(iv, hi), bb, exit);
  B.SetInsertPoint(bb);
  Carried next = body(iv, phis);
  llvm::Value* ivn = B.CreateAdd(iv, step);
  llvm::BasicBlock* latch = B.GetInsertBlock();
  B.CreateBr(head);
  iv->addIncoming(ivn, latch);
  for (size_t i = 0; i < phis.size(); ++i) llvm::cast<llvm::PHINode>(phis[i])->addIncoming(next[i], latch);
  B.SetInsertPoint(exit);
  return phis;
}

Carried emit_if(llvm::IRBuilder<>& B, llvm::Value* cond, const Carried& vals,
                const std::function<Carried(Carried)>& then) {
  llvm::BasicBlock* pre = B.GetInsertBlock();
  llvm::Function* F = pre->getParent();
  llvm::LLVMContext& C = B.getContext();
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

}  // namespace cuvil::codegen
