// ONNX converters for the control family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_control(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
