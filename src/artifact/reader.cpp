// Loading a .cuv artifact: every header field, table entry, offset, checksum and manifest field is checked
// before it is used, so a damaged or foreign file is a cuvil::Error, never a read out of bounds.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/cpu_features.h"
#include "artifact/format.h"
#include "artifact/kernel_library.h"
#include "artifact/prepacked.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/log.h"

namespace cuvil::artifact {

namespace {

using json = nlohmann::json;

constexpr uint32_t kMaxSections = 16;
constexpr uint64_t kMaxManifestBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 40;

// The file's bytes: a private copy-on-write mapping (kernels may not write constants, but if one did, the file
// would not change), or an aligned copy of a caller's buffer.
struct Bytes {
  uint8_t* data = nullptr;
  size_t size = 0;
  bool mapped = false;
  ~Bytes() {
    if (!data) return;
    if (mapped) ::munmap(data, size);
    else std::free(data);
  }
};

class Reader {
 public:
  Reader(std::shared_ptr<Bytes> bytes, std::string what, const LoadOptions& opts)
      : b_(std::move(bytes)), what_(std::move(what)), opts_(opts) {}

  Loaded load() {
    try {
      return load_checked();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // (an allocation failure, a library's exception): still one clear error
      fail("cannot be loaded: ", e.what());
    }
  }

 private:
  template <class... A>
  [[noreturn]] void fail(const A&... parts) const {
    std::ostringstream os;
    os << what_ << ": ";
    (os << ... << parts);
    throw Error(os.str());
  }

  Loaded load_checked() {
    Loaded out;
    bool timed = log_enabled("time");
    auto t0 = timed ? wall_and_cpu_ms() : std::pair<double, double>{};
    auto lap = [&, at = t0](const char* what) mutable {  // (CUVIL_LOG=time: where a cold start goes)
      if (!timed) return;
      auto now = wall_and_cpu_ms();
      log_line("time", str_cat(what_, ": ", what, " ", fixed_ms(now.first - at.first), " ms wall, ",
                               fixed_ms(now.second - at.second), " ms CPU (process)"));
      at = now;
    };
    header_and_table(out);
    lap("header, table and section checksums");
    out.manifest = manifest(section(SectionKind::manifest));
    check_cpu(out.manifest);
    std::string_view smap = section(SectionKind::source_map);
    out.source_map_json.assign(smap.data(), smap.size());
    if (!opts_.graph) return out;
    out.graph = graph(out.manifest);
    lap("graph (parse, inference, verifier)");
    if (bool(find(SectionKind::kernels)) != bool(find(SectionKind::kernel_index)))
      fail("has one of the kernels and kernel_index sections without the other");
    if (find(SectionKind::weight_recipes)) out.recipes = recipes(*out.graph);
    if (find(SectionKind::prepacked) && opts_.prepacked) {
      std::vector<onednn::PackedImage> images;
      try {
        images = read_prepacked(section(SectionKind::prepacked), weights_base_, weights_index_, &out.prepacked_unused);
      } catch (const Error& e) {
        fail(e.what());
      }
      // Held weakly by the kernels' registry: used while the mapping lives (the graph holds it).
      onednn::provide_packed(images, b_);
      out.prepacked_images = images.size();
      if (!out.prepacked_unused.empty()) log_line("prepack", what_ + ": " + out.prepacked_unused);
    }
    if (find(SectionKind::gemm_panels) && opts_.prepacked) {
      std::vector<onednn::PackedImage> panels;
      try {
        panels = read_gemm_panels(section(SectionKind::gemm_panels), weights_base_, weights_index_,
                                  &out.gemm_panels_unused);
      } catch (const Error& e) {
        fail(e.what());
      }
      onednn::provide_packed(panels, b_);
      out.gemm_panels = panels.size();
      if (!out.gemm_panels_unused.empty()) log_line("prepack", what_ + ": " + out.gemm_panels_unused);
    }
    lap("recipes and prepacked weights");
    if (find(SectionKind::kernels) && opts_.load_kernels) {
      try {
        out.kernel_code = open_kernel_library(section(SectionKind::kernels), section(SectionKind::kernel_index));
      } catch (const Error& e) {
        fail("its generated kernels cannot be loaded: ", e.what());
      }
      lap("generated kernels (dlopen)");
    }
    return out;
  }

