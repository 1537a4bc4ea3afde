// ONNX -> Cuvil IR. Reads a ModelProto (file or bytes), converts every node through the converter table
// (one entry per ONNX op, normalizing older opsets to the op table's form), then infers shapes and verifies.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace cuvil {

struct OnnxImportOptions {
  bool infer_and_verify = true;  // run shape inference and the verifier after conversion
};

// Throws cuvil::Error with a clear message for unreadable, truncated or malformed files and unsupported ops.
std::shared_ptr<Graph> import_onnx_file(const std::string& path, const OnnxImportOptions& opts = {});
// `base_dir` is where external tensor data files are looked up ("" disables external data).
std::shared_ptr<Graph> import_onnx_bytes(const void* data, size_t size, const std::string& base_dir = "",
                                         const OnnxImportOptions& opts = {});

}  // namespace cuvil

namespace cuvil {
// Reads a serialized onnx.TensorProto (the ONNX test suite's input_N.pb / output_N.pb files).
Tensor read_onnx_tensor_file(const std::string& path);
}  // namespace cuvil
