#include "ir/dtype.h"

#include <string>

namespace cuvil {

std::string_view dtype_name(DType t) {
  switch (t) {
#define CUVIL_X(e, ty, s, o) \
  case DType::e:             \
    return s;
    CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, s, o) \
  case DType::e:         \
    return s;
    CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
    case DType::str:
      return "str";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view s) {
#define CUVIL_X(e, ty, str, o) \
  if (s == str) return DType::e;
  CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, str, o) \
  if (s == str) return DType::e;
  CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
  if (s == "str") return DType::str;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  if (t == DType::str) return sizeof(const std::string*);
  if (is_low_precision(t)) return 1;  // one code per byte, sub-byte types unpacked
  return visit_dtype(t, []<class T>() { return sizeof(T); });
}

int dtype_onnx_id(DType t) {
  switch (t) {
#define CUVIL_X(e, ty, s, o) \
  case DType::e:             \
    return o;
    CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, s, o) \
  case DType::e:         \
    return o;
    CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
    case DType::str:
      return 8;
  }
  return 0;
}

std::optional<DType> dtype_from_onnx_id(int id) {
#define CUVIL_X(e, ty, s, o) \
  if (id == o) return DType::e;
  CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, s, o) \
  if (id == o) return DType::e;
  CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
  if (id == 8) return DType::str;
  return std::nullopt;
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
bool is_integer(DType t) {
  return !is_float(t) && t != DType::boolean && t != DType::str && !is_low_precision(t);
}
bool is_signed(DType t) {
  return is_float(t) || t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}

bool is_low_precision(DType t) {
  switch (t) {
#define CUVIL_X(e, s, o) case DType::e:
    CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
    return true;
    default: return false;
  }
}

void fail_low_precision(DType t) {
  fail("element type ", dtype_name(t),
       " is a storage type: only Cast, CastLike, QuantizeLinear and DequantizeLinear (and moves of whole values) "
       "take it");
}

void fail_string_dtype() {
  fail("element type str (strings): only moves of whole values (Identity, Reshape, Gather, Concat, ...), the "
       "string ops, Equal and LabelEncoder take it");
}

}  // namespace cuvil
