// Element types. The X-macro list is the single source of truth for names, sizes, C++ types and ONNX ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "support/error.h"
#include "support/half.h"

namespace cuvil {

//            enum   C++ type   text    ONNX TensorProto id
#define CUVIL_DTYPES(X)          \
  X(f32, float, "f32", 1)        \
  X(u8, uint8_t, "u8", 2)        \
  X(i8, int8_t, "i8", 3)         \
  X(u16, uint16_t, "u16", 4)     \
  X(i16, int16_t, "i16", 5)      \
  X(i32, int32_t, "i32", 6)      \
  X(i64, int64_t, "i64", 7)      \
  X(boolean, bool, "bool", 9)    \
  X(f16, f16_t, "f16", 10)       \
  X(f64, double, "f64", 11)      \
  X(u32, uint32_t, "u32", 12)    \
  X(u64, uint64_t, "u64", 13)    \
  X(bf16, bf16_t, "bf16", 16)

// Low-precision element types (low_precision.h): stored one code per byte, never computed in. Only conversions
// (Cast, CastLike, QuantizeLinear, DequantizeLinear, Identity-like moves) take them; visit_dtype refuses them with
// a clear error, so every other kernel reports the dtype instead of misreading it.
//                          enum         text          ONNX id
#define CUVIL_LOW_PRECISION_DTYPES(X) \
  X(f8e4m3fn, "f8e4m3fn", 17)         \
  X(f8e4m3fnuz, "f8e4m3fnuz", 18)     \
  X(f8e5m2, "f8e5m2", 19)             \
  X(f8e5m2fnuz, "f8e5m2fnuz", 20)     \
  X(u4, "u4", 21)                     \
  X(i4, "i4", 22)                     \
  X(f4e2m1, "f4e2m1", 23)             \
  X(f8e8m0, "f8e8m0", 24)             \
  X(u2, "u2", 25)                     \
  X(i2, "i2", 26)

// Strings (ONNX id 8): each element is a `const std::string*` (string_tensor.h says who owns the text). Only
// moves of whole values (Identity, Reshape, Gather, Concat, ...), the string ops, Equal and LabelEncoder take
// them; visit_dtype refuses them, as it refuses the low-precision types.
enum class DType : uint8_t {
#define CUVIL_X(e, t, s, o) e,
  CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, s, o) e,
  CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
  str,
};

inline constexpr int kNumDTypes = 0
#define CUVIL_X(e, t, s, o) +1
    CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
    ;

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view s);
size_t dtype_size(DType t);
int dtype_onnx_id(DType t);
std::optional<DType> dtype_from_onnx_id(int id);
bool is_float(DType t);     // f16, bf16, f32, f64
bool is_integer(DType t);   // signed or unsigned integers, not bool (nor the low-precision ones)
bool is_signed(DType t);    // floats and signed integers (of the computing dtypes)
bool is_low_precision(DType t);  // one of CUVIL_LOW_PRECISION_DTYPES
[[noreturn]] void fail_low_precision(DType t);
[[noreturn]] void fail_string_dtype();

template <class T> struct dtype_of;
#define CUVIL_X(e, t, s, o) \
  template <> struct dtype_of<t> { static constexpr DType value = DType::e; };
CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<f16_t> { using type = float; };
template <> struct compute_type<bf16_t> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;

// Calls fn.template operator()<T>() with the C++ type of `t`. Usage:
//   visit_dtype(t, [&]<class T>() { ... });
template <class Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
#define CUVIL_X(e, ty, s, o) \
  case DType::e:             \
    return fn.template operator()<ty>();
    CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
#define CUVIL_X(e, s, o) case DType::e:
    CUVIL_LOW_PRECISION_DTYPES(CUVIL_X)
#undef CUVIL_X
    fail_low_precision(t);
    case DType::str:
      fail_string_dtype();
  }
  fail_internal("bad dtype ", int(t));
}

}  // namespace cuvil
