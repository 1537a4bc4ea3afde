#include "kernels/onednn/prepacked.h"

#include <dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "support/error.h"

namespace cuvil::onednn {

namespace {

struct Provided {
  PackedImage image;
  std::weak_ptr<const void> owner;
};

struct Registry {
  std::mutex mu;
  std::unordered_multimap<const void*, Provided> by_source;
  PackRecorder* recorder = nullptr;
  size_t sweep_at = 256;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: kernels may pack during static destruction
  return *r;
}

std::atomic<int64_t> g_counts[5];

}  // namespace

size_t packed_desc_bytes() { return sizeof(dnnl_memory_desc_t); }

std::string packed_layout_tag() {
  const dnnl_version_t* v = dnnl_version();
  return "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " " + std::string(v->hash ? v->hash : "") + " md" + std::to_string(packed_desc_bytes());
}

PackRecorder::PackRecorder() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  CUVIL_CHECK(!r.recorder, "only one PackRecorder at a time");
  r.recorder = this;
}

PackRecorder::~PackRecorder() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.recorder = nullptr;
}

std::vector<PackedImage> PackRecorder::images() const {
  std::lock_guard<std::mutex> lock(mu_);
  return images_;
}

void PackRecorder::add(PackedImage image, std::shared_ptr<const void> keep) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const PackedImage& o : images_)
    if (o.source == image.source && o.scale == image.scale && o.from == image.from && o.to == image.to) return;
  images_.push_back(std::move(image));
  keep_.push_back(std::move(keep));
}

void provide_packed(const std::vector<PackedImage>& images, const std::shared_ptr<const void>& owner) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.by_source.size() >= r.sweep_at) {
    std::erase_if(r.by_source, [](const auto& e) { return e.second.owner.expired(); });
    r.sweep_at = 2 * r.by_source.size() + 256;
  }
  for (const PackedImage& im : images) r.by_source.emplace(im.source, Provided{im, owner});
}

bool find_provided(const void* source, float scale, const std::string& from, const std::string& to, size_t nbytes,
                   ProvidedPack* out, bool* other_layout) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto [lo, hi] = r.by_source.equal_range(source);
  if (other_layout) *other_layout = false;
  for (auto it = lo; it != hi; ++it) {
    const PackedImage& im = it->second.image;
    bool same = im.scale == scale && im.nbytes == nbytes && im.from == from && im.to == to;
    auto owner = it->second.owner.lock();
    if (!owner) continue;  // (its artifact is gone: the address may hold another constant now)
    if (!same) {
      // (the same family only: a GEMM's panels and a primitive's layout of one constant are not rivals)
      if (other_layout && im.to.size() == to.size()) *other_layout = true;
      continue;
    }
    out->data = im.data;
    out->owner = std::move(owner);
    return true;
  }
  return false;
}

void note_packed(const PackedImage& image, const std::shared_ptr<const void>& keep) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.recorder) r.recorder->add(image, keep);
}

void count_packed(PackedHow how) { g_counts[int(how)].fetch_add(1, std::memory_order_relaxed); }

PackCounts pack_counts() {
  return {g_counts[0].load(), g_counts[1].load(), g_counts[2].load(), g_counts[3].load(), g_counts[4].load()};
}

}  // namespace cuvil::onednn
