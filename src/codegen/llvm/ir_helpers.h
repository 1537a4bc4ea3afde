// Small helpers for building vector IR: the vector type of a scalar type, a vector's width, splatted constants.
#pragma once

#include <cstdint>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Value.h>

namespace cuvil::codegen {

inline llvm::Type* vec(llvm::Type* t, int w) { return llvm::FixedVectorType::get(t, unsigned(w)); }
inline int width(llvm::Value* v) { return int(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements()); }
// The float constant v in the (vector) type of `like`.
inline llvm::Value* fc(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
// The integer constant v in (vector) type t.
inline llvm::Value* ic(llvm::Type* t, int64_t v) { return llvm::ConstantInt::get(t, uint64_t(v), true); }
// <w x i32> of the width of `like`; <w x double>.
inline llvm::Type* ivec(llvm::Value* like) { return vec(llvm::Type::getInt32Ty(like->getContext()), width(like)); }
inline llvm::Type* dvec(llvm::LLVMContext& c, int w) { return vec(llvm::Type::getDoubleTy(c), w); }

}  // namespace cuvil::codegen
