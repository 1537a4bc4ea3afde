// Dim permutation of a dense tensor (dst dim i = src dim perm[i]), for any dtype, as plain loops: the reference
// Transpose kernel, and the reference kernels that move between layouts (channels-last, transposed operands).
#pragma once

#include <vector>

#include "ir/tensor.h"

namespace cuvil::ref {

// dst must already have the permuted shape and src's dtype. perm holds non-negative dims.
void permute_into(const Tensor& src, const std::vector<int64_t>& perm, Tensor& dst);
Tensor permuted(const Tensor& src, const std::vector<int64_t>& perm);

}  // namespace cuvil::ref
