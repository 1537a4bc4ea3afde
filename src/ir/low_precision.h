// Conversions of the low-precision element types (CUVIL_LOW_PRECISION_DTYPES in dtype.h): float8 (e4m3fn,
// e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1, int4/uint4, int2/uint2. A tensor of one holds one code per byte, in
// the code's low bits (ONNX packs 4- and 2-bit codes, low bits first; the importer unpacks them). Arithmetic
// never happens in these types: values decode to double and encode back, as ONNX's Cast specifies.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/dtype.h"

namespace cuvil {

// Float8/float4 (true) as against int4/uint4/int2/uint2 (false). Only for low-precision dtypes.
bool is_low_precision_float(DType t);

// The bits ONNX stores per element: 8, 4 or 2.
int low_precision_bits(DType t);

// The value of `code` (its low low_precision_bits(t) bits; NaN for NaN codes).
double low_precision_decode(DType t, uint8_t code);

// float8e8m0 is an exponent alone (2^(code - 127); 0xff is NaN; no sign, zero or infinity), the scale type of
// the MX formats. Cast-24's `round_mode` says how a value between two powers of two becomes one; the onnx
// reference decides on the value's float32 bits: `up` whenever the mantissa is not 0, `down` never, `nearest`
// when the mantissa is at least half (above half for subnormals), i.e. at 1.5 * 2^e, not at the midpoint.
enum class E8M0Rounding : uint8_t { up, down, nearest };
std::optional<E8M0Rounding> e8m0_rounding_from_name(std::string_view name);

// `v` as a code of t, as ONNX's Cast converts (the onnx reference, through ml_dtypes):
// - floats round to nearest even. With `saturate`, values beyond the largest finite one (infinities included)
//   become it; without, they become infinity (e5m2) or NaN (the types that have no infinity; float4e2m1, which
//   has neither, saturates always). NaN becomes NaN (float4e2m1: the code 0x8). The fnuz types have no -0.
// - float8e8m0 takes the float32 value's exponent, rounded by `e8m0` (the sign is dropped, 0 becomes 2^-127);
//   NaN and infinities become NaN, and so does rounding up from the largest code unless `saturate`.
// - integers take the value truncated toward zero, modulo 2^bits (NaN and infinities become 0).
uint8_t low_precision_encode(DType t, double v, bool saturate, E8M0Rounding e8m0 = E8M0Rounding::up);

// QuantizeLinear's integer rounding: round half to even, plus zp, clipped to the type's range. Integer types only.
uint8_t low_precision_quantize_int(DType t, double v, int64_t zero_point);

}  // namespace cuvil
