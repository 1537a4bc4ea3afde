// libFuzzer target: the .cuv loader (header, section table, manifest, weights index, graph, prepacked weights),
// with the checksums not checked so that mutations reach every check behind them. Whatever loads must print and
// serialize again. The same bytes are also read as a prepacked section alone and as a gemm_panels section alone
// (artifact/prepacked.h), against a small weights index, so their checks see mutations without the file's framing
// in the way.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "artifact/artifact.h"
#include "artifact/prepacked.h"
#include "ir/text_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cuvil::artifact::LoadOptions opts;
  opts.verify_checksums = false;
  opts.load_kernels = false;  // (mutated machine code is not the loader's business: checksums guard it)
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
  static const uint8_t weights[256] = {};
  std::vector<cuvil::artifact::WeightsIndexEntry> index = {{0, 64}, {64, 192}};
  try {
    std::string why;
    auto images = cuvil::artifact::read_prepacked(
        std::string_view(reinterpret_cast<const char*>(data), size), weights, index, &why);
    for (const auto& im : images)  // every image lies inside the input, every source inside the weights
      if (static_cast<const uint8_t*>(im.data) < data || static_cast<const uint8_t*>(im.data) + im.nbytes > data + size ||
          static_cast<const uint8_t*>(im.source) + im.source_nbytes > weights + sizeof weights)
        __builtin_trap();
  } catch (const cuvil::Error&) {
  }
  try {
    std::string why;
    auto panels = cuvil::artifact::read_gemm_panels(
        std::string_view(reinterpret_cast<const char*>(data), size), weights, index, &why);
    for (const auto& im : panels)
      if (static_cast<const uint8_t*>(im.data) < data || static_cast<const uint8_t*>(im.data) + im.nbytes > data + size ||
          static_cast<const uint8_t*>(im.source) + im.source_nbytes > weights + sizeof weights)
        __builtin_trap();
  } catch (const cuvil::Error&) {
  }
  return 0;
}
