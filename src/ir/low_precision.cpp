#include "ir/low_precision.h"

#include <bit>
#include <cmath>
#include <limits>

namespace cuvil {

namespace {

// A float format: exponent and mantissa widths, bias, and which special codes it has.
struct FloatFormat {
  int exp_bits, man_bits, bias;
  bool has_inf;        // e5m2: exponent all ones, mantissa 0
  bool ieee_nan;       // e5m2: exponent all ones, mantissa != 0
  bool top_code_nan;   // e4m3fn: exponent and mantissa all ones (0x7f / 0xff)
  bool uz;             // fnuz: 0x80 is the only NaN, no -0, no infinity
  int total_bits() const { return 1 + exp_bits + man_bits; }
};

FloatFormat format_of(DType t) {
  switch (t) {
    case DType::f8e4m3fn: return {4, 3, 7, false, false, true, false};
    case DType::f8e4m3fnuz: return {4, 3, 8, false, false, false, true};
    case DType::f8e5m2: return {5, 2, 15, true, true, false, false};
    case DType::f8e5m2fnuz: return {5, 2, 16, false, false, false, true};
    case DType::f4e2m1: return {2, 1, 1, false, false, false, false};
    default: fail_internal("not a low-precision float: ", dtype_name(t));
  }
}

// Magnitude of the positive code c (sign bit clear), not caring about special codes.
double magnitude(const FloatFormat& f, unsigned c) {
  unsigned e = c >> f.man_bits, m = c & ((1u << f.man_bits) - 1);
  if (e == 0) return std::ldexp(double(m), 1 - f.bias - f.man_bits);  // subnormal
  return std::ldexp(double((1u << f.man_bits) | m), int(e) - f.bias - f.man_bits);
}

bool is_nan_code(const FloatFormat& f, unsigned c) {
  unsigned sign = 1u << (f.total_bits() - 1), mag = c & (sign - 1);
  if (f.uz) return c == sign;
  if (f.top_code_nan) return mag == sign - 1;
  if (f.ieee_nan) return (mag >> f.man_bits) == (1u << f.exp_bits) - 1 && (mag & ((1u << f.man_bits) - 1)) != 0;
  return false;
}

// The largest finite positive code.
unsigned max_code(const FloatFormat& f) {
  unsigned sign = 1u << (f.total_bits() - 1);
  if (f.has_inf) return (((1u << f.exp_bits) - 1) << f.man_bits) - 1;  // below the infinity
  if (f.top_code_nan) return sign - 2;
  return sign - 1;
}

uint8_t nan_code(const FloatFormat& f, bool negative) {
  unsigned sign = 1u << (f.total_bits() - 1);
  if (f.uz) return uint8_t(sign);
  if (f.top_code_nan) return uint8_t((sign - 1) | (negative ? sign : 0));
  if (f.ieee_nan) return uint8_t((((1u << f.exp_bits) - 1) << f.man_bits) | (1u << (f.man_bits - 1)) | (negative ? sign : 0));
  return uint8_t(sign);  // float4e2m1 has none: ml_dtypes (the onnx reference) gives -0
}

uint8_t encode_float(DType t, double v, bool saturate) {
  const FloatFormat f = format_of(t);
  const unsigned sign = 1u << (f.total_bits() - 1);
  bool neg = std::signbit(v);
  if (std::isnan(v)) return nan_code(f, neg);
  const unsigned top = max_code(f);
  const double max = magnitude(f, top);
  double a = std::fabs(v);
  // Values past the largest finite one: saturated, or the overflow code (the type's float4 saturates always).
  auto overflow = [&]() -> uint8_t {
    if (saturate || t == DType::f4e2m1) return uint8_t(top | (neg ? sign : 0));
    if (f.has_inf) return uint8_t((top + 1) | (neg ? sign : 0));
    return nan_code(f, neg);
  };
  if (std::isinf(a)) return overflow();
  // Positive codes 0..top increase with their value: find the last one at most a, then round to nearest even,
  // where the code past `top` stands for the value one step above max (which overflows).
  unsigned lo = 0, hi = top;
  if (a >= max) {
    lo = top;
  } else {
    while (lo < hi) {  // largest code with magnitude <= a
      unsigned mid = (lo + hi + 1) / 2;
      if (magnitude(f, mid) <= a) lo = mid;
      else hi = mid - 1;
    }
  }
  unsigned code = lo;
  double below = magnitude(f, lo);
  if (a > below) {
    // The next value up: the next code's magnitude, or past max one more step of max's exponent.
    double above = lo < top ? magnitude(f, lo + 1) : max + (max - magnitude(f, top - 1));
    double dlo = a - below, dhi = above - a;
    if (dhi < dlo || (dhi == dlo && (lo & 1u))) code = lo + 1;
  }
  if (code > top) return overflow();
  if (code == 0 && (f.uz || false)) return 0;  // no -0 in the fnuz types
  return uint8_t(code | (neg ? sign : 0));
}

constexpr uint8_t kE8M0Nan = 0xff;

uint8_t encode_e8m0(float v, bool saturate, E8M0Rounding mode) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const unsigned exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return kE8M0Nan;  // NaN and infinities
  bool round_up = false;
  switch (mode) {
    case E8M0Rounding::up: round_up = (bits & 0x7fffffu) != 0; break;
    case E8M0Rounding::down: break;
    case E8M0Rounding::nearest: {
      // The onnx reference's guard / round / sticky test, its "lsb" being whether the value is normal.
      bool guard = bits & 0x400000u, round = bits & 0x200000u, sticky = bits & 0x1fffffu;
      round_up = guard && (round || sticky || exponent > 0);
      break;
    }
  }
  if (round_up && saturate && exponent == 0xfeu) round_up = false;
  return uint8_t(exponent + (round_up ? 1 : 0));  // 0xfe + 1: NaN, as the reference's overflow
}

}  // namespace

