// Dim permutation of a dense tensor (dst dim i = src dim perm[i]), for any dtype. A plain loop: the reference
// kernels use it to move between layouts; fast transposes live in src/kernels/cpu.
#pragma once

#include <vector>

#include "ir/tensor.h"

namespace cuvil {

// dst must already have the permuted shape and src's dtype.
void permute_into(const Tensor& src, const std::vector<int64_t>& perm, Tensor& dst);
Tensor permuted(const Tensor& src, const std::vector<int64_t>& perm);

}  // namespace cuvil
