// Helpers shared by the reduction family's reference kernels: dtype dispatch restricted to the types an op
// accepts, conversions through double, and the outer/axis/inner split most of these ops iterate over.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/kernel_context.h"
#include "kernels/ref/indexing.h"

namespace cuvil::ref {

// Calls fn.template operator()<T>() for the float dtypes; any other dtype is an error naming the node.
template <class Fn>
void visit_float_dtype(const KernelContext& ctx, DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::f16: return fn.template operator()<f16_t>();
    case DType::bf16: return fn.template operator()<bf16_t>();
    default: ctx.error("unsupported dtype ", dtype_name(t), " (expected a float type)");
  }
}

// Same, for every number type (everything but bool).
template <class Fn>
void visit_number_dtype(const KernelContext& ctx, DType t, Fn&& fn) {
  if (t == DType::boolean) ctx.error("unsupported dtype bool");
  visit_dtype(t, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) fn.template operator()<T>();
  });
}

template <class T>
bool is_nan(T v) {
  if constexpr (is_float_v<T>) return std::isnan(double(compute_t<T>(v)));
  else return false;
}

template <class T>
double to_f64(T v) {
  return double(compute_t<T>(v));
}

// double -> T: rounds for floats; for integers truncates toward zero and saturates (NaN gives 0), so that
// results like log(0) = -inf never reach an undefined float-to-int conversion.
template <class T>
T from_f64(double v) {
  if constexpr (is_float_v<T>) {
    return T(compute_t<T>(v));
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(v);
  }
}

// Reads any float or integer tensor as doubles (for small parameter tensors: scales, biases, statistics).
inline std::vector<double> to_f64_vector(const Tensor& t) {
  std::vector<double> r(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[size_t(i)] = t.get_f64(i);
  return r;
}

// Writes element i of a float tensor of any float dtype.
inline void set_f64(const KernelContext& ctx, Tensor& t, int64_t i, double v) {
  visit_float_dtype(ctx, t.dtype(), [&]<class T>() { t.data<T>()[i] = from_f64<T>(v); });
}

inline int64_t normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) ctx.error("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// A shape seen as [outer, n, inner] around one axis (or around a range of axes [first, last)).
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisSplit split_axes(const std::vector<int64_t>& shape, size_t first, size_t last) {
  AxisSplit s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < first) s.outer *= shape[d];
    else if (d < last) s.n *= shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

inline AxisSplit split_at(const std::vector<int64_t>& shape, int64_t axis) {
  return split_axes(shape, size_t(axis), size_t(axis) + 1);
}

// Strides that map an index of `shape` to the row-major offset of its group, where the axes in `reduced`
// collapse to one element (stride 0). Used by reductions over an arbitrary set of axes.
inline std::vector<int64_t> group_strides(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> s(shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (reduced[d]) continue;
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

}  // namespace cuvil::ref
