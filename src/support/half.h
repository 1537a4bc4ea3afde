// 16-bit floating-point storage types. Arithmetic happens in float (compute_t<T>); these types only convert.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace cuvil {

struct f16_t {
  uint16_t bits = 0;
  f16_t() = default;
  f16_t(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));  // inf/nan
    if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520 -> inf
    if (mag < 0x38800000u) {                                  // subnormal or zero in f16
      // add 0.5 in f32 then take the low bits: the FPU does the round-to-nearest-even for us
      float r = std::bit_cast<float>(mag) + 0.5f;
      return uint16_t(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
    }
    uint32_t odd = (mag >> 13) & 1u;
    mag += 0xc8000fffu + odd;  // re-bias exponent (-112 << 23) and round to nearest even
    return uint16_t(sign | (mag >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t out;
    if (exp == 0x1f) {
      out = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
      if (man == 0) return std::bit_cast<float>(sign);
      float f = float(man) * (1.0f / 16777216.0f);  // man * 2^-24
      return sign ? -f : f;
    } else {
      out = sign | ((exp + 112) << 23) | (man << 13);
    }
    return std::bit_cast<float>(out);
  }
};

struct bf16_t {
  uint16_t bits = 0;
  bf16_t() = default;
  bf16_t(float f) : bits(from_float(f)) {}
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
    x += 0x7fffu + ((x >> 16) & 1u);                                          // round to nearest even
    return uint16_t(x >> 16);
  }
};

}  // namespace cuvil
