#include "serving/model_repository.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "serving/protocol.h"
#include "support/file_io.h"

namespace cuvil::serving {
namespace fs = std::filesystem;
namespace {

const char* const kModelFiles[] = {"model.cuv", "model.onnx", "model.cvir"};

bool is_version(const std::string& s) {
  return !s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The newest version folder holding a model file: (version, file).
std::pair<std::string, fs::path> newest_version(const fs::path& model_dir) {
  std::string best;
  fs::path file;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(model_dir, ec)) {
    std::string v = e.path().filename().string();
    if (!e.is_directory() || !is_version(v)) continue;
    if (!best.empty() && std::stoll(v) <= std::stoll(best)) continue;
    for (const char* f : kModelFiles)
      if (fs::is_regular_file(e.path() / f)) {
        best = v;
        file = e.path() / f;
        break;
      }
  }
  return {best, file};
}

fs::file_time_type stamp_of(const fs::path& file, const fs::path& config) {
  std::error_code ec;
  auto t = fs::last_write_time(file, ec);
  auto c = fs::last_write_time(config, ec);
  return ec ? t : std::max(t, c);
}

// Plans every batch size the batcher can form (1..max_batch_size) before the first request, so no request pays
// for planning and preparing kernels; only when every other input dim is fixed (else the shapes are unknown).
void warm_up(ServedModel& model, int64_t max_batch) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorSpec& s : model.inputs()) {
    if (!s.rank_known) return;
    for (size_t d = max_batch > 0 ? 1 : 0; d < s.shape.size(); ++d)
      if (s.shape[d] < 0) return;
    shapes.push_back(s.shape);
  }
  for (int64_t b = max_batch > 0 ? 1 : 0; b <= std::min<int64_t>(max_batch, 64); ++b) {  // (the plan cache: 64)
    if (max_batch > 0)
      for (auto& shape : shapes) shape[0] = b;
    model.prepare(shapes);
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& text) {
  using json = nlohmann::json;
  json j = json::parse(text, nullptr, false);
  CUVIL_CHECK(!j.is_discarded() && j.is_object(), "config.json is not a JSON object");
  ModelConfig c;
  auto get_int = [&](const char* key, int64_t lo, int64_t hi, int64_t fallback) -> int64_t {
    if (!j.contains(key)) return fallback;
    CUVIL_CHECK(j[key].is_number_integer(), "config.json: '", key, "' must be an integer");
    int64_t v = j[key].get<int64_t>();
    CUVIL_CHECK(v >= lo && v <= hi, "config.json: '", key, "' is ", v, ", outside [", lo, ", ", hi, "]");
    return v;
  };
  static const char* const kKeys[] = {"max_batch_size", "max_queue_delay_us", "max_queue_size", "instances",
                                      "threads", "timeout_ms", "warmup"};
  for (const auto& item : j.items()) {  // (not a structured binding: clang 14 cannot capture one)
    const std::string& k = item.key();
    CUVIL_CHECK(std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* x) { return k == x; }) != std::end(kKeys),
                "config.json: unknown key '", k, "'");
  }
  c.batcher.max_batch_size = get_int("max_batch_size", 0, 1 << 16, 0);
  c.batcher.max_queue_delay = std::chrono::microseconds(get_int("max_queue_delay_us", 0, 10'000'000, 500));
  c.batcher.max_queue_size = size_t(get_int("max_queue_size", 1, 1 << 20, 1024));
  c.model.instances = int(get_int("instances", 1, 64, 1));
  c.batcher.workers = c.model.instances;
  c.model.threads = int(get_int("threads", 0, 1024, 0));
  c.timeout = std::chrono::milliseconds(get_int("timeout_ms", 1, 3'600'000, 60000));
  if (j.contains("warmup")) {
    CUVIL_CHECK(j["warmup"].is_boolean(), "config.json: 'warmup' must be true or false");
    c.warmup = j["warmup"].get<bool>();
  }
  return c;
}

ModelRepository::ModelRepository(fs::path dir, Metrics& metrics) : dir_(std::move(dir)), metrics_(metrics) {
  CUVIL_CHECK(fs::is_directory(dir_), "model repository '", dir_.string(), "' is not a directory");
}

ModelRepository::~ModelRepository() { drain(); }

void VersionLabels::add(uint64_t weights_version, const std::string& label) {
  std::lock_guard lock(mu_);
  labels_[weights_version] = label;
}

std::string VersionLabels::of(uint64_t weights_version, const std::string& fallback) const {
  std::lock_guard lock(mu_);
  auto it = labels_.find(weights_version);
  return it != labels_.end() ? it->second : fallback;
}

