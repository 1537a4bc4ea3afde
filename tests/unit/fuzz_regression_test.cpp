// Inputs the fuzzers once crashed on (tests/fuzz/regressions/<target>/): each must now load or fail with a
// cuvil::Error. Under ASan + UBSan (scripts/test.sh) this also proves the fix is clean.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/onnx/onnx_importer.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "ir/npy.h"

using namespace cuvil;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> inputs_of(const std::string& target) {
  std::vector<std::string> files;
  fs::path dir = fs::path(CUVIL_SOURCE_DIR) / "tests" / "fuzz" / "regressions" / target;
  if (!fs::exists(dir)) return files;
  for (auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    files.push_back(ss.str());
  }
  return files;
}

}  // namespace

TEST(FuzzRegressions, OnnxLoader) {
  for (const std::string& bytes : inputs_of("onnx")) {
    try {
      import_onnx_bytes(bytes.data(), bytes.size());
    } catch (const Error&) {
    }
  }
}

TEST(FuzzRegressions, IrParser) {
  for (const std::string& text : inputs_of("ir")) {
    try {
      auto g = parse_graph(text);
      infer_shapes(*g);
      verify(*g);
    } catch (const Error&) {
    }
  }
}

TEST(FuzzRegressions, Npy) {
  for (const std::string& bytes : inputs_of("npy")) {
    try {
      parse_npy(bytes.data(), bytes.size());
    } catch (const Error&) {
    }
  }
}
