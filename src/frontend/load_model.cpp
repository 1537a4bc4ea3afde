#include "frontend/load_model.h"

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "support/file_io.h"

namespace cuvil {

namespace {
constexpr uint64_t kMaxTextModelBytes = uint64_t(1) << 31;  // as for ONNX files: larger models keep data apart
}  // namespace

std::shared_ptr<Graph> load_model(const std::string& path, const OnnxImportOptions& onnx) {
  auto ends_with = [&](const char* ext) {
    std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(".cvir")) {
    // A regular file (no FIFO, device or directory) of at most 2 GiB, its size checked before reading.
    std::string text = read_regular_file(path, kMaxTextModelBytes, "model");
    try {
      auto g = parse_graph(text);
      infer_shapes(*g);
      verify(*g);
      return g;
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }
  return import_onnx_file(path, onnx);
}

}  // namespace cuvil
