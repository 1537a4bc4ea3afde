#include "frontend/load_model.h"

#include <fstream>
#include <sstream>

#include "frontend/onnx/onnx_importer.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace cuvil {

std::shared_ptr<Graph> load_model(const std::string& path) {
  auto ends_with = [&](const char* ext) {
    std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(".cvir")) {
    std::ifstream f(path);
    CUVIL_CHECK(f, "cannot open '", path, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    try {
      auto g = parse_graph(ss.str());
      infer_shapes(*g);
      verify(*g);
      return g;
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }
  return import_onnx_file(path);
}

}  // namespace cuvil
