#include "kernels/permute.h"

#include <cstring>

namespace cuvil {

namespace {

template <class T>
void permute_typed(const T* src, T* dst, const std::vector<int64_t>& out_shape, const std::vector<int64_t>& strides) {
  size_t r = out_shape.size();
  int64_t n = shape_numel(out_shape);
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = src[off];
    for (size_t d = r; d-- > 0;) {  // odometer over the output's dims, tracking the source offset
      off += strides[d];
      if (++idx[d] < out_shape[d]) break;
      off -= strides[d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void permute_into(const Tensor& src, const std::vector<int64_t>& perm, Tensor& dst) {
  size_t r = src.rank();
  CUVIL_CHECK(perm.size() == r && dst.rank() == r && dst.dtype() == src.dtype(), "internal error: bad permute");
  std::vector<int64_t> src_strides(r, 1), strides(r), out_shape(r);
  for (size_t d = r; d-- > 1;) src_strides[d - 1] = src_strides[d] * src.dim(d);
  for (size_t d = 0; d < r; ++d) {
    out_shape[d] = src.dim(size_t(perm[d]));
    strides[d] = src_strides[size_t(perm[d])];
    CUVIL_CHECK(dst.dim(d) == out_shape[d], "internal error: permute output shape");
  }
  if (src.numel() == 0) return;
  switch (dtype_size(src.dtype())) {
    case 1: permute_typed(static_cast<const uint8_t*>(src.raw()), static_cast<uint8_t*>(dst.raw()), out_shape, strides); break;
    case 2: permute_typed(static_cast<const uint16_t*>(src.raw()), static_cast<uint16_t*>(dst.raw()), out_shape, strides); break;
    case 4: permute_typed(static_cast<const uint32_t*>(src.raw()), static_cast<uint32_t*>(dst.raw()), out_shape, strides); break;
    case 8: permute_typed(static_cast<const uint64_t*>(src.raw()), static_cast<uint64_t*>(dst.raw()), out_shape, strides); break;
    default: fail("internal error: permute of ", dtype_name(src.dtype()));
  }
}

Tensor permuted(const Tensor& src, const std::vector<int64_t>& perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(src.dim(size_t(p)));
  Tensor dst = Tensor::zeros(src.dtype(), shape);
  permute_into(src, perm, dst);
  return dst;
}

}  // namespace cuvil
