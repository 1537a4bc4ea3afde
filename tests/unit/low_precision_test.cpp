// The low-precision element types' conversions (ir/low_precision.h): every code decoded against a formula of its
// own (bits assembled into an IEEE float), round trips, round-to-nearest-even at every midpoint, saturation, the
// integer types' wrap and QuantizeLinear rounding, and the clear error every other kernel gives.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "ir/low_precision.h"
#include "ir/npy.h"
#include "ir/tensor.h"

namespace cuvil {
namespace {

struct Fmt {
  DType t;
  int e, m, bias;
  double max;
};
const Fmt kFloats[] = {{DType::f8e4m3fn, 4, 3, 7, 448},
                       {DType::f8e4m3fnuz, 4, 3, 8, 240},
                       {DType::f8e5m2, 5, 2, 15, 57344},
                       {DType::f8e5m2fnuz, 5, 2, 16, 57344},
                       {DType::f4e2m1, 2, 1, 1, 6}};

// The value of a code by assembling f32 bits (normal codes) or m * 2^(1 - bias - mbits) (subnormals); NaN and
// infinity codes per the ONNX spec's tables.
double expected_value(const Fmt& f, unsigned c) {
  int bits = 1 + f.e + f.m;
  unsigned sign = c >> (bits - 1), e = (c >> f.m) & ((1u << f.e) - 1), m = c & ((1u << f.m) - 1);
  bool uz = f.t == DType::f8e4m3fnuz || f.t == DType::f8e5m2fnuz;
  if (uz && c == 0x80) return std::numeric_limits<double>::quiet_NaN();
  if (f.t == DType::f8e4m3fn && e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (f.t == DType::f8e5m2 && e == 31) return m ? std::numeric_limits<double>::quiet_NaN()
                                                : (sign ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
  float mag;
  if (e == 0) mag = float(std::ldexp(double(m), 1 - f.bias - f.m));
  else mag = std::bit_cast<float>(uint32_t((int(e) - f.bias + 127) << 23) | uint32_t(m << (23 - f.m)));
  return sign ? -double(mag) : double(mag);
}

TEST(LowPrecision, FloatCodesDecode) {
  for (const Fmt& f : kFloats) {
    unsigned n = 1u << (1 + f.e + f.m);
    double largest = 0;
    for (unsigned c = 0; c < n; ++c) {
      double want = expected_value(f, c), got = low_precision_decode(f.t, uint8_t(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << dtype_name(f.t) << " code " << c;
        continue;
      }
      EXPECT_EQ(got, want) << dtype_name(f.t) << " code " << c;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << dtype_name(f.t) << " code " << c;
      if (std::isfinite(got)) largest = std::max(largest, got);
    }
    EXPECT_EQ(largest, f.max) << dtype_name(f.t);
  }
  // Spot values from the ONNX spec.
  EXPECT_EQ(low_precision_decode(DType::f8e4m3fn, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(low_precision_decode(DType::f8e4m3fnuz, 0x01), std::ldexp(1.0, -10));
  EXPECT_EQ(low_precision_decode(DType::f8e5m2, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(low_precision_decode(DType::f8e5m2fnuz, 0x01), std::ldexp(1.0, -17));
  EXPECT_EQ(low_precision_decode(DType::f4e2m1, 0x0f), -6.0);
  EXPECT_TRUE(std::isinf(low_precision_decode(DType::f8e5m2, 0xfc)));
}

// float8e8m0: an exponent alone; the onnx reference's three rounding modes (the Python tests compare every
// mode with the reference on thousands of values).
TEST(LowPrecision, Float8E8M0) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (unsigned c = 0; c < 255; ++c) {
    EXPECT_EQ(low_precision_decode(DType::f8e8m0, uint8_t(c)), std::ldexp(1.0, int(c) - 127));
    if (c == 0) continue;  // 2^-127 is a float32 subnormal: the reference rounds its bits (below)
    for (E8M0Rounding r : {E8M0Rounding::up, E8M0Rounding::down, E8M0Rounding::nearest})
      EXPECT_EQ(low_precision_encode(DType::f8e8m0, std::ldexp(1.0, int(c) - 127), true, r), c);  // exact
  }
  EXPECT_TRUE(std::isnan(low_precision_decode(DType::f8e8m0, 0xff)));
  auto enc = [](double v, E8M0Rounding r, bool sat = true) { return low_precision_encode(DType::f8e8m0, v, sat, r); };
  EXPECT_EQ(enc(3.0, E8M0Rounding::up), 128 + 1);                // 3 -> 4
  EXPECT_EQ(enc(3.0, E8M0Rounding::down), 128);                  // 3 -> 2
  EXPECT_EQ(enc(3.0, E8M0Rounding::nearest), 128 + 1);           // 1.5 * 2: up
  EXPECT_EQ(enc(2.9, E8M0Rounding::nearest), 128);               // below 1.5 * 2: down
  EXPECT_EQ(enc(-3.0, E8M0Rounding::down), 128);                 // the sign is dropped
  EXPECT_EQ(enc(0.0, E8M0Rounding::up), 0);                      // 2^-127, the smallest
  EXPECT_EQ(enc(std::ldexp(1.0, -127), E8M0Rounding::up), 1);    // subnormal bits 0x00200000: a fraction
  EXPECT_EQ(enc(std::ldexp(1.0, -127), E8M0Rounding::down), 0);
  EXPECT_EQ(enc(nan, E8M0Rounding::down), 0xff);
  EXPECT_EQ(enc(-inf, E8M0Rounding::down), 0xff);
  double top = std::ldexp(1.5, 127);
  EXPECT_EQ(enc(top, E8M0Rounding::up, true), 0xfe);   // saturated at 2^127
  EXPECT_EQ(enc(top, E8M0Rounding::up, false), 0xff);  // past it: NaN
  EXPECT_EQ(e8m0_rounding_from_name("nearest"), E8M0Rounding::nearest);
  EXPECT_FALSE(e8m0_rounding_from_name("even"));
}

TEST(LowPrecision, FloatRoundTripAndNearestEven) {
  for (const Fmt& f : kFloats) {
    unsigned n = 1u << (1 + f.e + f.m);
    for (unsigned c = 0; c < n; ++c) {
      double v = low_precision_decode(f.t, uint8_t(c));
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(low_precision_decode(f.t, low_precision_encode(f.t, v, true))));
        continue;
      }
      for (bool sat : {true, false})
        if (std::isfinite(v)) EXPECT_EQ(low_precision_encode(f.t, v, sat), c) << dtype_name(f.t) << " " << v;
    }
    // Midpoints between neighbouring positive finite values go to the even code, and just off them to the
    // nearer one; below and above, the same with the sign.
    for (unsigned c = 0; c + 1 < n / 2; ++c) {
      double a = low_precision_decode(f.t, uint8_t(c)), b = low_precision_decode(f.t, uint8_t(c + 1));
      if (!std::isfinite(b) || std::isnan(b)) break;
      double mid = (a + b) / 2, eps = (b - a) / 64;
      unsigned even = (c & 1u) ? c + 1 : c;
      EXPECT_EQ(low_precision_encode(f.t, mid, true), even) << dtype_name(f.t) << " mid " << mid;
      EXPECT_EQ(low_precision_encode(f.t, mid - eps, true), c) << dtype_name(f.t);
      EXPECT_EQ(low_precision_encode(f.t, mid + eps, true), c + 1) << dtype_name(f.t);
      uint8_t neg = low_precision_encode(f.t, -(mid + eps), true);
      EXPECT_EQ(low_precision_decode(f.t, neg), -b) << dtype_name(f.t);
    }
  }
}

TEST(LowPrecision, SaturationAndSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const Fmt& f : kFloats) {
    for (double big : {inf, f.max * 4, 1e30}) {
      EXPECT_EQ(low_precision_decode(f.t, low_precision_encode(f.t, big, true)), f.max) << dtype_name(f.t);
      EXPECT_EQ(low_precision_decode(f.t, low_precision_encode(f.t, -big, true)), -f.max) << dtype_name(f.t);
      double ns = low_precision_decode(f.t, low_precision_encode(f.t, big, false));
      if (f.t == DType::f8e5m2) EXPECT_EQ(ns, inf);
      else if (f.t == DType::f4e2m1) EXPECT_EQ(ns, f.max);  // no inf, no NaN: saturates always
      else EXPECT_TRUE(std::isnan(ns)) << dtype_name(f.t);
    }
    EXPECT_TRUE(std::isnan(low_precision_decode(f.t, low_precision_encode(f.t, nan, true))) || f.t == DType::f4e2m1);
    bool uz = f.t == DType::f8e4m3fnuz || f.t == DType::f8e5m2fnuz;
    EXPECT_EQ(low_precision_encode(f.t, -0.0, true), uz ? 0u : 1u << (f.e + f.m)) << dtype_name(f.t);
    EXPECT_EQ(low_precision_encode(f.t, -1e-30, true), uz ? 0u : 1u << (f.e + f.m)) << dtype_name(f.t);
  }
  // Values past max that still round to it (below the midpoint to the next step) are not overflow.
  EXPECT_EQ(low_precision_decode(DType::f8e4m3fn, low_precision_encode(DType::f8e4m3fn, 464, false)), 448);
  EXPECT_TRUE(std::isnan(low_precision_decode(DType::f8e4m3fn, low_precision_encode(DType::f8e4m3fn, 465, false))));
  EXPECT_EQ(low_precision_decode(DType::f8e5m2, low_precision_encode(DType::f8e5m2, 61439, false)), 57344);
  EXPECT_EQ(low_precision_decode(DType::f8e5m2, low_precision_encode(DType::f8e5m2, 61440, false)), inf);
}

TEST(LowPrecision, IntegerTypes) {
  struct I {
    DType t;
    int bits;
    bool sgn;
  };
  for (I it : {I{DType::u4, 4, false}, I{DType::i4, 4, true}, I{DType::u2, 2, false}, I{DType::i2, 2, true}}) {
    int n = 1 << it.bits;
    for (int c = 0; c < n; ++c) {
      int want = it.sgn && c >= n / 2 ? c - n : c;
      EXPECT_EQ(low_precision_decode(it.t, uint8_t(c)), want) << dtype_name(it.t);
      EXPECT_EQ(low_precision_encode(it.t, want, true), c) << dtype_name(it.t);
    }
    // Casts truncate toward zero and wrap modulo 2^bits (as numpy's integer casts); NaN and inf give 0.
    for (double v : {-37.9, -9.5, -2.5, -0.7, 0.7, 2.5, 9.5, 37.9, 100.0}) {
      int64_t tr = int64_t(std::trunc(v)), m = ((tr % n) + n) % n;
      EXPECT_EQ(low_precision_encode(it.t, v, true), m) << dtype_name(it.t) << " " << v;
    }
    EXPECT_EQ(low_precision_encode(it.t, std::numeric_limits<double>::quiet_NaN(), true), 0);
    // QuantizeLinear: half to even, plus the zero point, clipped.
    int lo = it.sgn ? -n / 2 : 0, hi = it.sgn ? n / 2 - 1 : n - 1;
    for (double v : {-20.0, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 20.0})
      for (int zp : {lo, 0, hi}) {
        double q = std::nearbyint(v) + zp;
        int want = int(std::clamp(q, double(lo), double(hi)));
        EXPECT_EQ(low_precision_decode(it.t, low_precision_quantize_int(it.t, v, zp)), want)
            << dtype_name(it.t) << " " << v << " zp " << zp;
      }
  }
  EXPECT_EQ(low_precision_decode(DType::i4, low_precision_quantize_int(DType::i4, 2.5, 0)), 2);
  EXPECT_EQ(low_precision_decode(DType::i4, low_precision_quantize_int(DType::i4, 3.5, 0)), 4);
}

TEST(LowPrecision, NamesIdsAndClearErrors) {
  for (auto [t, id, name] : {std::tuple{DType::f8e4m3fn, 17, "f8e4m3fn"}, {DType::f8e5m2fnuz, 20, "f8e5m2fnuz"},
                             {DType::u4, 21, "u4"}, {DType::i2, 26, "i2"}}) {
    EXPECT_EQ(dtype_from_onnx_id(id), t);
    EXPECT_EQ(dtype_onnx_id(t), id);
    EXPECT_EQ(dtype_from_name(name), t);
    EXPECT_EQ(dtype_size(t), 1u);
    EXPECT_TRUE(is_low_precision(t));
    EXPECT_FALSE(is_float(t) || is_integer(t));
  }
  EXPECT_EQ(dtype_from_onnx_id(24), DType::f8e8m0);
  // Tensors of them read their values; .npy (which has no such types) refuses them by name.
  Tensor t = Tensor::zeros(DType::i4, {3});
  static_cast<uint8_t*>(t.raw())[1] = 0x9;  // -7
  EXPECT_EQ(t.get_f64(1), -7.0);
  EXPECT_EQ(t.get_i64(1), -7);
  try {
    serialize_npy(t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i4"), std::string::npos) << e.what();
  }
  try {
    visit_dtype(DType::f8e4m3fn, []<class T>() { return sizeof(T); });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f8e4m3fn"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cuvil
