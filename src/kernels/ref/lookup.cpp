// Reference kernel of the lookup family: LabelEncoder (semantics in src/ir/ops/lookup.cpp). The keys go into a
// hash map on every call; as in ONNX Runtime, a NaN matches no key and the first of equal keys wins.
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// A key as the map holds it: the text of a string, the value of a number (f32 keys widened to double, so an f64
// input finds them). NaN equals nothing, so a NaN element takes the default.
struct Key {
  std::string text;
  double number = 0;
  bool operator==(const Key& o) const { return text == o.text && number == o.number; }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    double v = k.number == 0 ? 0.0 : k.number;  // -0 == 0
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return std::hash<std::string>()(k.text) ^ std::hash<uint64_t>()(bits);
  }
};

Key key_at(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::str) return Key{t.str(i), 0};
  return Key{{}, t.get_f64(i)};
}

}  // namespace

CUVIL_REF_KERNEL(LabelEncoder) {
  const Tensor& x = ctx.input(0);
  const Tensor& keys = ctx.t("keys");
  const Tensor& values = ctx.t("values");
  const Tensor& fallback = ctx.t("default");
  size_t width = dtype_size(values.dtype());
  if (is_integer(x.dtype())) {
    // integers exactly (a double key would merge int64s beyond 2^53)
    std::unordered_map<int64_t, int64_t> index;
    for (int64_t k = keys.numel(); k-- > 0;) index[keys.get_i64(k)] = k;  // the first of equal keys wins (as ORT)
    Tensor& y = ctx.output(0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = index.find(x.get_i64(i));
      const char* from = it == index.end() ? static_cast<const char*>(fallback.raw())
                                           : static_cast<const char*>(values.raw()) + size_t(it->second) * width;
      std::memcpy(static_cast<char*>(y.raw()) + size_t(i) * width, from, width);
    }
    return;
  }
  std::unordered_map<Key, int64_t, KeyHash> index;
  for (int64_t k = keys.numel(); k-- > 0;) index[key_at(keys, k)] = k;
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto it = index.find(key_at(x, i));
    const char* from = it == index.end() ? static_cast<const char*>(fallback.raw())
                                         : static_cast<const char*>(values.raw()) + size_t(it->second) * width;
    std::memcpy(static_cast<char*>(y.raw()) + size_t(i) * width, from, width);
  }
}

}  // namespace cuvil
