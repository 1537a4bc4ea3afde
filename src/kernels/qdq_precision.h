// A QDQ model's own int8 layers (issues 23, 28): the reasons that mark them. fold-quantize-dequantize gives each
// layer whose input QuantizeLinear -> DequantizeLinear pair it folds the node precision "int8" with kQdqReason:
// the model asks for int8 there, so kernel selection runs it int8 at the default precision fp32 too
// (runtime/kernel_selection.cpp). Precision "fp32" asked explicitly turns the mark into "fp32" with kQdqF32Reason
// (runtime/calibration.h's keep_model_int8_in_f32). See docs/decisions/0004-qdq-models-run-int8.md.
#pragma once

namespace cuvil {

// The reason of a layer that runs int8 because the model quantizes it.
inline constexpr const char* kQdqReason = "int8: QDQ in the model";
// The reason of such a layer kept f32 because precision "fp32" was asked explicitly.
inline constexpr const char* kQdqF32Reason = "fp32 asked: the model's QDQ layer computed in f32";

}  // namespace cuvil
