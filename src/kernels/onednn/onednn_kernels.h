// oneDNN kernels: convolutions, matrix products and pooling (src/kernels/onednn/<op>.cpp).
#pragma once

#include "kernels/prepared_kernel.h"

namespace cuvil::onednn {

// A oneDNN kernel for `n` at these input types, or null when oneDNN does not cover the case (dtype, attributes,
// shapes); the caller then falls back. Primitives are created here, once; constant weights are reordered into
// the layout the primitive prefers (pre-packed) here too.
std::unique_ptr<PreparedKernel> prepare_onednn_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                      const KernelOptions& options);

}  // namespace cuvil::onednn
