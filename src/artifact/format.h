// The on-disk layout of a .cuv artifact (one file, little-endian, every section 64-byte aligned):
//
//   [Header, 64 bytes][section table: count x SectionEntry, 64 bytes each][sections ...]
//
// The header names the format version, the file's size and the table; the table gives each section's kind,
// offset, size and checksum. Sections: the manifest (JSON: versions, configuration, fingerprint, signature,
// required CPU features), the graph (the optimized IR as text, large constants as `external(i)`), the weights
// (an index, then each tensor's bytes at a 64-byte-aligned offset, so they are used in place from the mapping),
// the source map (JSON: per node its op, outputs and location; a FusedKernel's body locations), and optionally
// the generated kernels (a shared object, and its index), weights prepacked in oneDNN's layouts and in the CPU
// GEMM's panels, and weight recipes. The reader (reader.h) checks every field here before it uses it.
#pragma once

#include <cstdint>

namespace cuvil::artifact {

inline constexpr char kMagic[8] = {'C', 'U', 'V', 'I', 'L', 'A', 'R', 'T'};
// Version 2 added the gemm_panels section; version 1 files (without it) still load.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kMinFormatVersion = 1;
inline constexpr uint64_t kAlign = 64;

// kernels: an ELF shared object of the generated kernels; kernel_index: per kernel its symbol and lookup key
// (artifact/kernel_library.h). Both or neither. prepacked (optional): weights already in the layouts oneDNN's
// primitives chose when the artifact was saved (artifact/prepacked.h). weight_recipes (optional): JSON, the
// original weights that passes folded (their bytes in the weights section) and each fold's recipe
// (runtime/weight_recipes.h), so that updates by the original names work on a loaded artifact. gemm_panels
// (optional, format version 2): the CPU GEMM's packed B panels (kernels/cpu/gemm.h) of constant weights.
enum class SectionKind : uint32_t {
  manifest = 1,
  graph = 2,
  weights = 3,
  source_map = 4,
  kernels = 5,
  kernel_index = 6,
  prepacked = 7,
  weight_recipes = 8,
  gemm_panels = 9
};
inline constexpr uint32_t kMaxSectionKind = 9;

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
  uint32_t flags;  // 0, or kSectionStripedChecksum (checksum.h): which function made `checksum`
  uint64_t offset;  // a multiple of kAlign, after the table
  uint64_t size;
  uint64_t checksum;  // section_checksum(flags, ...) of the section's bytes
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

// The prepacked section: a head, `count` entries (each followed by its two descriptors, `desc_bytes` each: the
// dense layout packed from, the layout packed into), then each image at a 64-byte-aligned offset from the
// section's start. An image is weight `weight` (an index into the weights section) times `scale` in layout `to`.
// `layout_tag` names the descriptors' encoding (oneDNN's version): under another, the images are not used.
struct PrepackedHead {
  uint64_t count;
  uint32_t desc_bytes;
  uint32_t reserved;
  char layout_tag[64];  // NUL-terminated
};
static_assert(sizeof(PrepackedHead) == 80);
struct PrepackedEntry {
  uint64_t weight;
  float scale;
  uint32_t reserved;
  uint64_t offset;
  uint64_t nbytes;
};
static_assert(sizeof(PrepackedEntry) == 32);

// The gemm_panels section: a head, `count` entries, then each entry's panels at a 64-byte-aligned offset from the
// section's start. An entry is weight `weight` (B, k * n f32 values, stored [n, k] when trans_b) times `alpha`
// in the CPU GEMM's panels (gemm_panels_nbytes(k, n) bytes). `layout_tag` is gemm_layout_tag() of the saving
// build (panel width, element type, the ISA the tile needs, a revision): under another, the panels are not used.
struct GemmPanelsHead {
  uint64_t count;
  uint64_t reserved;
  char layout_tag[64];  // NUL-terminated
};
static_assert(sizeof(GemmPanelsHead) == 80);
struct GemmPanelsEntry {
  uint64_t weight;
  int64_t k, n;
  float alpha;
  uint32_t trans_b;  // 0 or 1
  uint64_t offset;
  uint64_t nbytes;
};
static_assert(sizeof(GemmPanelsEntry) == 48);

const char* section_name(SectionKind k);

}  // namespace cuvil::artifact
