// Loops and branches with values carried through them (phi nodes), at the builder's insertion point.
#pragma once

#include <functional>
#include <vector>

#include <llvm/IR/IRBuilder.h>

namespace cuvil::codegen {

using Carried = std::vector<llvm::Value*>;

// for (iv = lo; iv < hi; iv += step) vals = body(iv, vals): the values after the loop.
Carried emit_loop(llvm::IRBuilder<>& B, llvm::Value* lo, llvm::Value* hi, llvm::Value* step, Carried init,
                  const std::function<Carried(llvm::Value*, const Carried&)>& body);
// if (cond) vals = then(vals): the values after, merged.
Carried emit_if(llvm::IRBuilder<>& B, llvm::Value* cond, const Carried& vals,
                const std::function<Carried(Carried)>& then);

}  // namespace cuvil::codegen
