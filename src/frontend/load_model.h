// Loads a model from any format the tools accept: ONNX (.onnx) or Cuvil's IR text (.cvir). The result is
// shape-inferred and verified.
#pragma once

#include <memory>
#include <string>

#include "frontend/onnx/onnx_importer.h"
#include "ir/graph.h"

namespace cuvil {

// `onnx` binds an ONNX model's sequence and optional inputs (the CLI's --sequence and --absent).
std::shared_ptr<Graph> load_model(const std::string& path, const OnnxImportOptions& onnx = {});

}  // namespace cuvil
