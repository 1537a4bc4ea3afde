// u8 activations between int8 layers (issue 28). An int8 executor (KernelOptions::precision = int8) runs a copy of
// its graph in which a calibrated FusedConv/FusedMatMul whose output only feeds other calibrated layers' X, all on
// one u8 grid, writes that output as u8 on the grid (quant_y_scale / quant_y_zero_point, requantization fused into
// its oneDNN primitive), and those layers read it as it is: no f32 tensor, no quantization pass in between.
// Residuals link too: a value read as the residual sum of int8 convolutions (besides as X) is u8 on its grid, the
// reader's sum post-op adding it on that grid (quant_sum_scale / quant_sum_zero_point), so a ResNet block's output
// stays u8 from one block to the next. A value read only as a sum links on the grid calibration gave it
// (quant_sum_scale on its readers, runtime/calibration.h); without one it stays f32, and a layer adding it into
// a u8 output quantizes after its primitive (kernels/onednn/int8.cpp).
// Where a linked layer cannot run int8 after all, kernel selection wraps its f32 kernel in the conversions
// (runtime/kernel_selection.cpp), so the link changes speed, never the meaning.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace cuvil {

// The copy of g with its int8 links set and types re-inferred, or g itself when nothing links. Graph outputs
// stay f32; a reader writing one links too (at int8 a final layer still multiplies u8 x s8, into an f32 output).
// `model_int8_only`: an fp32 executor's links, between a QDQ model's own int8 layers only (node precision int8,
// kernels/qdq_precision.h's kQdqReason; kernel_selection.cpp's node_precision).
std::shared_ptr<const Graph> link_int8_activations(const std::shared_ptr<const Graph>& g,
                                                   bool model_int8_only = false);

// A layer the int8 kernels take with a static grid for X: a calibrated FusedConv/FusedMatMul (not dynamic), its
// own precision empty or int8, constant weights and bias, not grouped, B a matrix. `model_only`: a QDQ model's
// own int8 layer (node precision int8 with kQdqReason), what an fp32 executor runs int8.
bool static_int8_layer(const Node& n, bool model_only);

// How many values of g are u8 activations between int8 layers (for tests and reports).
int count_int8_links(const Graph& g);

}  // namespace cuvil
