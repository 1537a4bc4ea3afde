// Quantization arithmetic shared by the reference kernels: round half to even, saturate, and broadcast reads of
// per-tensor / per-row / per-channel parameters.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ir/tensor.h"
#include "kernels/ref/indexing.h"

namespace cuvil::ref::nn {

// saturate(round_half_even(scaled) + zero_point) into Q. NaN quantizes to the zero point (the real value 0), so no
// NaN ever reaches an integer conversion.
template <class Q>
Q quantize_value(double scaled, int64_t zero_point) {
  double r = std::isnan(scaled) ? 0.0 : std::nearbyint(scaled);  // default rounding mode: to nearest even
  double v = r + double(zero_point);
  v = std::min<double>(std::max<double>(v, double(std::numeric_limits<Q>::min())),
                       double(std::numeric_limits<Q>::max()));
  return Q(v);
}

// A quantization parameter tensor's values as int64 or double, whatever its integer or float dtype.
inline std::vector<int64_t> param_ints(const Tensor* t) {
  if (!t) return {0};
  std::vector<int64_t> v(size_t(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) v[size_t(i)] = t->get_i64(i);
  return v;
}
inline std::vector<double> param_floats(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.get_f64(i);
  return v;
}

// Strides that read a matrix-product parameter (zero point) broadcast over its operand: a scalar, a 1-D tensor
// per row of A ([M] read as [M, 1]) or per column of B ([N] as [1, N]), or a tensor broadcastable to the operand.
inline std::vector<int64_t> param_strides(const Tensor* p, const std::vector<int64_t>& operand, bool is_a) {
  if (!p || p->numel() == 1) return std::vector<int64_t>(operand.size(), 0);
  std::vector<int64_t> shape = p->shape();
  if (shape.size() == 1) shape = is_a ? std::vector<int64_t>{shape[0], 1} : std::vector<int64_t>{1, shape[0]};
  return broadcast_strides(shape, operand);
}

// The operand minus its zero point, as wrapping 32-bit integers (products and sums of these wrap exactly like
// int32 arithmetic, without undefined behaviour).
template <class T>
std::vector<uint32_t> centered(const Tensor& x, const Tensor* zp, const std::vector<int64_t>& zp_strides) {
  std::vector<uint32_t> out(size_t(x.numel()));
  const T* xp = x.data<T>();
  std::vector<int64_t> z = param_ints(zp);
  MultiIndex it(x.shape(), {zp_strides});
  for (int64_t i = 0; i < x.numel(); ++i, it.next())
    out[size_t(i)] = uint32_t(int32_t(xp[i]) - int32_t(z[size_t(it.offset(0))]));
  return out;
}

}  // namespace cuvil::ref::nn
