// The per-op preparers behind prepare_onednn_kernel (one file each in src/kernels/onednn/).
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::onednn {

std::unique_ptr<PreparedKernel> prepare_conv(const Node& n, const std::vector<PrepareInput>& inputs,
                                             const KernelOptions& options);
std::unique_ptr<PreparedKernel> prepare_matmul(const Node& n, const std::vector<PrepareInput>& inputs);
std::unique_ptr<PreparedKernel> prepare_pool(const Node& n, const std::vector<PrepareInput>& inputs);

}  // namespace cuvil::onednn