  void header_and_table(Loaded& out) {
    if (b_->size < sizeof(Header) || std::memcmp(b_->data, kMagic, sizeof kMagic) != 0)
      fail("not a Cuvil artifact (no CUVILART header)");
    Header h;
    std::memcpy(&h, b_->data, sizeof h);
    bool sums = opts_.verify_checksums;
    if (sums && checksum64(&h, offsetof(Header, header_checksum)) != h.header_checksum) fail("corrupt header (checksum)");
    if (h.format_version < kMinFormatVersion || h.format_version > kFormatVersion)
      fail("artifact format version ", h.format_version, "; this Cuvil (", CUVIL_VERSION, ") reads versions ",
           kMinFormatVersion, " to ", kFormatVersion, " (recompile the model)");
    format_version_ = h.format_version;
    if (h.header_size != sizeof(Header) || h.entry_size != sizeof(SectionEntry) || h.table_offset != sizeof(Header) ||
        h.reserved != 0)
      fail("corrupt header (sizes)");
    if (h.file_size != b_->size)
      fail(h.file_size > b_->size ? "truncated" : "has extra bytes", ": the header says ", h.file_size,
           " bytes, the file has ", b_->size);
    if (h.section_count == 0 || h.section_count > kMaxSections) fail("corrupt header (", h.section_count, " sections)");
    uint64_t table_end = sizeof(Header) + uint64_t(h.section_count) * sizeof(SectionEntry);
    if (table_end > b_->size) fail("truncated section table");
    table_.resize(h.section_count);
    std::memcpy(table_.data(), b_->data + sizeof(Header), table_.size() * sizeof(SectionEntry));
    if (sums && checksum64(table_.data(), table_.size() * sizeof(SectionEntry)) != h.table_checksum)
      fail("corrupt section table (checksum)");
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    std::vector<std::future<uint64_t>> large_sums = checksums_of_large_sections(sums);
    for (const SectionEntry& e : table_) {
      if (e.kind == 0 || e.kind > kMaxSectionKind) fail("unknown section kind ", e.kind);
      const char* name = section_name(SectionKind(e.kind));
      if (SectionKind(e.kind) == SectionKind::gemm_panels && format_version_ < 2)
        fail("section ", name, " in a format version ", format_version_, " file (it came with version 2)");
      for (const SectionEntry& o : table_)
        if (&o != &e && o.kind == e.kind) fail("two ", name, " sections");
      if (e.flags & ~kSectionStripedChecksum) fail("section ", name, ": unknown flags");
      uint64_t end = 0;
      if (e.offset % kAlign != 0 || e.offset < table_end || __builtin_add_overflow(e.offset, e.size, &end) ||
          end > b_->size)
        fail("section ", name, " lies outside the file (offset ", e.offset, ", ", e.size, " bytes)");
      spans.push_back({e.offset, end});
      size_t i = size_t(&e - table_.data());
      uint64_t sum = large_sums[i].valid() ? large_sums[i].get()
                     : sums                  ? section_checksum(e.flags, b_->data + e.offset, e.size)
                                             : 0;
      if (sums && sum != e.checksum) fail("section ", name, " is corrupt (checksum)");
      out.sections.push_back({name, e.offset, e.size, e.checksum});
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first < spans[i - 1].second) fail("sections overlap");
    // The alignment padding is zeros: every byte of the file is checked by something.
    uint64_t at = table_end;
    spans.push_back({b_->size, b_->size});
    for (const auto& [begin, end] : spans) {
      for (uint64_t k = at; k < begin; ++k)
        if (b_->data[k] != 0) fail("corrupt padding at offset ", k);
      at = std::max(at, end);
    }
    for (SectionKind k : {SectionKind::manifest, SectionKind::graph, SectionKind::weights, SectionKind::source_map})
      if (!find(k)) fail("no ", section_name(k), " section");
  }

