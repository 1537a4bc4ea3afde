// Index arithmetic shared by the reference kernels: row-major strides, broadcasting, multi-index iteration.
#pragma once

#include <cstdint>
#include <vector>

namespace cuvil::ref {

// Row-major element strides of a contiguous shape.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Strides to read an input of shape `in` broadcast to `out` (numpy rules: right-aligned; size-1 dims stride 0).
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> is = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : is[i];
  return s;
}

// Iterates a multi-index over `shape` in row-major order, keeping several strided offsets in step.
// Usage: MultiIndex it(shape, {strides_a, strides_b}); for (int64_t n = 0; n < numel; ++n, it.next()) { it.offset(0) }
class MultiIndex {
 public:
  MultiIndex(const std::vector<int64_t>& shape, std::vector<std::vector<int64_t>> strides)
      : shape_(shape), strides_(std::move(strides)), idx_(shape.size(), 0), off_(strides_.size(), 0) {}
  int64_t offset(size_t k) const { return off_[k]; }
  const std::vector<int64_t>& index() const { return idx_; }
  void next() {
    for (size_t d = shape_.size(); d-- > 0;) {
      if (++idx_[d] < shape_[d]) {
        for (size_t k = 0; k < off_.size(); ++k) off_[k] += strides_[k][d];
        return;
      }
      for (size_t k = 0; k < off_.size(); ++k) off_[k] -= strides_[k][d] * (shape_[d] - 1);
      idx_[d] = 0;
    }
  }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> idx_;
  std::vector<int64_t> off_;
};

}  // namespace cuvil::ref
