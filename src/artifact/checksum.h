// The sections' checksum: a 64-bit hash over 32-byte stripes in four lanes (xxHash64's structure), several GB/s,
// so checking ResNet-50's 100 MB of weights at load costs milliseconds. It detects corruption and truncation;
// it is not a defence against a forger (nothing in a file is trusted because its checksum matches).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuvil::artifact {

uint64_t checksum64(const void* data, size_t size);

}  // namespace cuvil::artifact
