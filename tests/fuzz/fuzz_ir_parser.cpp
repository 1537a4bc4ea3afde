// libFuzzer target: the IR text parser, then inference and the verifier on whatever parses; and the printer must
// round-trip anything the parser accepts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<cuvil::Graph> g;
  try {
    g = cuvil::parse_graph(text);
  } catch (const cuvil::Error&) {
    return 0;
  }
  std::string printed = cuvil::print_graph(*g);
  if (cuvil::print_graph(*cuvil::parse_graph(printed)) != printed) __builtin_trap();
  try {
    cuvil::infer_shapes(*g);
    cuvil::verify(*g);
  } catch (const cuvil::Error&) {
  }
  return 0;
}
