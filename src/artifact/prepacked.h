// The artifact's prepacked section (format.h): the model's weights already in the layouts oneDNN's primitives
// chose when it was saved, so that a load on a host choosing the same layouts (same oneDNN, same ISA) reorders
// nothing: pack_shared uses the images where they lie in the mapping. A host choosing another layout for a
// weight (another CPU, another thread count or precision) reorders that weight from the weights section, as
// without the section. The gemm_panels section does the same for the CPU GEMM's packed B panels
// (kernels/cpu/gemm.h), recorded and provided through the same registry.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/format.h"
#include "ir/graph.h"
#include "kernels/onednn/prepacked.h"
#include "runtime/executor.h"

namespace cuvil::artifact {

// What a preparation of `g` packs (every kernel its static shapes, or each symbolic dim at 1 and at 2, fix),
// recorded; `keep` holds the images' bytes.
struct PackedWeights {
  std::vector<onednn::PackedImage> images;
  std::shared_ptr<const void> keep;
};
PackedWeights record_packed_weights(const std::shared_ptr<const Graph>& g, const ExecutorOptions& options = {});
// Records in.graph's packed weights into in.prepacked (what the save paths call); nothing when the environment
// sets CUVIL_NO_PREPACK=1 (smaller files, weights reordered at load); CUVIL_NO_PREPACK=gemm leaves out the CPU
// GEMM's panels only, =onednn oneDNN's images only.
void add_prepacked_weights(SaveInput& in, const ExecutorOptions& options = {});

// The section's bytes for the images of constants the weights section holds: `weight_of(source, nbytes)` gives a
// constant's index there, or -1 (that image is left out).
std::string prepacked_section(const std::vector<onednn::PackedImage>& images,
                              const std::function<int64_t(const void*, size_t)>& weight_of);

// The section's images, checked (every offset and size; a malformed section throws cuvil::Error naming what is
// wrong), their sources the weights section's tensors at `weights` (`index`: that section's index). Empty, with
// `why_unused` set, when they were made under another layout tag (another oneDNN) than this build's.
std::vector<onednn::PackedImage> read_prepacked(std::string_view section, const uint8_t* weights,
                                                const std::vector<WeightsIndexEntry>& index, std::string* why_unused);

// The gemm_panels section (format.h) for the CPU GEMM's panels among `images` (those whose `to` is
// cpu::gemm_layout_tag()) of constants the weights section holds; "" when there are none.
std::string gemm_panels_section(const std::vector<onednn::PackedImage>& images,
                                const std::function<int64_t(const void*, size_t)>& weight_of);

// The section's panels, checked like read_prepacked's images. Empty, with `why_unused` set, when they were made
// under another layout tag or this host does not run the CPU GEMM (no AVX-512: its products go to oneDNN).
std::vector<onednn::PackedImage> read_gemm_panels(std::string_view section, const uint8_t* weights,
                                                  const std::vector<WeightsIndexEntry>& index,
                                                  std::string* why_unused);

}  // namespace cuvil::artifact
