// Whether a float tensor holds a NaN: what a fast kernel that would drop NaN checks before taking its fast path
// (oneDNN's max pool keeps the larger of two operands by an ordered compare, so a NaN in a window vanishes).
#pragma once

#include <cstdint>

namespace cuvil::cpu {

bool any_nan(const float* data, int64_t n);
// The same for bf16 bit patterns.
bool any_nan_bf16(const uint16_t* data, int64_t n);

}  // namespace cuvil::cpu
