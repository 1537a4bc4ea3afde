// The static type of a value: element type plus shape. A shape's rank may be unknown (rare: only where a
// data-dependent computation decides it); each dim is a constant or a symbolic expression.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"

namespace cuvil {

class Shape {
 public:
  Shape() = default;  // rank 0 (a scalar)
  Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}  // NOLINT
  static Shape unknown_rank() {
    Shape s;
    s.rank_known_ = false;
    return s;
  }
  static Shape of(const std::vector<int64_t>& dims) { return Shape(std::vector<Dim>(dims.begin(), dims.end())); }

  bool rank_known() const { return rank_known_; }
  size_t rank() const;  // requires rank_known()
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }
  const Dim& operator[](size_t i) const { return dims_.at(i); }
  bool is_static() const;  // known rank and every dim a constant
  std::vector<int64_t> static_dims() const;  // requires is_static()
  Dim numel() const;
  std::string str() const;  // "[batch, 3]" or "[*]"
  bool operator==(const Shape& o) const { return rank_known_ == o.rank_known_ && dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::vector<Dim> dims_;
  bool rank_known_ = true;
};

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  std::string str() const;  // "f32[batch, 3]"
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

}  // namespace cuvil
