// Index arithmetic of the tensor family that shape inference and the reference kernels must agree on exactly
// (Slice's clamping, Shape's start/end), kept in one place so the two can never drift apart.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace cuvil::tensor_ops {

// One axis of a Slice after ONNX's clamping rules: the first index read, the step, and the element count.
struct SliceRange {
  int64_t start = 0;
  int64_t step = 1;
  int64_t len = 0;
};

// `step` must be nonzero. Negative starts/ends count from the back; both are clamped to the valid range for the
// step's direction ([0, dim] forward, [-1, dim-1] backward for the end).
inline SliceRange slice_range(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceRange r;
  // -INT64_MIN overflows; no real axis is that long, so the smallest representable step behaves the same.
  r.step = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::min() + 1 : step;
  if (dim <= 0) return r;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (r.step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    r.start = start;
    r.len = end > start ? (end - start - 1) / r.step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    r.start = start;
    r.len = start > end ? (start - end - 1) / -r.step + 1 : 0;
  }
  return r;
}

// Shape's [start, end) over the axes of a rank-r input (negative values count from the back; clamped to [0, r]).
struct AxisRange {
  int64_t begin = 0;
  int64_t end = 0;
};

inline AxisRange shape_axis_range(int64_t rank, int64_t start, bool has_end, int64_t end) {
  if (!has_end) end = rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  AxisRange r;
  r.begin = std::clamp<int64_t>(start, 0, rank);
  r.end = std::max(r.begin, std::clamp<int64_t>(end, 0, rank));
  return r;
}

// Pad's reflect mode: the source index for position i (may lie outside [0, n)) on an axis of n > 0 elements,
// mirrored on the first and last elements (numpy's 'reflect'), repeating for pads wider than the axis.
inline int64_t reflect_index(int64_t i, int64_t n) {
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  int64_t m = i % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

}  // namespace cuvil::tensor_ops
