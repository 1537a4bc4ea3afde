// Loads a model from any format the tools accept: ONNX (.onnx) or Cuvil's IR text (.cvir). The result is
// shape-inferred and verified.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"

namespace cuvil {

std::shared_ptr<Graph> load_model(const std::string& path);

}  // namespace cuvil
