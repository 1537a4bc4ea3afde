// ONNX converters for the nn family: version differences and lowerings (see converter.h).
//
// The other ops of the family (Conv, ConvTranspose, pools, MatMul, the quantized ops, Einsum, Det) have the same
// inputs and attributes in every opset up to 17, apart from attributes later versions added with defaults that
// keep the older behaviour, so the default converter handles them.
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_nn(OnnxConverterTable& t) {
  // Gemm-1 and Gemm-6 carry `broadcast`: 1 lets C broadcast one way to [M, N], 0 requires C to be [M, N] already.
  // Since Gemm-7, C always broadcasts one way, which accepts every valid older model with the same result.
  t["Gemm"] = [](ConvertContext& ctx) {
    auto b = ctx.take_attr("broadcast");
    if (b && ctx.opset() >= 7) ctx.error("attribute 'broadcast' was removed in opset 7");
    ctx.emit(OpKind::Gemm);
  };
}

}  // namespace cuvil
