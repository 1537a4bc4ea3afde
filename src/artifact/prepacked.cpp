#include "artifact/prepacked.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "artifact/representative_shapes.h"
#include "kernels/cpu/gemm.h"
#include "support/error.h"

namespace cuvil::artifact {

namespace {

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
constexpr uint64_t kMaxDescBytes = 1 << 16;

}  // namespace

PackedWeights record_packed_weights(const std::shared_ptr<const Graph>& g, const ExecutorOptions& options) {
  static std::mutex one_at_a_time;  // (one PackRecorder at a time)
  std::lock_guard<std::mutex> lock(one_at_a_time);
  auto rec = std::make_shared<onednn::PackRecorder>();
  {
    Executor e(g, options);
    prepare_representative_shapes(e, *g);
  }  // (the executor's kernels go; the recorder keeps what they packed)
  PackedWeights out;
  out.images = rec->images();
  out.keep = rec;
  return out;
}

void add_prepacked_weights(SaveInput& in, const ExecutorOptions& options) {
  // CUVIL_NO_PREPACK=1: neither; =gemm: without the GEMM panels only; =onednn: without oneDNN's images only
  // (comparisons of what each saves at load).
  const char* env = std::getenv("CUVIL_NO_PREPACK");
  std::string off = env ? env : "";
  if (!off.empty() && off != "0" && off != "gemm" && off != "onednn") return;
  PackedWeights pw = record_packed_weights(in.graph, options);
  const std::string gemm_tag = cpu::gemm_layout_tag();
  std::erase_if(pw.images, [&](const onednn::PackedImage& im) {
    return (off == "gemm" && im.to == gemm_tag) || (off == "onednn" && im.to != gemm_tag);
  });
  in.prepacked = std::move(pw.images);
  in.prepacked_keep = std::move(pw.keep);
}

std::string prepacked_section(const std::vector<onednn::PackedImage>& images,
                              const std::function<int64_t(const void*, size_t)>& weight_of) {
  size_t desc = onednn::packed_desc_bytes();
  std::vector<std::pair<const onednn::PackedImage*, int64_t>> kept;
  for (const onednn::PackedImage& im : images) {
    if (im.from.size() != desc || im.to.size() != desc) continue;
    int64_t w = weight_of(im.source, im.source_nbytes);
    if (w >= 0) kept.push_back({&im, w});
  }
  if (kept.empty()) return {};
  uint64_t record = sizeof(PrepackedEntry) + 2 * desc;
  uint64_t at = align_up(sizeof(PrepackedHead) + kept.size() * record);
  std::vector<uint64_t> offsets;
  for (auto& [im, w] : kept) {
    offsets.push_back(at);
    at = align_up(at + im->nbytes);
  }
  std::string out(at, '\0');
  PrepackedHead h;
  std::memset(&h, 0, sizeof h);
  h.count = kept.size();
  h.desc_bytes = uint32_t(desc);
  std::string tag = onednn::packed_layout_tag();
  std::strncpy(h.layout_tag, tag.c_str(), sizeof h.layout_tag - 1);
  std::memcpy(out.data(), &h, sizeof h);
  for (size_t i = 0; i < kept.size(); ++i) {
    const onednn::PackedImage& im = *kept[i].first;
    PrepackedEntry e{uint64_t(kept[i].second), im.scale, 0, offsets[i], im.nbytes};
    char* p = out.data() + sizeof h + i * record;
    std::memcpy(p, &e, sizeof e);
    std::memcpy(p + sizeof e, im.from.data(), desc);
    std::memcpy(p + sizeof e + desc, im.to.data(), desc);
    std::memcpy(out.data() + offsets[i], im.data, im.nbytes);
  }
  return out;
}

std::vector<onednn::PackedImage> read_prepacked(std::string_view s, const uint8_t* weights,
                                                const std::vector<WeightsIndexEntry>& index,
                                                std::string* why_unused) {
  if (s.size() < sizeof(PrepackedHead)) throw Error("prepacked section too short");
  PrepackedHead h;
  std::memcpy(&h, s.data(), sizeof h);
  if (h.reserved != 0 || std::memchr(h.layout_tag, 0, sizeof h.layout_tag) == nullptr)
    throw Error("prepacked section: corrupt head");
  if (h.desc_bytes == 0 || h.desc_bytes > kMaxDescBytes) throw Error("prepacked section: corrupt descriptor size");
  uint64_t record = sizeof(PrepackedEntry) + 2 * uint64_t(h.desc_bytes);
  if (h.count == 0 || h.count > (s.size() - sizeof h) / record) throw Error("prepacked section: corrupt count");
  uint64_t index_end = sizeof h + h.count * record;
  std::vector<onednn::PackedImage> out;
  for (uint64_t i = 0; i < h.count; ++i) {
    const char* p = s.data() + sizeof h + i * record;
    PrepackedEntry e;
    std::memcpy(&e, p, sizeof e);
    uint64_t end = 0;
    if (e.reserved != 0 || !std::isfinite(e.scale)) throw Error("prepacked section: corrupt entry " + std::to_string(i));
    if (e.weight >= index.size())
      throw Error("prepacked section: entry " + std::to_string(i) + " names weight " + std::to_string(e.weight) +
                  " (the artifact has " + std::to_string(index.size()) + ")");
    if (e.nbytes == 0 || e.offset % kAlign != 0 || e.offset < index_end ||
        __builtin_add_overflow(e.offset, e.nbytes, &end) || end > s.size())
      throw Error("prepacked section: image " + std::to_string(i) + " lies outside the section");
    onednn::PackedImage im;
    im.source = weights + index[e.weight].offset;
    im.source_nbytes = index[e.weight].nbytes;
    im.scale = e.scale;
    im.from.assign(p + sizeof e, h.desc_bytes);
    im.to.assign(p + sizeof e + h.desc_bytes, h.desc_bytes);
    im.data = s.data() + e.offset;
    im.nbytes = e.nbytes;
    out.push_back(std::move(im));
  }
  std::string tag = onednn::packed_layout_tag();
  if (h.layout_tag != tag || h.desc_bytes != onednn::packed_desc_bytes()) {
    *why_unused = "prepacked weights made by " + std::string(h.layout_tag) + ", this runtime has " + tag +
                  ": weights are packed at load";
    return {};
  }
  return out;
}

std::string gemm_panels_section(const std::vector<onednn::PackedImage>& images,
                                const std::function<int64_t(const void*, size_t)>& weight_of) {
  const std::string tag = cpu::gemm_layout_tag();
  std::vector<std::pair<const onednn::PackedImage*, GemmPanelsEntry>> kept;
  for (const onednn::PackedImage& im : images) {
    if (im.to != tag) continue;
    GemmPanelsEntry e{};
    char order[8] = {};
    // (`from` is cpu::gemm_source_key's, made in this process)
    if (std::sscanf(im.from.c_str(), "gemm-b k=%" SCNd64 " n=%" SCNd64 " %5s", &e.k, &e.n, order) != 3) continue;
    e.trans_b = std::string(order) == "[n,k]";
    if (im.from != cpu::gemm_source_key(e.k, e.n, e.trans_b) || im.nbytes != cpu::gemm_panels_nbytes(e.k, e.n))
      continue;
    int64_t w = weight_of(im.source, im.source_nbytes);
    if (w < 0) continue;
    e.weight = uint64_t(w);
    e.alpha = im.scale;
    e.nbytes = im.nbytes;
    kept.push_back({&im, e});
  }
  if (kept.empty()) return {};
  uint64_t at = align_up(sizeof(GemmPanelsHead) + kept.size() * sizeof(GemmPanelsEntry));
  for (auto& [im, e] : kept) {
    e.offset = at;
    at = align_up(at + e.nbytes);
  }
  std::string out(at, '\0');
  GemmPanelsHead h;
  std::memset(&h, 0, sizeof h);
  h.count = kept.size();
  std::strncpy(h.layout_tag, tag.c_str(), sizeof h.layout_tag - 1);
  std::memcpy(out.data(), &h, sizeof h);
  for (size_t i = 0; i < kept.size(); ++i) {
    std::memcpy(out.data() + sizeof h + i * sizeof(GemmPanelsEntry), &kept[i].second, sizeof(GemmPanelsEntry));
    std::memcpy(out.data() + kept[i].second.offset, kept[i].first->data, kept[i].second.nbytes);
  }
  return out;
}

std::vector<onednn::PackedImage> read_gemm_panels(std::string_view s, const uint8_t* weights,
                                                  const std::vector<WeightsIndexEntry>& index,
                                                  std::string* why_unused) {
  if (s.size() < sizeof(GemmPanelsHead)) throw Error("gemm_panels section too short");
  GemmPanelsHead h;
  std::memcpy(&h, s.data(), sizeof h);
  if (h.reserved != 0 || std::memchr(h.layout_tag, 0, sizeof h.layout_tag) == nullptr)
    throw Error("gemm_panels section: corrupt head");
  if (h.count == 0 || h.count > (s.size() - sizeof h) / sizeof(GemmPanelsEntry))
    throw Error("gemm_panels section: corrupt count");
  uint64_t index_end = sizeof h + h.count * sizeof(GemmPanelsEntry);
  std::vector<onednn::PackedImage> out;
  for (uint64_t i = 0; i < h.count; ++i) {
    GemmPanelsEntry e;
    std::memcpy(&e, s.data() + sizeof h + i * sizeof e, sizeof e);
    std::string which = "gemm_panels section: entry " + std::to_string(i);
    if (e.trans_b > 1 || !std::isfinite(e.alpha)) throw Error(which + " is corrupt");
    if (e.weight >= index.size())
      throw Error(which + " names weight " + std::to_string(e.weight) + " (the artifact has " +
                  std::to_string(index.size()) + ")");
    uint64_t elems = 0, end = 0;
    size_t expect = cpu::gemm_panels_nbytes(e.k, e.n);
    if (expect == 0 || __builtin_mul_overflow(uint64_t(e.k), uint64_t(e.n), &elems) ||
        elems > index[e.weight].nbytes / sizeof(float) || elems * sizeof(float) != index[e.weight].nbytes)
      throw Error(which + ": B [" + std::to_string(e.k) + ", " + std::to_string(e.n) + "] does not match weight " +
                  std::to_string(e.weight) + " (" + std::to_string(index[e.weight].nbytes) + " bytes)");
    if (e.nbytes != expect) throw Error(which + ": wrong panel size " + std::to_string(e.nbytes));
    if (e.offset % kAlign != 0 || e.offset < index_end || __builtin_add_overflow(e.offset, e.nbytes, &end) ||
        end > s.size())
      throw Error(which + ": its panels lie outside the section");
    onednn::PackedImage im;
    im.source = weights + index[e.weight].offset;
    im.source_nbytes = index[e.weight].nbytes;
    im.scale = e.alpha;
    im.from = cpu::gemm_source_key(e.k, e.n, e.trans_b != 0);
    im.to = h.layout_tag;
    im.data = s.data() + e.offset;
    im.nbytes = e.nbytes;
    out.push_back(std::move(im));
  }
  std::string tag = cpu::gemm_layout_tag();
  if (h.layout_tag != tag) {
    *why_unused = "GEMM panels stored as \"" + std::string(h.layout_tag) + "\", this runtime's are \"" + tag +
                  "\": packed at load";
    return {};
  }
  if (!cpu::gemm_supported()) {
    *why_unused = "GEMM panels stored for avx512f, which this host lacks: its products run on oneDNN";
    return {};
  }
  return out;
}

}  // namespace cuvil::artifact