  // The checksums of the sections of kLargeSection bytes or more that lie inside the file, each computed on a
  // thread of its own (the weights and the prepacked images: hundreds of MB, read at GB/s), so that a load reads
  // them at the speed of the cores it has; the others (and any outside the file) are checked in order.
  static constexpr uint64_t kLargeSection = uint64_t(16) << 20;
  std::vector<std::future<uint64_t>> checksums_of_large_sections(bool sums) const {
    std::vector<std::future<uint64_t>> out(table_.size());
    if (!sums) return out;
    bool first = true;
    for (size_t i = 0; i < table_.size(); ++i) {
      const SectionEntry& e = table_[i];
      uint64_t end = 0;
      if (e.size < kLargeSection || __builtin_add_overflow(e.offset, e.size, &end) || end > b_->size) continue;
      if (first) {  // (the first on this thread, when the others are collected)
        first = false;
        out[i] = std::async(std::launch::deferred,
                            [f = e.flags, p = b_->data + e.offset, n = e.size] { return section_checksum(f, p, n); });
      } else {
        out[i] = std::async(std::launch::async,
                            [f = e.flags, p = b_->data + e.offset, n = e.size] { return section_checksum(f, p, n); });
      }
    }
    return out;
  }

  const SectionEntry* find(SectionKind k) const {
    for (const SectionEntry& e : table_)
      if (e.kind == uint32_t(k)) return &e;
    return nullptr;
  }
  std::string_view section(SectionKind k, bool required = true) const {
    const SectionEntry* e = find(k);
    if (!e) {
      if (required) fail("no ", section_name(k), " section");
      return {};
    }
    return {reinterpret_cast<const char*>(b_->data + e->offset), size_t(e->size)};
  }

