// Writing a .cuv artifact (format.h): the graph printed with its large constants moved into the weights
// section, a manifest, a source map, and the sections laid out 64-byte aligned with their checksums.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/cpu_features.h"
#include "artifact/format.h"
#include "artifact/prepacked.h"
#include "ir/text_format.h"
#include "support/error.h"
#include "support/sha256.h"

namespace cuvil::artifact {

namespace {

using json = nlohmann::ordered_json;

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// The weights section: its index, then each tensor at an aligned offset. Tensors sharing storage are stored once.
class WeightsBuilder {
 public:
  int64_t add(const Tensor& t) {
    auto key = std::make_tuple(t.raw(), t.nbytes());
    auto it = seen_.find(key);
    if (it != seen_.end()) return it->second;
    int64_t index = int64_t(tensors_.size());
    tensors_.push_back(t);
    seen_[key] = index;
    return index;
  }
  // The index of the tensor stored for these bytes, or -1.
  int64_t find(const void* data, size_t nbytes) const {
    auto it = seen_.find(std::make_tuple(data, nbytes));
    return it == seen_.end() ? -1 : it->second;
  }
  std::string bytes() const {
    uint64_t head = sizeof(WeightsIndexHead) + tensors_.size() * sizeof(WeightsIndexEntry);
    std::vector<WeightsIndexEntry> entries;
    uint64_t at = align_up(head);
    for (const Tensor& t : tensors_) {
      entries.push_back({at, uint64_t(t.nbytes())});
      at = align_up(at + t.nbytes());
    }
    std::string out(at, '\0');
    WeightsIndexHead h{uint64_t(tensors_.size()), 0};
    std::memcpy(out.data(), &h, sizeof h);
    if (!entries.empty())
      std::memcpy(out.data() + sizeof h, entries.data(), entries.size() * sizeof(WeightsIndexEntry));
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].nbytes()) std::memcpy(out.data() + entries[i].offset, tensors_[i].raw(), tensors_[i].nbytes());
    return out;
  }

 private:
  std::vector<Tensor> tensors_;
  std::map<std::tuple<const void*, size_t>, int64_t> seen_;
};

json signature(const std::vector<Value*>& vs) {
  json a = json::array();
  for (Value* v : vs) a.push_back({{"name", v->name()}, {"type", v->type().str()}});
  return a;
}

// Per node (regions' nodes nested under theirs): op, outputs, location; a FusedKernel's generated kernel maps to
// its body's nodes and so to their Python lines or ONNX nodes.
json source_map(const Graph& g, int depth = 0) {
  json nodes = json::array();
  for (const auto& n : g.nodes()) {
    json e = {{"op", std::string(n->op_name())}, {"loc", n->loc().str()}};
    json outs = json::array();
    for (Value* v : n->outputs()) outs.push_back(v->name());
    e["outputs"] = outs;
    if (depth < 64) {
      json regions = json::array();
      for (Graph* r : n->regions()) regions.push_back(source_map(*r, depth + 1));
      if (!regions.empty()) e["regions"] = regions;
    }
    nodes.push_back(e);
  }
  return nodes;
}

json parse_object(const std::string& text, const char* what) {
  json j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(std::string("artifact: the ") + what + " must be a JSON object");
  return j;
}

}  // namespace

namespace {

// The weight_recipes section: the originals (stored in the weights section) and the folds.
json recipes_json(const WeightRecipes& r, WeightsBuilder& weights) {
  json originals = json::array(), folds = json::array();
  for (const auto& [name, t] : r.originals)
    originals.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype()))}, {"dims", t.shape()},
                         {"weight", weights.add(t)}});
  for (const FoldRecipe& f : r.folds)
    folds.push_back({{"kind", "batch_norm"}, {"out_w", f.out_w}, {"out_b", f.out_b}, {"w", f.w}, {"b", f.b},
                     {"scale", f.scale}, {"bias", f.bias}, {"mean", f.mean}, {"var", f.var}, {"eps", f.eps},
                     {"by_column", f.by_column}});
  return {{"originals", originals}, {"folds", folds}};
}

}  // namespace

const char* section_name(SectionKind k) {
  switch (k) {
    case SectionKind::manifest: return "manifest";
    case SectionKind::graph: return "graph";
    case SectionKind::weights: return "weights";
    case SectionKind::source_map: return "source_map";
    case SectionKind::kernels: return "kernels";
    case SectionKind::kernel_index: return "kernel_index";
    case SectionKind::prepacked: return "prepacked";
    case SectionKind::weight_recipes: return "weight_recipes";
    case SectionKind::gemm_panels: return "gemm_panels";
  }
  return "?";
}

// JSON text; a name that is not valid UTF-8 (which JSON cannot hold) is a clear error, not nlohmann's exception.
static std::string dump_json(const json& j, int indent, const char* what) {
  try {
    return j.dump(indent);
  } catch (const json::exception& e) {
    throw Error(str_cat("artifact: cannot write the ", what, ": ", e.what(),
                        " (the model's names must be valid UTF-8)"));
  }
}

