#include "ir/tensor.h"

#include <cmath>

#include "ir/low_precision.h"

#include <cstdlib>
#include <cstring>

namespace cuvil {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    CUVIL_CHECK(d >= 0, "negative dimension ", d, " in shape ", shape_str(shape));
    CUVIL_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", shape_str(shape), " has more elements than int64 holds");
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  size_t bytes = t.nbytes();
  CUVIL_CHECK(bytes < (size_t(1) << 40), "tensor of ", t.type_str(), " is too large to allocate");
  size_t alloc = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (alloc == 0) alloc = kTensorAlignment;
  void* p = std::aligned_alloc(kTensorAlignment, alloc);
  CUVIL_CHECK(p, "out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, alloc);
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::view(DType dtype, std::vector<int64_t> shape, void* data) {
  CUVIL_ASSERT(data, "tensor view of a null pointer");
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = zeros(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  CUVIL_ASSERT(shape_numel(shape) == numel_, "reshape of ", type_str(), " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

double Tensor::get_f64(int64_t i) const {
  if (is_low_precision(dtype_)) return low_precision_decode(dtype_, static_cast<const uint8_t*>(data_)[i]);
  return visit_dtype(dtype_, [&]<class T>() { return double(compute_t<T>(static_cast<const T*>(data_)[i])); });
}

int64_t Tensor::get_i64(int64_t i) const {
  if (is_low_precision(dtype_)) {
    double v = get_f64(i);
    return std::isfinite(v) ? int64_t(v) : 0;
  }
  return visit_dtype(dtype_, [&]<class T>() -> int64_t {
    if constexpr (is_float_v<T>) return int64_t(compute_t<T>(static_cast<const T*>(data_)[i]));
    else return int64_t(static_cast<const T*>(data_)[i]);
  });
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  CUVIL_CHECK(!is_float(dtype_), "expected an integer tensor, got ", type_str());
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[size_t(i)] = get_i64(i);
  return v;
}

std::string Tensor::type_str() const { return std::string(dtype_name(dtype_)) + shape_str(shape_); }

bool Tensor::same_bytes(const Tensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ && (nbytes() == 0 || std::memcmp(data_, o.data_, nbytes()) == 0);
}

}  // namespace cuvil