  // ---- the manifest: each field read with its type checked.
  const json& field(const json& j, const char* key, json::value_t type, const char* type_name) const {
    auto it = j.find(key);
    if (it == j.end()) fail("manifest: no field '", key, "'");
    bool ok = it->type() == type ||
              (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned);
    if (!ok) fail("manifest: field '", key, "' is not ", type_name);
    return *it;
  }
  std::string str(const json& j, const char* key) const {
    return field(j, key, json::value_t::string, "a string").get<std::string>();
  }
  int64_t num(const json& j, const char* key) const {
    const json& v = field(j, key, json::value_t::number_integer, "an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail("manifest: field '", key, "' too large");
    return v.get<int64_t>();
  }
  const json& arr(const json& j, const char* key) const { return field(j, key, json::value_t::array, "a list"); }
  const json& obj(const json& j, const char* key) const { return field(j, key, json::value_t::object, "an object"); }

  std::vector<Signature> signature(const json& j, const char* key) const {
    std::vector<Signature> r;
    for (const json& e : arr(j, key)) {
      if (!e.is_object()) fail("manifest: an entry of '", key, "' is not an object");
      r.push_back({str(e, "name"), str(e, "type")});
    }
    return r;
  }

  Manifest manifest(std::string_view text) const {
    if (text.size() > kMaxManifestBytes) fail("manifest too large");
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("manifest is not a JSON object");
    Manifest m;
    m.json.assign(text.data(), text.size());
    if (str(j, "format") != "cuvil-artifact") fail("manifest: not a Cuvil artifact's");
    int64_t v = num(j, "format_version");
    if (v != format_version_) fail("manifest: format version ", v, " (the header says ", format_version_, ")");
    m.format_version = uint32_t(v);
    m.cuvil_version = str(j, "cuvil_version");
    m.git_revision = str(j, "git_revision");
    m.llvm_version = str(j, "llvm_version");
    m.onednn_version = str(j, "onednn_version");
    m.config_json = obj(j, "config").dump();
    m.extra_json = obj(j, "extra").dump();
    m.model_fingerprint = str(j, "model_fingerprint");
    m.graph_fingerprint = str(j, "graph_fingerprint");
    m.tuned_for = str(j, "tuned_for");
    m.inputs = signature(j, "inputs");
    m.outputs = signature(j, "outputs");
    for (const json& e : arr(j, "dim_ranges")) {
      if (!e.is_object()) fail("manifest: an entry of 'dim_ranges' is not an object");
      m.dim_ranges.push_back({str(e, "symbol"), num(e, "lo"), num(e, "hi")});
    }
    for (const json& f : arr(j, "required_cpu_features")) {
      if (!f.is_string()) fail("manifest: 'required_cpu_features' holds a non-string");
      m.required_cpu_features.push_back(f.get<std::string>());
    }
    return m;
  }

  void check_cpu(const Manifest& m) const {
    std::vector<std::string> host = opts_.host_features ? *opts_.host_features : host_cpu_features();
    std::vector<std::string> missing = missing_cpu_features(m.required_cpu_features, host);
    if (missing.empty()) return;
    std::string list;
    for (const std::string& f : missing) list += (list.empty() ? "" : ", ") + f;
    fail("needs CPU features this host lacks: ", list, " (compiled for '", m.tuned_for,
         "'; recompile the model on this machine)");
  }

  // ---- the graph, its large constants viewing the weights section.
  std::shared_ptr<Graph> graph(const Manifest& m) {
    std::string_view w = section(SectionKind::weights);
    const SectionEntry* we = find(SectionKind::weights);
    if (w.size() < sizeof(WeightsIndexHead)) fail("weights section too short");
    WeightsIndexHead head;
    std::memcpy(&head, w.data(), sizeof head);
    if (head.reserved != 0 || head.count > (w.size() - sizeof head) / sizeof(WeightsIndexEntry))
      fail("weights index corrupt");
    uint64_t index_end = sizeof head + head.count * sizeof(WeightsIndexEntry);
    std::vector<WeightsIndexEntry> entries(head.count);
    if (head.count) std::memcpy(entries.data(), w.data() + sizeof head, head.count * sizeof(WeightsIndexEntry));
    for (const WeightsIndexEntry& e : entries) {
      uint64_t end = 0;
      if (e.offset % kAlign != 0 || e.offset < index_end || __builtin_add_overflow(e.offset, e.nbytes, &end) ||
          end > w.size())
        fail("weights index corrupt (a tensor outside the section)");
    }
    uint8_t* base = b_->data + we->offset;
    weights_base_ = base;
    weights_index_ = entries;
    ParseOptions po;
    po.external = [&](int64_t index, DType dtype, const std::vector<int64_t>& dims) {
      if (index < 0 || uint64_t(index) >= entries.size())
        throw Error("no weight " + std::to_string(index) + " (the artifact has " + std::to_string(entries.size()) + ")");
      uint64_t bytes = dtype_size(dtype);
      for (int64_t d : dims)
        if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes)) throw Error("bad constant shape");
      if (bytes != entries[size_t(index)].nbytes)
        throw Error("weight " + std::to_string(index) + " holds " + std::to_string(entries[size_t(index)].nbytes) +
                    " bytes, its type needs " + std::to_string(bytes));
      return Tensor::view(dtype, dims, base + entries[size_t(index)].offset);
    };
    std::string_view text = section(SectionKind::graph);
    std::shared_ptr<Graph> g;
    try {
      g = parse_graph(std::string(text), po);
      infer_shapes(*g);
      verify(*g);
    } catch (const Error& e) {
      fail("graph: ", e.what());
    }
    auto same = [&](const std::vector<Value*>& vs, const std::vector<Signature>& sig, const char* what) {
      bool ok = vs.size() == sig.size();
      for (size_t i = 0; ok && i < vs.size(); ++i) ok = vs[i]->name() == sig[i].name && vs[i]->type().str() == sig[i].type;
      if (!ok) fail("the graph's ", what, " differ from the manifest's");
    };
    same(g->inputs(), m.inputs, "inputs");
    same(g->outputs(), m.outputs, "outputs");
    // The constants view the mapping: whoever holds the graph holds the mapping.
    struct Holder {
      std::shared_ptr<Graph> g;
      std::shared_ptr<Bytes> b;
    };
    auto holder = std::make_shared<Holder>(Holder{g, b_});
    return std::shared_ptr<Graph>(holder, g.get());
  }

