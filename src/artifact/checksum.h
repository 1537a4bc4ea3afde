// The sections' checksums. Two functions, both detecting corruption and truncation and neither a defence against a
// forger (nothing in a file is trusted because its checksum matches):
//  - checksum64: a 64-bit hash over 32-byte stripes in four scalar lanes (xxHash64's structure), ~9 GB/s: the
//    header, the section table, and the sections of files written before stripes existed (section flags 0);
//  - checksum64_stripes: eight 64-bit lanes over 64-byte stripes, each stripe's words keyed by its position in a
//    1 KiB block and the lanes scrambled after every block (XXH3's structure), so that AVX2 computes it at the
//    speed memory delivers the bytes (ResNet-50's 260 MB of weights: ~30 ms of CPU with checksum64, ~2x less
//    with this one). The scalar and AVX2 paths give the same value on every CPU (a test checks it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuvil::artifact {

uint64_t checksum64(const void* data, size_t size);
uint64_t checksum64_stripes(const void* data, size_t size);
// The portable path of checksum64_stripes (what a CPU without AVX2 runs), for the test that the two agree.
uint64_t checksum64_stripes_scalar(const void* data, size_t size);

// A section entry's flags: bit 0 set, its checksum is checksum64_stripes (else checksum64). Other bits: unknown.
inline constexpr uint32_t kSectionStripedChecksum = 1;
inline uint64_t section_checksum(uint32_t flags, const void* data, size_t size) {
  return flags & kSectionStripedChecksum ? checksum64_stripes(data, size) : checksum64(data, size);
}

}  // namespace cuvil::artifact
