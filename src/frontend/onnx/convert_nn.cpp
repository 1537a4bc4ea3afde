// ONNX converters for the nn family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_nn(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