namespace {

struct VersionFiles {
  std::string version;
  fs::path file, config;
  std::string config_text;
};

VersionFiles version_files(const fs::path& dir, const std::string& name) {
  CUVIL_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
              "bad model name '", name, "'");
  fs::path model_dir = dir / name;
  CUVIL_CHECK(fs::is_directory(model_dir), "no model '", name, "' in the repository");
  VersionFiles f;
  std::tie(f.version, f.file) = newest_version(model_dir);
  CUVIL_CHECK(!f.version.empty(), "model '", name, "' has no version folder with model.cuv, model.onnx or model.cvir");
  f.config = model_dir / "config.json";
  if (fs::exists(f.config)) f.config_text = RegularFile::open(f.config.string(), "model config").read_all(1 << 20);
  return f;
}

}  // namespace

std::shared_ptr<LoadedModel> ModelRepository::build(const std::string& name) const {
  VersionFiles f = version_files(dir_, name);
  auto m = std::make_shared<LoadedModel>();
  m->name = name;
  m->version = f.version;
  m->path = f.file.string();
  m->stamp = stamp_of(f.file, f.config);
  m->config_text = f.config_text;
  if (!f.config_text.empty()) m->config = parse_model_config(f.config_text);
  std::shared_ptr<ServedModel> served = load_served_model(m->path, m->config.model);
  for (const auto* specs : {&served->inputs(), &served->outputs()})
    for (const TensorSpec& s : *specs)
      CUVIL_CHECK(s.dtype != DType::str, "model '", name, "': '", s.name,
                  "' is a string tensor, and cuvil serve does not take BYTES tensors yet");
  if (m->config.batcher.max_batch_size > 0)
    for (const TensorSpec& s : served->inputs())
      CUVIL_CHECK(s.rank_known && !s.shape.empty() && s.shape[0] < 0, "model '", name, "': max_batch_size ",
                  m->config.batcher.max_batch_size, " needs every input's dim 0 dynamic (input '", s.name,
                  "' has ", s.rank_known ? shape_str(s.shape) : std::string("an unknown rank"), ")");
  if (m->config.warmup) warm_up(*served, m->config.batcher.max_batch_size);
  m->labels = std::make_shared<VersionLabels>();
  m->labels->add(1, m->version);
  m->batcher = std::make_shared<DynamicBatcher>(served, m->config.batcher, &metrics_.model(name));
  return m;
}

std::shared_ptr<LoadedModel> ModelRepository::swap_weights(const LoadedModel& cur) const {
  VersionFiles f = version_files(dir_, cur.name);
  if (f.config_text != cur.config_text) return nullptr;  // batching, instances, ... change: a reload
  // The label is known before the weights serve, so every response names the version that produced it.
  uint64_t id = cur.batcher->model()->swap_weights(f.file.string(),
                                                   [&](uint64_t v) { cur.labels->add(v, f.version); });
  if (id == 0) return nullptr;
  auto m = std::make_shared<LoadedModel>();
  m->name = cur.name;
  m->version = f.version;
  m->path = f.file.string();
  m->stamp = stamp_of(f.file, f.config);
  m->config = cur.config;
  m->config_text = cur.config_text;
  m->batcher = cur.batcher;
  m->labels = cur.labels;
  return m;
}

int ModelRepository::load_all() {
  int failed = 0;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_))
    if (e.is_directory() && e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    try {
      load(n);
    } catch (const std::exception& e) {
      std::cerr << "cuvil serve: model '" << escape_for_message(n) << "' failed to load: " << e.what() << "\n";
      ++failed;
    }
  }
  return failed;
}

bool ModelRepository::load(const std::string& name) {
  std::lock_guard load_lock(load_mu_);
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<LoadedModel> m, cur = get(name);
  bool swapped = false;
  try {
    if (cur) m = swap_weights(*cur);
    swapped = m != nullptr;
    if (!m) m = build(name);
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    failed_[name] = e.what();
    throw;
  }
  std::shared_ptr<LoadedModel> old;
  {
    std::lock_guard lock(mu_);
    failed_.erase(name);
    old = std::exchange(loaded_[name], m);
  }
  std::cerr << "cuvil serve: " << (swapped ? "swapped the weights of" : old ? "reloaded" : "loaded") << " model '"
            << escape_for_message(name) << "' (version " << m->version << ") in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count()
            << " ms\n";
  // `old` drains when its last request lets go (here, or in a request thread still holding it); after a swap
  // it shares the batcher with `m`, which goes on.
  return swapped;
}

namespace {

void write_whole(const fs::path& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  CUVIL_CHECK(f != nullptr, "cannot write '", path.string(), "'");
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  CUVIL_CHECK(ok, "cannot write '", path.string(), "'");
}

}  // namespace

