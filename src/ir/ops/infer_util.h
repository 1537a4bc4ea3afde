// Building blocks shared by the op definitions' shape inference.
#pragma once

#include "ir/op_schema.h"

namespace cuvil::infer {

// Normalizes a possibly negative axis into [0, rank); fails naming the node when out of range.
int64_t normalize_axis(const InferContext& c, int64_t axis, int64_t rank);
// Multidirectional (numpy) broadcasting of two shapes. A symbolic dim against a constant > 1 takes the constant;
// two different symbols give max(a, b) (exact whenever the model is valid).
Shape broadcast(const InferContext& c, const Shape& a, const Shape& b);
// Output 0 = input 0's dtype and shape.
void same_as_input(InferContext& c);
// Output 0 = broadcast of all present inputs, with input 0's dtype (or `dtype` when given).
void broadcast_inputs(InferContext& c, std::optional<DType> dtype = std::nullopt);
// Fails unless input i has one of the given dtypes.
void expect_dtype(const InferContext& c, size_t i, std::initializer_list<DType> allowed);
// Fails unless inputs i and j have the same dtype.
void expect_same_dtype(const InferContext& c, size_t i, size_t j);
// The input's contents as int64s when known (constant at compile time, always at run time).
std::optional<std::vector<int64_t>> const_ints(InferContext& c, size_t i);
// A shape of `rank` fresh dims (for outputs whose size is data-dependent).
Shape fresh_shape(InferContext& c, size_t rank);

}  // namespace cuvil::infer
