// The per-op preparers behind prepare_onednn_kernel (one file each in src/kernels/onednn/).
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::onednn {

// `y`: the output's dims (from inference, computed once by prepare_onednn_kernel).
using Dims = std::vector<int64_t>;

std::unique_ptr<PreparedKernel> prepare_conv(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y,
                                             const KernelOptions& options);
std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y);
// The product in bf16 with f32 accumulation (constant B packed in bf16), or null with `reason` set.
std::unique_ptr<PreparedKernel> prepare_matmul_bf16(const Node& n, const std::vector<PrepareInput>& inputs,
                                                    const Dims& y, std::string* reason);
// A MatMul/Gemm/FusedMatMul kernel that serves every shape the node's IR types allow, or null (see matmul.cpp).
std::unique_ptr<PreparedKernel> prepare_shape_generic_matmul(const Node& n);
std::unique_ptr<PreparedKernel> prepare_attention(const Node& n, const std::vector<PrepareInput>& inputs,
                                                  const Dims& y);
// The same with both products in bf16 (f32 accumulation, Softmax in f32), or null with `reason` set.
std::unique_ptr<PreparedKernel> prepare_attention_bf16(const Node& n, const std::vector<PrepareInput>& inputs,
                                                       const Dims& y, std::string* reason);
// ConvTranspose with constant weights and explicit pads (deconv.cpp); null for the other forms.
std::unique_ptr<PreparedKernel> prepare_deconv(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y);
std::unique_ptr<PreparedKernel> prepare_pool(const Node& n, const std::vector<PrepareInput>& inputs, const Dims& y);

}  // namespace cuvil::onednn
