// ONNX converters for the tensor family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_tensor(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
