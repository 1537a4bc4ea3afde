// The model repository: DIR/<model>/config.json (optional) and DIR/<model>/<version>/model.{onnx,cvir} (model.cuv
// once the artifact lands). Each model serves its newest version; explicit load/unload, and reload on change
// (poll_changes). A reload builds the new version beside the old one and swaps it in, so requests in flight
// finish on the old one and none is dropped; a failed load keeps the old version serving.
//
// config.json: {"max_batch_size": 8, "max_queue_delay_us": 500, "max_queue_size": 1024, "instances": 1,
//               "threads": 0, "timeout_ms": 60000, "warmup": false}
// (every key optional; max_batch_size 0: no batching; max_queue_delay_us 0: no waiting, batches form only from
// requests that queued while the previous run went on)
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serving/batcher.h"
#include "serving/metrics.h"

namespace cuvil::serving {

struct ModelConfig {
  BatcherOptions batcher;
  ServedModelOptions model;
  std::chrono::milliseconds timeout{60000};  // a request's longest wait for its outputs
  bool warmup = false;  // plan batch sizes 1..max_batch_size at load (needs every other input dim fixed)
};

// Which repository version each weights version of a served model came from (a hot swap adds one).
class VersionLabels {
 public:
  void add(uint64_t weights_version, const std::string& label);
  // The label of that weights version; `fallback` when it has none (the model has no versions: 0).
  std::string of(uint64_t weights_version, const std::string& fallback) const;

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, std::string> labels_;
};

// A loaded version, shared by the requests using it (a reload swaps in a new one; the old one drains when the
// last request lets go). A hot weight swap makes a new LoadedModel for the new version that shares the batcher
// (and its queue): the responses name the version whose weights produced them (`labels`).
struct LoadedModel {
  std::string name, version, path;
  ModelConfig config;
  std::string config_text;  // config.json as read ("" without one): a swap needs it unchanged
  std::shared_ptr<DynamicBatcher> batcher;
  std::shared_ptr<VersionLabels> labels;
  std::filesystem::file_time_type stamp;  // newest mtime of the model file and config when loaded
  const ServedModel& model() const { return *batcher->model(); }
  std::string version_of(uint64_t weights_version) const { return labels->of(weights_version, version); }
};

struct ModelState {
  std::string name, version, state, reason;  // state: READY, UNAVAILABLE (with reason)
};

class ModelRepository {
 public:
  ModelRepository(std::filesystem::path dir, Metrics& metrics);
  ~ModelRepository();

  // Loads every model folder; a failed one is logged in its state. Returns the number that failed.
  int load_all();
  // Loads (or reloads) a model's newest version. When the model is loaded, the config unchanged and the new
  // version's file differs from the served one in weights alone, its weights are hot swapped in (the batcher,
  // its queue and the executors' plans stay); else the new version is built beside the old one. Returns true for
  // a hot swap. Throws cuvil::Error when it fails; the old version keeps serving.
  bool load(const std::string& name);
  // Triton's load with file overrides (the repository extension's `file:<path>` parameters): `files` maps
  // "<version>/model.{cuv,onnx,cvir}" (one new version folder) to the file's bytes; `config`, when given, replaces
  // config.json (checked first). The folder is written whole under a hidden name and renamed into place, then
  // load() runs (a weights-only file is a hot swap). When anything fails, what was written is removed again and
  // config.json restored: the old version keeps serving, the repository is as it was. Bad paths, an existing
  // version folder: ProtocolError(400).
  bool load_files(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files,
                  const std::optional<std::string>& config);
  // Stops serving a model (its queued requests still finish). Throws ProtocolError(404) when it is not loaded.
  void unload(const std::string& name);
  // Reloads the models whose files changed since they were loaded (a new version, a new file, a new config).
  void poll_changes();
  // Drains every model (graceful shutdown).
  void drain();

  // The model's serving version, or nullptr; `version` "" means any. Safe from any thread.
  std::shared_ptr<LoadedModel> get(const std::string& name, const std::string& version = "") const;
  std::vector<ModelState> index() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::shared_ptr<LoadedModel> build(const std::string& name) const;
  // The hot swap of load(): the new LoadedModel, or nullptr when `cur` cannot take the new version's weights.
  std::shared_ptr<LoadedModel> swap_weights(const LoadedModel& cur) const;
  std::filesystem::path dir_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::mutex load_mu_;  // one load at a time
  std::map<std::string, std::shared_ptr<LoadedModel>> loaded_;
  std::map<std::string, std::string> failed_;  // name -> reason of its last failed load
};

// Parses config.json's text (errors name the key).
ModelConfig parse_model_config(const std::string& text);

}  // namespace cuvil::serving