bool ModelRepository::load_files(const std::string& name,
                                 const std::vector<std::pair<std::string, std::string>>& files,
                                 const std::optional<std::string>& config) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name[0] == '.')
    throw ProtocolError(400, "bad model name '" + name + "'");
  if (files.empty()) throw ProtocolError(400, "file overrides need at least one 'file:<version>/model.cuv'");
  std::string version;
  for (const auto& [path, bytes] : files) {
    size_t slash = path.find('/');
    std::string v = path.substr(0, slash), file = slash == std::string::npos ? "" : path.substr(slash + 1);
    bool known = std::any_of(std::begin(kModelFiles), std::end(kModelFiles), [&](const char* f) { return file == f; });
    if (!is_version(v) || !known)
      throw ProtocolError(400, "file override 'file:" + path +
                                   "': expected 'file:<version>/model.cuv' (or model.onnx, model.cvir)");
    if (!version.empty() && v != version)
      throw ProtocolError(400, "file overrides must all be in one version folder ('" + version + "', '" + v + "')");
    version = v;
  }
  if (config) parse_model_config(*config);  // (throws cuvil::Error: a 400 "failed to load" for the caller)
  fs::path model_dir = dir_ / name, target = model_dir / version;
  fs::path staging = model_dir / (".upload-" + version + "-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::optional<std::string> old_config;
  bool placed = false, config_written = false, created = !fs::exists(model_dir);
  try {
    fs::create_directories(model_dir);
    if (fs::exists(target)) throw ProtocolError(400, "model '" + name + "' already has a version " + version);
    fs::create_directory(staging);
    for (const auto& [path, bytes] : files) write_whole(staging / path.substr(path.find('/') + 1), bytes);
    fs::path config_path = model_dir / "config.json";
    if (config) {
      if (fs::exists(config_path))
        old_config = RegularFile::open(config_path.string(), "model config").read_all(1 << 20);
      write_whole(model_dir / ".config.json.upload", *config);
      fs::rename(model_dir / ".config.json.upload", config_path);
      config_written = true;
    }
    std::error_code ec;
    fs::rename(staging, target, ec);  // fails when the folder appeared meanwhile (another upload)
    if (ec) throw ProtocolError(400, "model '" + name + "' already has a version " + version);
    placed = true;
    return load(name);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    if (placed) fs::remove_all(target, ec);
    if (config_written) {
      if (old_config) write_whole(model_dir / "config.json", *old_config);
      else fs::remove(model_dir / "config.json", ec);
    }
    if (created) fs::remove_all(model_dir, ec);
    throw;
  }
}

void ModelRepository::unload(const std::string& name) {
  std::lock_guard load_lock(load_mu_);
  std::shared_ptr<LoadedModel> old;
  {
    std::lock_guard lock(mu_);
    auto it = loaded_.find(name);
    if (it == loaded_.end()) throw ProtocolError(404, "model '" + name + "' is not loaded");
    old = it->second;
    loaded_.erase(it);
    failed_.erase(name);
  }
}

void ModelRepository::poll_changes() {
  std::vector<std::shared_ptr<LoadedModel>> current;
  {
    std::lock_guard lock(mu_);
    for (auto& [n, m] : loaded_) current.push_back(m);
  }
  for (auto& m : current) {
    fs::path model_dir = dir_ / m->name;
    if (!fs::is_directory(model_dir)) continue;  // removed: keep serving until unloaded explicitly
    auto [version, file] = newest_version(model_dir);
    if (version.empty()) continue;
    if (version == m->version && file.string() == m->path && stamp_of(file, model_dir / "config.json") == m->stamp)
      continue;
    try {
      load(m->name);
    } catch (const std::exception& e) {
      std::cerr << "cuvil serve: reloading model '" << escape_for_message(m->name)
                << "' failed, the old version keeps serving: " << e.what() << "\n";
      std::lock_guard lock(mu_);
      // Remember the stamp so a broken file is not reloaded every poll.
      auto it = loaded_.find(m->name);
      if (it != loaded_.end()) it->second->stamp = stamp_of(file, model_dir / "config.json");
    }
  }
}

void ModelRepository::drain() {
  // The models stay listed: a request that comes now is rejected by its batcher (503), not told the model is gone.
  std::vector<std::shared_ptr<LoadedModel>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [n, m] : loaded_) all.push_back(m);
  }
  for (auto& m : all) m->batcher->drain();
}

std::shared_ptr<LoadedModel> ModelRepository::get(const std::string& name, const std::string& version) const {
  std::lock_guard lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) return nullptr;
  if (!version.empty() && version != it->second->version) return nullptr;
  return it->second;
}

std::vector<ModelState> ModelRepository::index() const {
  std::vector<ModelState> r;
  std::lock_guard lock(mu_);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory()) continue;
    std::string n = e.path().filename().string();
    if (n.empty() || n[0] == '.') continue;
    ModelState s{n, "", "UNAVAILABLE", ""};
    auto it = loaded_.find(n);
    if (it != loaded_.end()) {
      s.version = it->second->version;
      s.state = "READY";
    } else {
      auto f = failed_.find(n);
      s.reason = f != failed_.end() ? f->second : "unloaded";
    }
    r.push_back(s);
  }
  std::sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return r;
}

}  // namespace cuvil::serving
