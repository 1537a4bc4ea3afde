// Copies a strided view of memory (a NumPy or torch slice, a window of a larger batch) into a dense row-major
// buffer. The executor uses it to make a non-contiguous input contiguous once, inside the plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cuvil {

// True when `strides` (in elements) are those of a dense row-major tensor of `shape`; dims of size 1 may have any
// stride, and an empty tensor is contiguous.
bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

// dst[i] = src[sum_d index_d * strides[d]] over the row-major index space of `shape`; strides in elements of
// `elem_size` bytes, of any sign (0 repeats an element). `src` points at the element of index [0, 0, ...].
void copy_strided(void* dst, const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                  size_t elem_size);

}  // namespace cuvil
