// libFuzzer target: the .npy reader.
#include <cstddef>
#include <cstdint>

#include "ir/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cuvil::Tensor t = cuvil::parse_npy(data, size);
    std::string again = cuvil::serialize_npy(t);
    if (!cuvil::parse_npy(again.data(), again.size()).same_bytes(t)) __builtin_trap();
  } catch (const cuvil::Error&) {
  }
  return 0;
}
