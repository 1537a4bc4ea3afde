#include "runtime/strided_copy.h"

#include <cstring>

#include "kernels/parallel.h"
#include "support/error.h"

namespace cuvil {

bool is_contiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  for (int64_t n : shape)
    if (n == 0) return true;
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

namespace {

// Dims after dropping size-1 dims and merging neighbours that are contiguous with each other.
void merge_dims(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, std::vector<int64_t>& dims,
                std::vector<int64_t>& steps) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && steps.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      steps.back() = strides[d];
    } else {
      dims.push_back(shape[d]);
      steps.push_back(strides[d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    steps.push_back(1);
  }
}

template <class T>
void copy_rows(T* dst, const T* src, const std::vector<int64_t>& dims, const std::vector<int64_t>& steps,
               int64_t row_begin, int64_t row_end) {
  size_t r = dims.size();
  int64_t inner = dims[r - 1], step = steps[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  // Position of the first row.
  int64_t rest = row_begin;
  for (size_t d = r - 1; d-- > 0;) {
    idx[d] = rest % dims[d];
    rest /= dims[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    int64_t off = 0;
    for (size_t d = 0; d + 1 < r; ++d) off += idx[d] * steps[d];
    const T* s = src + off;
    T* o = dst + row * inner;
    if (step == 1) {
      std::memcpy(o, s, size_t(inner) * sizeof(T));
    } else {
      for (int64_t i = 0; i < inner; ++i) o[i] = s[i * step];
    }
    for (size_t d = r - 1; d-- > 0;) {  // next row index
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void copy_typed(void* dst, const void* src, const std::vector<int64_t>& dims, const std::vector<int64_t>& steps) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
  cpu::parallel_ranges(rows, dims.back(), 1, [&](int64_t b, int64_t e) {
    copy_rows(static_cast<T*>(dst), static_cast<const T*>(src), dims, steps, b, e);
  });
}

}  // namespace

void copy_strided(void* dst, const void* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                  size_t elem_size) {
  for (int64_t n : shape)
    if (n == 0) return;
  std::vector<int64_t> dims, steps;
  merge_dims(shape, strides, dims, steps);
  switch (elem_size) {
    case 1: copy_typed<uint8_t>(dst, src, dims, steps); break;
    case 2: copy_typed<uint16_t>(dst, src, dims, steps); break;
    case 4: copy_typed<uint32_t>(dst, src, dims, steps); break;
    case 8: copy_typed<uint64_t>(dst, src, dims, steps); break;
    default: CUVIL_ASSERT(false, "copy_strided of ", elem_size, "-byte elements");
  }
}

}  // namespace cuvil
