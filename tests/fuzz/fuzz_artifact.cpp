// libFuzzer target: the .cuv loader (header, section table, manifest, weights index, graph), with the checksums
// not checked so that mutations reach every check behind them. Whatever loads must print and serialize again.
#include <cstddef>
#include <cstdint>

#include "artifact/artifact.h"
#include "ir/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cuvil::artifact::LoadOptions opts;
  opts.verify_checksums = false;
  opts.host_features = std::vector<std::string>{"sse2"};
  try {
    cuvil::artifact::Loaded a = cuvil::artifact::load_memory(data, size, opts);
    cuvil::artifact::SaveInput in;
    in.graph = a.graph;
    std::string again = cuvil::artifact::serialize(in);
    cuvil::artifact::Loaded b = cuvil::artifact::load_memory(again.data(), again.size());
    if (cuvil::print_graph(*b.graph) != cuvil::print_graph(*a.graph)) __builtin_trap();
  } catch (const cuvil::Error&) {
  }
  return 0;
}
