// Channels-last layout: ops with a `channels_last` attribute (FusedConv, pools) read and write activations as
// [N, spatial..., C] instead of ONNX's [N, C, spatial...]. The assign-layouts pass sets it; these helpers move
// between the two dim orders (for shapes, dims vectors and permutations alike).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cuvil::layout {

// [N, C, s...] -> [N, s..., C]
template <class T>
std::vector<T> to_channels_last(const std::vector<T>& v) {
  if (v.size() < 3) return v;
  std::vector<T> r{v[0]};
  r.insert(r.end(), v.begin() + 2, v.end());
  r.push_back(v[1]);
  return r;
}

// [N, s..., C] -> [N, C, s...]
template <class T>
std::vector<T> to_channels_first(const std::vector<T>& v) {
  if (v.size() < 3) return v;
  std::vector<T> r{v[0], v.back()};
  r.insert(r.end(), v.begin() + 1, v.end() - 1);
  return r;
}

// Transpose perms between the two orders for `rank` dims: perm_to_channels_last(4) = {0, 2, 3, 1}.
inline std::vector<int64_t> perm_to_channels_last(size_t rank) {
  std::vector<int64_t> p;
  for (size_t i = 0; i < rank; ++i) p.push_back(int64_t(i));
  return to_channels_last(p);
}
inline std::vector<int64_t> perm_to_channels_first(size_t rank) {
  std::vector<int64_t> p;
  for (size_t i = 0; i < rank; ++i) p.push_back(int64_t(i));
  return to_channels_first(p);
}

}  // namespace cuvil::layout
