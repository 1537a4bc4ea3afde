// libFuzzer target: the ONNX loader (protobuf parsing, conversion, shape inference, verification) must turn any
// byte string into either a graph or a cuvil::Error, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>

#include "frontend/onnx/onnx_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cuvil::import_onnx_bytes(data, size);  // no base dir: external data is refused, nothing is read from disk
  } catch (const cuvil::Error&) {
  }
  return 0;
}
