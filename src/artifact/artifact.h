// The .cuv artifact: a compiled model in one versioned file (format.h), written by the compiler and loaded by
// the runtime library alone (no LLVM, no Python). Loading checks every field and offset before use: a
// truncated, corrupted, wrong-version or foreign file is a cuvil::Error naming what is wrong, and a file whose
// code needs CPU features the host lacks is refused with the list of those features.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_code.h"
#include "ir/graph.h"
#include "kernels/onednn/prepacked.h"
#include "runtime/weight_recipes.h"

namespace cuvil::artifact {

// A symbol's range as compiled (`--dim batch=1..64`); -1: unbounded on that side.
struct DimRange {
  std::string symbol;
  int64_t lo = -1, hi = -1;
};

// What goes into an artifact besides the graph.
struct SaveInput {
  std::shared_ptr<const Graph> graph;  // optimized, shape-inferred, verified
  std::string config_json = "{}";      // the normalized compile configuration (a JSON object)
  std::string extra_json = "{}";       // the front end's data (a JSON object; e.g. Python's output structure)
  std::string model_fingerprint;       // the source model's, when known (else the graph's is used)
  std::vector<DimRange> dim_ranges;
  // Generated kernels linked into a shared object (optional), the features its code needs and the CPU it was
  // tuned for.
  std::string kernels_so;
  std::string kernel_index;  // kernel_library.h's kernel_index()
  std::vector<std::string> kernel_features;
  std::string tuned_for;
  std::string llvm_version;  // of the compiler that made the kernels ("" when none)
  // Weights in the layouts the kernels packed them into (artifact/prepacked.h: record_packed_weights); those of
  // constants the weights section holds are saved, the others left out. `prepacked_keep` holds their bytes.
  std::vector<onednn::PackedImage> prepacked;
  std::shared_ptr<const void> prepacked_keep;  // The folds the passes made, with the original weights they read (derive_fold_recipes), or null.
  std::shared_ptr<const WeightRecipes> recipes;
};

// The serialized file. Throws cuvil::Error when the graph holds what an artifact cannot (none today).
std::string serialize(const SaveInput& in);
// serialize() written to `path` atomically (a temporary file in the same directory, then rename).
void save(const std::string& path, const SaveInput& in);

struct Signature {
  std::string name;
  std::string type;  // "f32[batch, 3, 224, 224]"
};

struct Manifest {
  std::string json;  // the whole manifest as stored
  uint32_t format_version = 0;
  std::string cuvil_version, git_revision, llvm_version, onednn_version;
  std::string config_json, extra_json, model_fingerprint, graph_fingerprint, tuned_for;
  std::vector<Signature> inputs, outputs;
  std::vector<DimRange> dim_ranges;
  std::vector<std::string> required_cpu_features;
};

struct SectionInfo {
  std::string name;
  uint64_t offset = 0, size = 0, checksum = 0;
};

struct LoadOptions {
  // The host's CPU features (tests pretend another CPU); nullopt: this CPU's.
  std::optional<std::vector<std::string>> host_features;
  // Whether to parse the graph (false: manifest and sections only, for `cuvil inspect`).
  bool graph = true;
  // False only for the fuzzer, so mutated inputs reach the checks behind the checksums.
  bool verify_checksums = true;
  // Whether to load the artifact's machine code (false: the fuzzer, which must not dlopen mutated bytes).
  bool load_kernels = true;
  // Whether to give the prepacked section's images to the kernels (false: they pack from the weights section).
  bool prepacked = true;
};

struct Loaded {
  Manifest manifest;
  std::vector<SectionInfo> sections;
  // Shape-inferred and verified; its large constants view the mapped weights, which live as long as the graph
  // does (copies of those constants must not outlive it).
  std::shared_ptr<Graph> graph;
  // The artifact's machine code for generated kernels; null when it has none (they then come from the process's
  // compiler when it has one, else run op by op).
  std::shared_ptr<codegen::KernelCodeSource> kernel_code;
  std::string source_map_json;
  // Prepacked weights given to the kernels (onednn::provide_packed) for as long as the graph lives; when the
  // section's were not usable here, why.
  size_t prepacked_images = 0;
  std::string prepacked_unused;
  // Likewise the CPU GEMM's stored panels (section gemm_panels).
  size_t gemm_panels = 0;
  std::string gemm_panels_unused;
  // The weight_recipes section, checked against the graph (its originals view the weights section); null when none.
  std::shared_ptr<const WeightRecipes> recipes;
};

// Maps the file (private, copy-on-write: the weights are used where they lie).
Loaded load_file(const std::string& path, const LoadOptions& opts = {});
// From a caller's buffer (copied once into an aligned mapping; the caller's buffer may go afterwards).
Loaded load_memory(const void* data, size_t size, const LoadOptions& opts = {});

// Where each manifest dim range applies: every input axis whose dim is that bare symbol.
struct DimBound {
  size_t input = 0, axis = 0;
  DimRange range;
};
std::vector<DimBound> dim_bounds(const Manifest& m, const Graph& g);
// Throws InputError naming the input when a dim of these input shapes lies outside its range.
void check_dim_ranges(const std::vector<DimBound>& bounds, const Graph& g,
                      const std::vector<std::vector<int64_t>>& input_shapes);

// The manifest, the sections and the host check as text (`cuvil inspect m.cuv`).
std::string describe(const Loaded& a);

// Whether these bytes start like an artifact (the magic), for tools choosing a loader.
bool looks_like_artifact(const void* data, size_t size);

}  // namespace cuvil::artifact
