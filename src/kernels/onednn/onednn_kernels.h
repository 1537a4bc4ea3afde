// oneDNN kernels: convolutions, matrix products and pooling (src/kernels/onednn/<op>.cpp).
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::onednn {

// A oneDNN kernel for `n` at these input types, or null when oneDNN does not cover the case (dtype, attributes,
// shapes); the caller then falls back. Primitives are created here, once; constant weights are reordered into
// the layout the primitive prefers (pre-packed) here too.
std::unique_ptr<PreparedKernel> prepare_onednn_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                      const KernelOptions& options);

// A MatMul/Gemm/FusedMatMul in bf16 with f32 accumulation (KernelOptions::precision = bf16), or null with
// `reason` set where oneDNN cannot or would not run it faster than f32 (the caller keeps f32 and records why).
// Convolutions choose their precision inside prepare_onednn_kernel.
std::unique_ptr<PreparedKernel> prepare_onednn_bf16_matmul(const Node& n, const std::vector<PrepareInput>& inputs,
                                                           std::string* reason);

// Attention with its two products in bf16 with f32 accumulation (q, k, v and the Softmax's probabilities rounded
// to bf16; the Softmax itself f32; kernels/onednn/attention.cpp), or null with `reason` set where oneDNN would not
// run them on bf16 dot products (the caller keeps the f32 kernel and records why).
std::unique_ptr<PreparedKernel> prepare_onednn_bf16_attention(const Node& n, const std::vector<PrepareInput>& inputs,
                                                              std::string* reason);

// A FusedConv/FusedMatMul in int8 (KernelOptions::precision = int8; kernels/onednn/int8.cpp): u8 activations on
// the node's calibrated grid (quant_x_scale, quant_x_zero_point), s8 per-channel weights, s32 accumulation, f32
// output. Null with `reason` set where the node is not calibrated or oneDNN would not run it on VNNI.
std::unique_ptr<PreparedKernel> prepare_onednn_int8_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                           std::string* reason);
// ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul on u8 x s8 primitives (kernels/onednn/integer_ops.cpp),
// at any precision (their integer arithmetic is the op's own); null with `reason` set where they stay on the
// reference kernel (weights not constant, a convolution's weight zero point, no VNNI, ...), null without one for
// other ops.
std::unique_ptr<PreparedKernel> prepare_onednn_integer_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                              std::string* reason);
// The int8 kernels' quantization of one activation (round to nearest even, saturate to 0..255) and one weight
// (symmetric, saturate to -127..127): what a reference computes to match them exactly.
uint8_t quantize_u8(float x, float inv_scale, int32_t zero_point);
int8_t quantize_s8(float w, float scale);

// Whether oneDNN runs a bf16 convolution on this machine's bf16 dot products (probed once on a small 1x1
// convolution; false without AVX512-BF16/AMX or with ONEDNN_MAX_CPU_ISA below them). runtime/bf16_links.h asks.
bool bf16_convolutions_are_fast();
// Whether a probe u8 x s8 convolution dispatches to VNNI or AMX dot products (kernels/onednn/int8.cpp takes
// nothing else): where it does not, int8 layers keep f32, so u8 links between them would only add conversions.
bool int8_convolutions_are_fast();
// A Cast of f32 to bf16 rounding to nearest even (round_bf16) as one oneDNN reorder, or null for other Casts
// (bf16 executors; runtime/bf16_links.h inserts them; kernels/onednn/bf16_convert.cpp).
std::unique_ptr<PreparedKernel> prepare_bf16_convert(const Node& n, const std::vector<PrepareInput>& inputs);
// A kernel for `n` that serves every shape its IR types allow (dims that vary are left to run time), or null
// when oneDNN has none for this node or its shapes are static. See prepare_shape_generic_kernel.
std::unique_ptr<PreparedKernel> prepare_shape_generic_onednn_kernel(const Node& n);

// oneDNN primitives created in this process so far (each one generates machine code or picks a prepared
// implementation): what "compiling" costs outside the generated kernels.
int64_t primitives_created();

}  // namespace cuvil::onednn