std::string serialize(const SaveInput& in) {
  CUVIL_CHECK(in.graph, "artifact: no graph to save");
  WeightsBuilder weights;
  PrintOptions po;
  po.external = [&](const Tensor& t) { return weights.add(t); };
  std::string graph_text = print_graph(*in.graph, po);
  std::string recipes;
  if (in.recipes && !in.recipes->folds.empty()) recipes = dump_json(recipes_json(*in.recipes, weights), -1, "weight recipes");
  std::string weight_bytes = weights.bytes();

  Sha256 fp;
  fp.update(graph_text).update(weight_bytes);
  std::string graph_fingerprint = to_hex(fp.finish());

  json m;
  m["format"] = "cuvil-artifact";
  m["format_version"] = kFormatVersion;
  m["cuvil_version"] = CUVIL_VERSION;
  m["git_revision"] = CUVIL_GIT_REV;
  m["llvm_version"] = in.llvm_version;
  m["onednn_version"] = CUVIL_ONEDNN_VERSION;
  m["config"] = parse_object(in.config_json, "configuration");
  m["model_fingerprint"] = in.model_fingerprint.empty() ? graph_fingerprint : in.model_fingerprint;
  m["graph_fingerprint"] = graph_fingerprint;
  m["inputs"] = signature(in.graph->inputs());
  m["outputs"] = signature(in.graph->outputs());
  json dims = json::array();
  for (const DimRange& d : in.dim_ranges) dims.push_back({{"symbol", d.symbol}, {"lo", d.lo}, {"hi", d.hi}});
  m["dim_ranges"] = dims;
  // What the code needs, apart from what it was tuned for: without machine code, the baseline (the runtime
  // library's kernels choose their ISA level at run time).
  m["required_cpu_features"] = in.kernels_so.empty() ? baseline_cpu_features() : in.kernel_features;
  m["tuned_for"] = in.tuned_for;
  m["extra"] = parse_object(in.extra_json, "front end's data");
  std::string manifest = dump_json(m, 2, "manifest");
  std::string smap = dump_json(source_map(*in.graph), -1, "source map");

  std::vector<std::pair<SectionKind, const std::string*>> sections = {{SectionKind::manifest, &manifest},
                                                                      {SectionKind::graph, &graph_text},
                                                                      {SectionKind::weights, &weight_bytes},
                                                                      {SectionKind::source_map, &smap}};
  if (!in.kernels_so.empty()) {
    sections.push_back({SectionKind::kernels, &in.kernels_so});
    sections.push_back({SectionKind::kernel_index, &in.kernel_index});
  }
  std::string prepacked = prepacked_section(
      in.prepacked, [&](const void* data, size_t nbytes) { return weights.find(data, nbytes); });
  if (!prepacked.empty()) sections.push_back({SectionKind::prepacked, &prepacked});
  std::string panels = gemm_panels_section(
      in.prepacked, [&](const void* data, size_t nbytes) { return weights.find(data, nbytes); });
  if (!panels.empty()) sections.push_back({SectionKind::gemm_panels, &panels});
  if (!recipes.empty()) sections.push_back({SectionKind::weight_recipes, &recipes});

  std::vector<SectionEntry> table(sections.size());
  uint64_t at = align_up(sizeof(Header) + table.size() * sizeof(SectionEntry));
  for (size_t i = 0; i < sections.size(); ++i) {
    SectionEntry& e = table[i];
    std::memset(&e, 0, sizeof e);
    e.kind = uint32_t(sections[i].first);
    e.offset = at;
    e.size = sections[i].second->size();
    e.flags = kSectionStripedChecksum;  // (read at memory speed: checksum.h)
    e.checksum = section_checksum(e.flags, sections[i].second->data(), sections[i].second->size());
    std::strncpy(e.name, section_name(sections[i].first), sizeof e.name - 1);
    at = align_up(at + e.size);
  }
  std::string out(at, '\0');
  Header h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.format_version = kFormatVersion;
  h.header_size = sizeof(Header);
  h.file_size = at;
  h.table_offset = sizeof(Header);
  h.section_count = uint32_t(table.size());
  h.entry_size = sizeof(SectionEntry);
  h.table_checksum = checksum64(table.data(), table.size() * sizeof(SectionEntry));
  h.header_checksum = checksum64(&h, offsetof(Header, header_checksum));
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, table.data(), table.size() * sizeof(SectionEntry));
  for (size_t i = 0; i < sections.size(); ++i)
    std::memcpy(out.data() + table[i].offset, sections[i].second->data(), sections[i].second->size());
  return out;
}

void save(const std::string& path, const SaveInput& in) {
  std::string bytes = serialize(in);
  std::string tmp = path + ".tmp" + std::to_string(std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write artifact '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write artifact '" + path + "': " + std::strerror(err));
    }
    done += size_t(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write artifact '" + path + "': " + std::strerror(err));
  }
}

}  // namespace cuvil::artifact
