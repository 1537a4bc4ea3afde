// Conversions of the low-precision element types (CUVIL_LOW_PRECISION_DTYPES in dtype.h): float8 (e4m3fn,
// e4m3fnuz, e5m2, e5m2fnuz), float4e2m1, int4/uint4, int2/uint2. A tensor of one holds one code per byte, in
// the code's low bits (ONNX packs 4- and 2-bit codes, low bits first; the importer unpacks them). Arithmetic
// never happens in these types: values decode to double and encode back, as ONNX's Cast specifies.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace cuvil {

// Float8/float4 (true) as against int4/uint4/int2/uint2 (false). Only for low-precision dtypes.
bool is_low_precision_float(DType t);

// The bits ONNX stores per element: 8, 4 or 2.
int low_precision_bits(DType t);

// The value of `code` (its low low_precision_bits(t) bits; NaN for NaN codes).
double low_precision_decode(DType t, uint8_t code);

// `v` as a code of t, as ONNX's Cast converts (the onnx reference, through ml_dtypes):
// - floats round to nearest even. With `saturate`, values beyond the largest finite one (infinities included)
//   become it; without, they become infinity (e5m2) or NaN (the types that have no infinity; float4e2m1, which
//   has neither, saturates always). NaN becomes NaN (float4e2m1: the code 0x8). The fnuz types have no -0.
// - integers take the value truncated toward zero, modulo 2^bits (NaN and infinities become 0).
uint8_t low_precision_encode(DType t, double v, bool saturate);

// QuantizeLinear's integer rounding: round half to even, plus zp, clipped to the type's range. Integer types only.
uint8_t low_precision_quantize_int(DType t, double v, int64_t zero_point);

}  // namespace cuvil
