// The boundary of a u8 activation link (runtime/int8_links.h) where a linked layer cannot run int8 after all (no
// VNNI, a case oneDNN's int8 kernels lack, reference kernels asked for): its f32 kernel, wrapped so that a u8 X
// (and a u8 residual sum) is dequantized from its grid before it runs and its f32 output quantized to the output's
// grid after. Slower than either precision alone, but it computes what the link means.
#pragma once

#include <memory>
#include <vector>

#include "kernels/prepared_kernel.h"

namespace cuvil {

// Whether `n` reads a linked u8 X or residual sum, or writes a linked u8 output.
bool has_u8_link(const Node& n, const std::vector<PrepareInput>& inputs);

// `inputs` with a linked u8 X or sum seen as f32: what the wrapped kernel is prepared for.
std::vector<PrepareInput> f32_view(const Node& n, const std::vector<PrepareInput>& inputs);

// Wraps `inner` (prepared for f32_view(n, inputs)) in the conversions.
std::unique_ptr<PreparedKernel> wrap_u8_boundary(const Node& n, const std::vector<PrepareInput>& inputs,
                                                 std::unique_ptr<PreparedKernel> inner);

}  // namespace cuvil
