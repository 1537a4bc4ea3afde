// bf16 activations between bf16 convolutions (issue 28). A bf16 executor (KernelOptions::precision = bf16) runs a
// copy of its graph in which a FusedConv whose output is read only by other FusedConvs, as their X or their
// residual Sum, writes that output as bf16 (`bf16_y`; oneDNN's primitive rounds its f32 accumulator, bias,
// residual sum and activation into a bf16 destination), and the readers take it as it is: their bf16 primitives
// read X without a conversion pass, and a residual arrives in half the bytes. So ResNet's block-to-block
// activations stay bf16 as they do in OpenVINO; grouped (depthwise) layers link both ways and run bf16 where an
// end is linked (MobileNetV2's blocks, CUVIL_GROUPED_LINKS=0 leaves them out). Not linked: graph outputs (f32), values read by anything else
// (pools, element-wise ops, products), nodes whose own precision is
// fp32, values read inside control-flow regions. Only where this machine runs bf16 convolutions on bf16 dot
// products (else bf16 is not taken and nothing links); a linked layer that still ends up f32 is wrapped in the
// conversions (runtime/bf16_boundary.h), so a link changes speed, never the meaning. CUVIL_BF16_LINKS=0 turns
// the links off (for comparisons).
#pragma once

#include <memory>

#include "ir/graph.h"

namespace cuvil {

// The copy of g with its bf16 links set and types re-inferred, or g itself when nothing links.
std::shared_ptr<const Graph> link_bf16_activations(const std::shared_ptr<const Graph>& g);

// How many values of g are bf16 activations between bf16 layers (for tests and reports).
int count_bf16_links(const Graph& g);

}  // namespace cuvil
