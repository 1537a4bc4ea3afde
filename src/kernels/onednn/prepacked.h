// Constants packed ahead of time: what a preparation packed (recorded to be saved, in a .cuv artifact's
// `prepacked` section) and packed images given back at load, which pack_shared (onednn_common.h) then uses in
// place of a reorder. No oneDNN type here, so the artifact layer can include it: a memory descriptor travels as
// its bytes, compared byte for byte and never parsed, so a damaged or foreign image is at worst not used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cuvil::onednn {

// One constant in a primitive's layout: what pack_shared made of `source` times `scale` reordered from `from`
// (its dense layout) into `to` (the primitive's).
struct PackedImage {
  const void* source = nullptr;  // the dense constant's data
  size_t source_nbytes = 0;
  float scale = 1.f;
  std::string from, to;  // the memory descriptors, as oneDNN's bytes (packed_desc_bytes() long)
  const void* data = nullptr;  // the packed bytes
  size_t nbytes = 0;
};

// The size of a descriptor's bytes in this build, and a tag naming their encoding (oneDNN's version and that
// size): images made under another tag are never used.
size_t packed_desc_bytes();
std::string packed_layout_tag();

// While alive, records every constant that pack_shared packs or finds packed already, on any thread, once per
// (source, scale, from, to). The images' bytes stay valid while the recorder lives. One recorder at a time.
class PackRecorder {
 public:
  PackRecorder();
  ~PackRecorder();
  PackRecorder(const PackRecorder&) = delete;
  PackRecorder& operator=(const PackRecorder&) = delete;
  std::vector<PackedImage> images() const;

  // (pack_shared's side)
  void add(PackedImage image, std::shared_ptr<const void> keep);

 private:
  mutable std::mutex mu_;
  std::vector<PackedImage> images_;
  std::vector<std::shared_ptr<const void>> keep_;
};

// Makes `images` available to pack_shared: a request for exactly (source, scale, from, to) whose packed size is
// `nbytes` uses `data` where it lies: no reorder and no copy. `owner` keeps the bytes (and the sources) alive;
// the registry holds it weakly, so once the owner is gone its images are never used (and are swept).
void provide_packed(const std::vector<PackedImage>& images, const std::shared_ptr<const void>& owner);

// How pack_shared served its requests in this process (tests, `cuvil profile`): from provided images, by a
// reorder, or by the dense constant itself (source and packed layouts equal and no scale: nothing to copy).
// The CPU GEMM's panels (kernels/cpu/gemm.h) are counted apart: stored ones used, or packed at prepare.
struct PackCounts {
  int64_t provided = 0, reordered = 0, dense = 0;
  int64_t gemm_provided = 0, gemm_packed = 0;
};
PackCounts pack_counts();

// ---- pack_shared's side.
// The provided image for exactly this request, or false; then `other_layout` (if given) says whether images of
// this source were provided for other requests (another layout, scale or size: the host chose differently).
struct ProvidedPack {
  const void* data = nullptr;
  std::shared_ptr<const void> owner;
};
bool find_provided(const void* source, float scale, const std::string& from, const std::string& to, size_t nbytes,
                   ProvidedPack* out, bool* other_layout = nullptr);
// Hands an image to the recorder, if one is alive; `keep` holds its bytes.
void note_packed(const PackedImage& image, const std::shared_ptr<const void>& keep);
enum class PackedHow { provided, reordered, dense, gemm_provided, gemm_packed };
void count_packed(PackedHow how);

}  // namespace cuvil::onednn
