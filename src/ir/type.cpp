#include "ir/type.h"

#include "support/error.h"

namespace cuvil {

size_t Shape::rank() const {
  CUVIL_ASSERT(rank_known_, "rank of an unknown-rank shape requested");
  return dims_.size();
}

bool Shape::is_static() const {
  if (!rank_known_) return false;
  for (auto& d : dims_)
    if (!d.is_const()) return false;
  return true;
}

std::vector<int64_t> Shape::static_dims() const {
  CUVIL_ASSERT(is_static());
  std::vector<int64_t> v;
  for (auto& d : dims_) v.push_back(d.value());
  return v;
}

Dim Shape::numel() const { return dims_product(dims_); }

std::string Shape::str() const { return rank_known_ ? dims_str(dims_) : "[*]"; }

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape.str(); }

}  // namespace cuvil
