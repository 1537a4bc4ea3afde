// ONNX converters for the elementwise family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_elementwise(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
