#include "kernels/ref/permute.h"

#include "kernels/ref/indexing.h"

namespace cuvil::ref {

namespace {

template <class U>
void copy_permuted(const Tensor& src, Tensor& dst, const std::vector<int64_t>& read) {
  const U* s = static_cast<const U*>(src.raw());
  U* d = static_cast<U*>(dst.raw());
  MultiIndex it(dst.shape(), {read});
  for (int64_t n = 0; n < dst.numel(); ++n, it.next()) d[n] = s[it.offset(0)];
}

}  // namespace

void permute_into(const Tensor& src, const std::vector<int64_t>& perm, Tensor& dst) {
  size_t r = src.rank();
  CUVIL_ASSERT(perm.size() == r && dst.rank() == r && dst.dtype() == src.dtype(), "bad permute");
  std::vector<int64_t> in_strides = strides_of(src.shape()), read(r);
  for (size_t d = 0; d < r; ++d) {
    read[d] = in_strides[size_t(perm[d])];
    CUVIL_ASSERT(dst.dim(d) == src.dim(size_t(perm[d])), "permute output shape");
  }
  if (dst.numel() == 0) return;
  switch (dtype_size(src.dtype())) {
    case 1: copy_permuted<uint8_t>(src, dst, read); break;
    case 2: copy_permuted<uint16_t>(src, dst, read); break;
    case 4: copy_permuted<uint32_t>(src, dst, read); break;
    case 8: copy_permuted<uint64_t>(src, dst, read); break;
    default: fail_internal("permute of ", dtype_name(src.dtype()));
  }
}

Tensor permuted(const Tensor& src, const std::vector<int64_t>& perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(src.dim(size_t(p)));
  Tensor dst = Tensor::zeros(src.dtype(), shape);
  permute_into(src, perm, dst);
  return dst;
}

}  // namespace cuvil::ref
