// Matrix-product building blocks of the reference kernels: accumulation types, conversion into contiguous
// accumulation-typed buffers, and the row-times-matrix loop.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/tensor.h"

namespace cuvil::ref::nn {

// The type products are summed in: float for f16/bf16/f32 (matches PyTorch well within 1e-4 and vectorizes),
// double for f64, and for integers an unsigned type of at least 32 bits, so overflow wraps (well defined) and
// the result is the exact two's-complement value of the integer arithmetic.
template <class T>
struct acc_type {
  using type = std::make_unsigned_t<std::conditional_t<(sizeof(T) < 4), int32_t, T>>;
};
template <> struct acc_type<float> { using type = float; };
template <> struct acc_type<double> { using type = double; };
template <> struct acc_type<f16_t> { using type = float; };
template <> struct acc_type<bf16_t> { using type = float; };
template <class T> using acc_t = typename acc_type<T>::type;

// An accumulator value back to T (integers: modular, as the arithmetic in T would give).
template <class T, class A>
T from_acc(A v) {
  if constexpr (is_float_v<T>) return T(compute_t<T>(v));
  else if constexpr (std::is_signed_v<T>) return T(std::make_signed_t<A>(v));
  else return T(v);
}

// The tensor's elements as A: its own data when T is A, else converted into `buf`.
template <class A, class T>
const A* as_acc(const Tensor& t, std::vector<A>& buf) {
  const T* p = t.data<T>();
  if constexpr (std::is_same_v<A, T>) {
    return p;
  } else {
    buf.resize(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) buf[size_t(i)] = static_cast<A>(p[i]);
    return buf.data();
  }
}

// c[m, n] += sum over k of a[m, k] * b[k, n] (row-major, contiguous). The inner loop runs along rows of b and c.
template <class A>
void matmul_acc(const A* a, const A* b, A* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    A* cr = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const A av = a[i * k + p];
      const A* br = b + p * n;
      for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
  }
}

// Shapes of a numpy matmul: 1-D operands promoted to [1, K] / [K, 1], batch dims broadcast.
struct MatmulShape {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> batch;                // broadcast batch dims of the result
  std::vector<int64_t> a_batch, b_batch;     // each operand's batch dims
};

inline MatmulShape matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  MatmulShape s;
  std::vector<int64_t> ad = a, bd = b;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  s.m = ad[ad.size() - 2];
  s.k = ad.back();
  s.n = bd.back();
  s.a_batch.assign(ad.begin(), ad.end() - 2);
  s.b_batch.assign(bd.begin(), bd.end() - 2);
  size_t r = std::max(s.a_batch.size(), s.b_batch.size());
  s.batch.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + s.a_batch.size() >= r ? s.a_batch[i + s.a_batch.size() - r] : 1;
    int64_t y = i + s.b_batch.size() >= r ? s.b_batch[i + s.b_batch.size() - r] : 1;
    s.batch[i] = x == 1 ? y : x;
  }
  return s;
}

}  // namespace cuvil::ref::nn
