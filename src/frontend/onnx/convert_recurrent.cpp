// ONNX converters for the recurrent family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_recurrent(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
