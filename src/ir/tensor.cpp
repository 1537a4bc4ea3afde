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

namespace {
const std::string kEmptyString;  // what a zeroed or null string element reads as
}  // namespace

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
  if (dtype == DType::str) {
    auto** e = static_cast<const std::string**>(p);
    for (int64_t i = 0; i < t.numel_; ++i) e[i] = &kEmptyString;
  }
  return t;
}

Tensor Tensor::strings(std::vector<std::string> values, std::vector<int64_t> shape) {
  Tensor t = zeros(DType::str, std::move(shape));
  CUVIL_ASSERT(int64_t(values.size()) == t.numel(), "strings: ", values.size(), " values for ", t.type_str());
  // One block owns the pointer array and the text it points at.
  struct Owner {
    std::shared_ptr<void> pointers;
    std::vector<std::string> text;
  };
  auto owner = std::make_shared<Owner>(Owner{t.storage_, std::move(values)});
  auto** e = static_cast<const std::string**>(t.data_);
  for (size_t i = 0; i < owner->text.size(); ++i) e[i] = &owner->text[i];
  t.storage_ = std::shared_ptr<void>(owner, t.data_);
  t.owns_text_ = true;
  return t;
}

const std::string& Tensor::str(int64_t i) const {
  CUVIL_ASSERT(dtype_ == DType::str, "tensor of ", dtype_name(dtype_), " read as strings");
  CUVIL_ASSERT(i >= 0 && i < numel_, "string element ", i, " of ", type_str());
  const std::string* s = static_cast<const std::string* const*>(data_)[i];
  return s ? *s : kEmptyString;  // (a kernel that pads or zeroes writes null: the empty string)
}

std::vector<std::string> Tensor::str_values() const {
  std::vector<std::string> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[size_t(i)] = str(i);
  return v;
}

Tensor Tensor::with_own_strings() const { return owns_text_ ? *this : strings(str_values(), shape_); }

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
  if (dtype_ == DType::str) return strings(str_values(), shape_);
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
  if (dtype_ == DType::str) return o.dtype_ == DType::str && shape_ == o.shape_ && str_values() == o.str_values();
  return dtype_ == o.dtype_ && shape_ == o.shape_ && (nbytes() == 0 || std::memcmp(data_, o.data_, nbytes()) == 0);
}

}  // namespace cuvil
