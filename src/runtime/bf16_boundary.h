// The boundary of a bf16 activation link (runtime/bf16_links.h) where a linked convolution does not run bf16
// after all (oneDNN has no bf16 kernel for the case, reference kernels asked for): its f32 kernel, wrapped so that
// a bf16 X or residual Sum is widened to f32 before it runs and its f32 output rounded to bf16 (nearest even)
// after. It computes what the link means, only slower.
#pragma once

#include <memory>
#include <vector>

#include "kernels/prepared_kernel.h"

namespace cuvil {

// Whether `n` reads a linked bf16 X or residual sum, or writes a linked bf16 output.
bool has_bf16_link(const Node& n, const std::vector<PrepareInput>& inputs);

// `inputs` with a linked bf16 X or sum seen as f32: what the wrapped kernel is prepared for.
std::vector<PrepareInput> bf16_f32_view(const std::vector<PrepareInput>& inputs);

// Wraps `inner` (prepared for bf16_f32_view(inputs), f32 output) in the conversions.
std::unique_ptr<PreparedKernel> wrap_bf16_boundary(const Node& n, std::unique_ptr<PreparedKernel> inner);

}  // namespace cuvil
