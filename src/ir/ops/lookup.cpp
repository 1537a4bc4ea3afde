// Op definition (arity, attributes, shape inference) of the lookup family: LabelEncoder (ai.onnx.ml).
//
// One form for every version of ONNX's LabelEncoder: the importer (src/frontend/onnx/convert_ml.cpp) turns
// keys_* / values_* / default_* (or keys_tensor, values_tensor, default_tensor) into three tensor attributes.
// `keys` has the input's dtype (f32 keys also take f64 inputs: ONNX's keys_floats are f32); `values` and
// `default` (one element) the output's. As in ONNX Runtime, a NaN element matches no key.
#include "ir/ops/infer_util.h"

namespace cuvil {

CUVIL_DEFINE_OP(LabelEncoder) {
  s.required_attr("keys", AttrKind::Tensor);
  s.required_attr("values", AttrKind::Tensor);
  s.required_attr("default", AttrKind::Tensor);
  s.inputs(1, 1).outputs(1, 1).infer_with([](InferContext& c) {
    const Tensor& keys = c.t("keys");
    const Tensor& values = c.t("values");
    const Tensor& fallback = c.t("default");
    if (keys.rank() != 1 || values.rank() != 1 || keys.numel() != values.numel())
      c.error("'keys' and 'values' must be 1-D and equally long, got ", keys.type_str(), " and ",
              values.type_str());
    if (fallback.numel() != 1) c.error("'default' must hold one element, got ", fallback.type_str());
    if (fallback.dtype() != values.dtype())
      c.error("'default' (", dtype_name(fallback.dtype()), ") and 'values' (", dtype_name(values.dtype()),
              ") must have one dtype");
    DType in = c.input_dtype(0);
    if (in != keys.dtype() && !(keys.dtype() == DType::f32 && in == DType::f64))
      c.error("input has dtype ", dtype_name(in), " but the keys are ", dtype_name(keys.dtype()));
    c.set_output(0, values.dtype(), c.input_shape(0));
  });
}

}  // namespace cuvil
