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
  Tensor& y = ctx.output(0);
  const size_t width = dtype_size(values.dtype());
  // Element i takes the value of key k (-1: the default).
  auto write = [&](int64_t i, int64_t k) {
    const char* from = k < 0 ? static_cast<const char*>(fallback.raw())
                             : static_cast<const char*>(values.raw()) + size_t(k) * width;
    std::memcpy(static_cast<char*>(y.raw()) + size_t(i) * width, from, width);
  };
  // Integers compare exactly (a double key would merge int64s beyond 2^53); the first of equal keys wins (as ORT).
  auto look_up = [&](auto&& key_of, auto index) {
    for (int64_t k = keys.numel(); k-- > 0;) index[key_of(keys, k)] = k;
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto it = index.find(key_of(x, i));
      write(i, it == index.end() ? -1 : it->second);
    }
  };
  if (is_integer(x.dtype()))
    look_up([](const Tensor& t, int64_t i) { return t.get_i64(i); }, std::unordered_map<int64_t, int64_t>());
  else
    look_up(key_at, std::unordered_map<Key, int64_t, KeyHash>());
}

}  // namespace cuvil
