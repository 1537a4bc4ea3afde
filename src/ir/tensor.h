// A dense, contiguous, row-major tensor with concrete dims. Used for constants in the IR and for every value at
// run time. Storage is shared (copying a Tensor is cheap and aliases); `clone()` copies the data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace cuvil {

inline constexpr size_t kTensorAlignment = 64;

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialized, 64-byte-aligned storage.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  // Wraps memory owned by someone else (an arena, a caller's buffer). The caller keeps it alive. `data` must not
  // be null, even for an empty tensor.
  static Tensor view(DType dtype, std::vector<int64_t> shape, void* data);
  template <class T>
  static Tensor from_vector(const std::vector<T>& v, std::vector<int64_t> shape) {
    Tensor t = zeros(dtype_of<T>::value, std::move(shape));
    CUVIL_ASSERT(int64_t(v.size()) == t.numel(), "from_vector size mismatch");
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = v[i];
    return t;
  }
  template <class T>
  static Tensor scalar(T v) { return from_vector<T>({v}, {}); }

  // String tensors (DType::str): each element is a `const std::string*`. One made here owns its text. A kernel's
  // output may instead point at its inputs' text (a move such as Gather writes the pointers it read); the runtime
  // replaces such an output by with_own_strings() before the inputs can go away (a tensor that owns its text, and
  // its copies, are returned as they are: the text is never written). zeros(DType::str, ...) points every element
  // at one static empty string.
  static Tensor strings(std::vector<std::string> values, std::vector<int64_t> shape);
  const std::string& str(int64_t i) const;
  std::vector<std::string> str_values() const;
  Tensor with_own_strings() const;

  // False for a default-constructed Tensor (no storage, not a view). Every allocated or viewed tensor, even an
  // empty one, has a non-null data pointer.
  bool defined() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(size_t i) const { return shape_.at(i); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtype_size(dtype_); }
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T> T* data() { check_type<T>(); return static_cast<T*>(data_); }
  template <class T> const T* data() const { check_type<T>(); return static_cast<const T*>(data_); }

  Tensor clone() const;
  // Same bytes, other dims (numel must match). Shares storage.
  Tensor reshaped(std::vector<int64_t> shape) const;
  // Element i converted to double / int64 (for small index and shape tensors).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  std::vector<int64_t> to_i64_vector() const;  // requires an integer (or bool) dtype
  std::string type_str() const;                 // "f32[2, 3]"
  bool same_bytes(const Tensor& o) const;        // dtype, shape and contents equal bit-for-bit (strings: text)
  // True when this tensor owns its storage and no other Tensor (copy, reshaped alias) shares it: its bytes may
  // then be overwritten without anyone seeing. False for views of memory owned elsewhere.
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }

 private:
  template <class T>
  void check_type() const {
    CUVIL_ASSERT(dtype_of<T>::value == dtype_, "tensor of ", dtype_name(dtype_), " read as ",
                dtype_name(dtype_of<T>::value));
  }
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
  bool owns_text_ = false;  // made by strings(): every element points into storage_
};

int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace cuvil
