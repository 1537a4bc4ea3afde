// The on-disk layout of a .cuv artifact (one file, little-endian, every section 64-byte aligned):
//
//   [Header, 64 bytes][section table: count x SectionEntry, 64 bytes each][sections ...]
//
// The header names the format version, the file's size and the table; the table gives each section's kind,
// offset, size and checksum. Sections: the manifest (JSON: versions, configuration, fingerprint, signature,
// required CPU features), the graph (the optimized IR as text, large constants as `external(i)`), the weights
// (an index, then each tensor's bytes at a 64-byte-aligned offset, so they are used in place from the mapping),
// the source map (JSON: per node its op, outputs and location; a FusedKernel's body locations), and optionally
// the generated kernels (a shared object). The reader (reader.h) checks every field here before it uses it.
#pragma once

#include <cstdint>

namespace cuvil::artifact {

inline constexpr char kMagic[8] = {'C', 'U', 'V', 'I', 'L', 'A', 'R', 'T'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kAlign = 64;

enum class SectionKind : uint32_t { manifest = 1, graph = 2, weights = 3, source_map = 4, kernels = 5 };
inline constexpr uint32_t kMaxSectionKind = 5;

struct Header {
  char magic[8];
  uint32_t format_version;
  uint32_t header_size;     // sizeof(Header)
  uint64_t file_size;       // the whole file: a truncated or extended file is refused
  uint64_t table_offset;    // sizeof(Header)
  uint32_t section_count;
  uint32_t entry_size;      // sizeof(SectionEntry)
  uint64_t table_checksum;  // checksum64 of the table
  uint64_t reserved;        // 0
  uint64_t header_checksum;  // checksum64 of the 56 bytes before it
};
static_assert(sizeof(Header) == 64);

struct SectionEntry {
  uint32_t kind;   // SectionKind
  uint32_t flags;  // 0
  uint64_t offset;  // a multiple of kAlign, after the table
  uint64_t size;
  uint64_t checksum;  // checksum64 of the section's bytes
  char name[32];      // the kind's name, NUL-padded (for people reading a hex dump)
};
static_assert(sizeof(SectionEntry) == 64);

// The weights section starts with an index: a count, then per tensor its offset (from the section's start, a
// multiple of kAlign, after the index) and its byte size. Dtype and dims are the graph's (`external(i)` sits in
// a typed constant).
struct WeightsIndexHead {
  uint64_t count;
  uint64_t reserved;
};
struct WeightsIndexEntry {
  uint64_t offset;
  uint64_t nbytes;
};

const char* section_name(SectionKind k);

}  // namespace cuvil::artifact