  // ---- the weight recipes: the originals view the weights section; checked against the graph.
  std::shared_ptr<const WeightRecipes> recipes(const Graph& g) const {
    std::string_view text = section(SectionKind::weight_recipes);
    if (text.size() > kMaxManifestBytes) fail("weight recipes too large");
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("weight recipes are not a JSON object");
    auto r = std::make_shared<WeightRecipes>();
    for (const json& o : arr(j, "originals")) {
      if (!o.is_object()) fail("weight recipes: an original is not an object");
      std::string name = str(o, "name");
      std::optional<DType> dt = dtype_from_name(str(o, "dtype"));
      if (!dt || *dt == DType::str) fail("weight recipes: '", name, "' has an unknown dtype");  // (no string bytes)
      std::vector<int64_t> dims;
      uint64_t bytes = dtype_size(*dt);
      for (const json& d : arr(o, "dims")) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0 || __builtin_mul_overflow(bytes, d.get<uint64_t>(), &bytes))
          fail("weight recipes: '", name, "' has a bad shape");
        dims.push_back(d.get<int64_t>());
      }
      int64_t w = num(o, "weight");
      if (w < 0 || uint64_t(w) >= weights_index_.size() || weights_index_[size_t(w)].nbytes != bytes)
        fail("weight recipes: '", name, "' names no weight of its size");
      r->originals.emplace_back(name, Tensor::view(*dt, dims, const_cast<uint8_t*>(weights_base_) +
                                                                   weights_index_[size_t(w)].offset));
    }
    for (const json& f : arr(j, "folds")) {
      if (!f.is_object()) fail("weight recipes: a fold is not an object");
      if (str(f, "kind") != "batch_norm") fail("weight recipes: unknown fold kind '", str(f, "kind"), "'");
      FoldRecipe fr{str(f, "out_w"), str(f, "out_b"), str(f, "w"),  str(f, "b"),
                    str(f, "scale"), str(f, "bias"),  str(f, "mean"), str(f, "var")};
      const json& eps = field(f, "eps", json::value_t::number_float, "a number");
      fr.eps = eps.get<double>();
      fr.by_column = field(f, "by_column", json::value_t::boolean, "a boolean").get<bool>();
      r->folds.push_back(std::move(fr));
    }
    try {
      check_recipes(g, *r);
    } catch (const Error& e) {
      fail(e.what());
    }
    return r;
  }

  std::shared_ptr<Bytes> b_;
  std::string what_;
  const LoadOptions& opts_;
  std::vector<SectionEntry> table_;
  const uint8_t* weights_base_ = nullptr;
  std::vector<WeightsIndexEntry> weights_index_;
  uint32_t format_version_ = kFormatVersion;  // the header's (checked first)
};

}  // namespace

Loaded load_file(const std::string& path, const LoadOptions& opts) {
  RegularFile f = RegularFile::open(path, "artifact");
  std::string what = "artifact '" + path + "'";
  if (f.size() > kMaxFileBytes) throw Error(what + ": too large");
  auto b = std::make_shared<Bytes>();
  if (f.size() > 0) {
    void* p = ::mmap(nullptr, f.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd(), 0);
    if (p == MAP_FAILED) throw Error(what + ": cannot be mapped");
    b->data = static_cast<uint8_t*>(p);
    b->size = f.size();
    b->mapped = true;
  }
  return Reader(b, what, opts).load();
}