std::optional<E8M0Rounding> e8m0_rounding_from_name(std::string_view name) {
  if (name == "up") return E8M0Rounding::up;
  if (name == "down") return E8M0Rounding::down;
  if (name == "nearest") return E8M0Rounding::nearest;
  return std::nullopt;
}

bool is_low_precision_float(DType t) {
  return t == DType::f8e4m3fn || t == DType::f8e4m3fnuz || t == DType::f8e5m2 || t == DType::f8e5m2fnuz ||
         t == DType::f8e8m0 || t == DType::f4e2m1;
}

int low_precision_bits(DType t) {
  switch (t) {
    case DType::u4: case DType::i4: case DType::f4e2m1: return 4;
    case DType::u2: case DType::i2: return 2;
    default:
      CUVIL_ASSERT(is_low_precision(t), "not a low-precision dtype: ", dtype_name(t));
      return 8;
  }
}

double low_precision_decode(DType t, uint8_t code) {
  int bits = low_precision_bits(t);
  unsigned c = code & ((1u << bits) - 1);
  if (!is_low_precision_float(t)) {
    bool sgn = t == DType::i4 || t == DType::i2;
    return sgn && (c >> (bits - 1)) ? double(int(c) - (1 << bits)) : double(c);
  }
  if (t == DType::f8e8m0)
    return c == kE8M0Nan ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(c) - 127);
  const FloatFormat f = format_of(t);
  const unsigned sign = 1u << (f.total_bits() - 1);
  if (is_nan_code(f, c)) return std::numeric_limits<double>::quiet_NaN();
  unsigned mag = c & (sign - 1);
  double v = f.has_inf && mag == max_code(f) + 1 ? std::numeric_limits<double>::infinity() : magnitude(f, mag);
  return (c & sign) ? -v : v;
}

uint8_t low_precision_encode(DType t, double v, bool saturate, E8M0Rounding e8m0) {
  if (t == DType::f8e8m0) return encode_e8m0(float(v), saturate, e8m0);  // the reference decides on float32 bits
  if (is_low_precision_float(t)) return encode_float(t, v, saturate);
  int bits = low_precision_bits(t);
  if (!std::isfinite(v)) return 0;
  // Truncation toward zero, then modulo 2^bits (two's complement for the signed types).
  double tr = std::trunc(v);
  double m = std::fmod(tr, double(1 << bits));
  int64_t i = int64_t(m);
  return uint8_t(uint64_t(i) & ((1u << bits) - 1));
}

uint8_t low_precision_quantize_int(DType t, double v, int64_t zero_point) {
  int bits = low_precision_bits(t);
  bool sgn = t == DType::i4 || t == DType::i2;
  int64_t lo = sgn ? -(int64_t(1) << (bits - 1)) : 0, hi = sgn ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
  double r = std::nearbyint(v);  // the default rounding mode: half to even
  double q = std::isnan(r) ? double(zero_point) : r + double(zero_point);
  int64_t qi = q < double(lo) ? lo : q > double(hi) ? hi : int64_t(q);
  return uint8_t(uint64_t(qi) & ((1u << bits) - 1));
}

}  // namespace cuvil
