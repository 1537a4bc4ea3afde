// The arithmetic precision a compiled model may use (issue 28): the user's request, and what each node was given.
//
// `Precision` is a compile setting (KernelOptions::precision): fp32 (the default) never lowers anything. bf16
// lets convolutions and matrix products multiply in bf16 with f32 accumulation, where the kernel the machine would
// really run at bf16 is faster than the f32 one; everything else stays f32. Each prepared kernel records what it
// got and why (PrecisionDecision), which profiles and `cuvil inspect` show. int8 lets convolutions and products
// that carry quantization hints (calibrated: nn::quant_attrs) multiply u8 x s8 with s32 accumulation; the rest f32.
#pragma once

#include <string>
#include <string_view>

namespace cuvil {

enum class Precision { fp32, bf16, int8 };

// "fp32" / "bf16" / "int8".
std::string_view precision_name(Precision p);
// Parses a user's precision name; throws cuvil::Error naming the valid ones for anything else.
Precision parse_precision(std::string_view name);

// What a node runs at and why. `reason` is empty when the node simply runs at the requested precision (or when
// fp32 was requested); otherwise it says why it runs at another one ("softmax stays f32", "bf16 would run
// gemm:jit, slower than f32").
struct PrecisionDecision {
  Precision precision = Precision::fp32;
  std::string reason;
  // "bf16", or "fp32 (reason)".
  std::string str() const;
};

}  // namespace cuvil