Loaded load_memory(const void* data, size_t size, const LoadOptions& opts) {
  std::string what = "artifact in memory";
  if (!data && size) throw Error(what + ": null buffer");
  if (size > kMaxFileBytes) throw Error(what + ": too large");
  auto b = std::make_shared<Bytes>();
  b->data = static_cast<uint8_t*>(std::aligned_alloc(kAlign, (size + kAlign - 1) / kAlign * kAlign + kAlign));
  if (!b->data) throw Error(what + ": out of memory");
  b->size = size;
  if (size) std::memcpy(b->data, data, size);
  return Reader(b, what, opts).load();
}

std::vector<DimBound> dim_bounds(const Manifest& m, const Graph& g) {
  std::vector<DimBound> out;
  for (const DimRange& r : m.dim_ranges)
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Shape& sh = g.inputs()[i]->shape();
      if (!sh.rank_known()) continue;
      for (size_t a = 0; a < sh.rank(); ++a)
        if (sh.dims()[a].is_symbol() && sh.dims()[a].symbol_name() == r.symbol) out.push_back({i, a, r});
    }
  return out;
}

void check_dim_ranges(const std::vector<DimBound>& bounds, const Graph& g,
                      const std::vector<std::vector<int64_t>>& input_shapes) {
  for (const DimBound& b : bounds) {
    if (b.input >= input_shapes.size() || b.axis >= input_shapes[b.input].size()) continue;  // (the run says)
    int64_t n = input_shapes[b.input][b.axis];
    if ((b.range.lo >= 0 && n < b.range.lo) || (b.range.hi >= 0 && n > b.range.hi))
      throw InputError("input '" + g.inputs()[b.input]->name() + "': dim " + std::to_string(b.axis) + " (" +
                       b.range.symbol + ") is " + std::to_string(n) + ", outside the range [" +
                       (b.range.lo >= 0 ? std::to_string(b.range.lo) : "") + ".." +
                       (b.range.hi >= 0 ? std::to_string(b.range.hi) : "") + "] it was compiled for");
  }
}

bool looks_like_artifact(const void* data, size_t size) {
  return size >= sizeof kMagic && std::memcmp(data, kMagic, sizeof kMagic) == 0;
}

std::string describe(const Loaded& a) {
  std::ostringstream os;
  os << "Cuvil artifact, format version " << a.manifest.format_version << "\n";
  os << "sections:\n";
  for (const SectionInfo& s : a.sections)
    os << "  " << s.name << ": offset " << s.offset << ", " << s.size << " bytes, checksum " << std::hex << s.checksum
       << std::dec << "\n";
  std::vector<std::string> host = host_cpu_features();
  std::vector<std::string> missing = missing_cpu_features(a.manifest.required_cpu_features, host);
  os << "runs on this host: " << (missing.empty() ? "yes" : "no") << "\n";
  bool code = std::any_of(a.sections.begin(), a.sections.end(), [](const SectionInfo& s) { return s.name == "kernels"; });
  os << "generated kernels: "
     << (code ? "machine code in the artifact" : "no machine code (the process's compiler, else op by op)") << "\n";
  bool packed = std::any_of(a.sections.begin(), a.sections.end(), [](const SectionInfo& s) { return s.name == "prepacked"; });
  os << "prepacked weights: " << (!packed ? "none (packed at load)" : "in the artifact") << "\n";
  if (!a.prepacked_unused.empty()) os << "  (" << a.prepacked_unused << ")\n";
  bool panels = std::any_of(a.sections.begin(), a.sections.end(), [](const SectionInfo& s) { return s.name == "gemm_panels"; });
  os << "GEMM panels: " << (!panels ? "none (packed at load)" : "in the artifact") << "\n";
  if (!a.gemm_panels_unused.empty()) os << "  (" << a.gemm_panels_unused << ")\n";
  os << "manifest:\n" << a.manifest.json << "\n";
  return os.str();
}

}  // namespace cuvil::artifact
