#include "kernels/cpu/nan_scan.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

// On the bits, so that the loop vectorizes into integer compares whatever the floating-point flags: a float is
// NaN when its exponent is all ones and its mantissa is not zero.
CUVIL_CPU_CLONES bool any_nan_bits(const float* data, int64_t n) {
  constexpr int64_t kBlock = 4096;  // stop soon after the first NaN, without a branch per element
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock);
    uint32_t found = 0;
    for (int64_t i = b; i < e; ++i) {
      uint32_t bits;
      std::memcpy(&bits, data + i, sizeof bits);
      found |= uint32_t((bits & 0x7fffffffu) > 0x7f800000u);
    }
    if (found) return true;
  }
  return false;
}

// bf16: the exponent all ones and the mantissa not zero. A 16-bit accumulator so the loop vectorizes (with a
// bool one, GCC left it scalar: 0.45 ms for ResNet-50's bf16 MaxPool input on one thread, 0.02 vectorized).
CUVIL_CPU_CLONES bool any_nan_bf16_bits(const uint16_t* data, int64_t n) {
  constexpr int64_t kBlock = 8192;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock);
    uint16_t found = 0;
    for (int64_t i = b; i < e; ++i) found |= uint16_t((data[i] & 0x7fffu) > 0x7f80u);
    if (found) return true;
  }
  return false;
}

}  // namespace

bool any_nan(const float* data, int64_t n) { return any_nan_bits(data, n); }

bool any_nan_bf16(const uint16_t* data, int64_t n) { return any_nan_bf16_bits(data, n); }

}  // namespace cuvil::cpu
