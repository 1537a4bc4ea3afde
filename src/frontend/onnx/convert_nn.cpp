// ONNX converters for the nn family: version differences and lowerings (see converter.h).
//
// Opsets 18-28 add: AveragePool's dilations (19, the op table's own), Quantize/DequantizeLinear's saturate,
// block_size, output_dtype and precision (19-23), imported where they keep the older meaning. The other ops of the family (Conv,
// ConvTranspose, pools, MatMul, the quantized ops, Einsum, Det) have the same inputs and attributes in every opset
// up to 28 (later versions only add element types), apart from attributes later versions added with defaults that
// keep the older behaviour, so the default converter handles them.
#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

// Drops attribute `name` when it holds the value that means "as before"; any other value is refused by name.
void drop_if_default(ConvertContext& ctx, const char* name, int64_t neutral, const char* why) {
  auto a = ctx.take_attr(name);
  if (!a) return;
  if (a->kind() == AttrKind::Int && a->i() == neutral) return;
  ctx.error("attribute '", name, "' = ", a->kind() == AttrKind::Int ? std::to_string(a->i()) : "?",
            " is not supported (", why, ")");
}

// QuantizeLinear / DequantizeLinear: saturate (19) concerns float8 outputs; block_size (21, blocked quantization)
// and precision (23) keep the older behaviour at 0. output_dtype (21/23) names the result type: QuantizeLinear's
// u8 or i8 without a zero point become the zero point of that type (what the older opsets read it from), the
// zero point's own type is redundant, and DequantizeLinear's f32 is what its f32 scale gives already.
void convert_quant_linear(ConvertContext& ctx, OpKind op) {
  ctx.take_attr("saturate");
  drop_if_default(ctx, "block_size", 0, "blocked quantization");
  drop_if_default(ctx, "precision", 0, "a computation precision other than the scale's type");
  auto od = ctx.take_attr("output_dtype");
  int64_t want = od && od->kind() == AttrKind::Int ? od->i() : 0;
  if (want == 0) return void(ctx.emit(op));
  Value* zp = ctx.input(2);
  std::optional<DType> type = dtype_from_onnx_id(int(want));
  if (op == OpKind::DequantizeLinear) {
    if (type != DType::f32) ctx.error("attribute 'output_dtype' = ", want, " is not supported (f32 only)");
  } else if (zp) {
    if (zp->is_constant() && type != zp->constant().dtype())
      ctx.error("attribute 'output_dtype' = ", want, " differs from the zero point's type");
  } else if (type == DType::u8 || type == DType::i8) {
    ctx.inputs().resize(3, nullptr);
    ctx.inputs()[2] = ctx.const_tensor(Tensor::zeros(*type, {}), "zero_point");
  } else {
    ctx.error("attribute 'output_dtype' = ", want, " is not supported (u8 and i8 are)");
  }
  ctx.emit(op);
}

}  // namespace

void register_onnx_nn(OnnxConverterTable& t) {
  // Gemm-1 and Gemm-6 carry `broadcast`: 1 lets C broadcast one way to [M, N], 0 requires C to be [M, N] already.
  // Since Gemm-7, C always broadcasts one way, which accepts every valid older model with the same result.
  t["Gemm"] = [](ConvertContext& ctx) {
    auto b = ctx.take_attr("broadcast");
    if (b && ctx.opset() >= 7) ctx.error("attribute 'broadcast' was removed in opset 7");
    ctx.emit(OpKind::Gemm);
  };
  t["QuantizeLinear"] = [](ConvertContext& ctx) { convert_quant_linear(ctx, OpKind::QuantizeLinear); };
  t["DequantizeLinear"] = [](ConvertContext& ctx) { convert_quant_linear(ctx, OpKind::DequantizeLinear); };
}

}  // namespace cuvil
