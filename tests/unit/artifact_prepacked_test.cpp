// The artifact's prepacked section (artifact/prepacked.h): weights saved in the layouts the kernels packed them
// into are used where they lie at load (no reorder), with the same output bits; a host that wants another layout
// (here: a descriptor changed), or another oneDNN (the layout tag), packs from the weights section instead, with
// the same bits too; a damaged section is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/format.h"
#include "artifact/prepacked.h"
#include "kernels/onednn/prepacked.h"
#include "passes/pipeline.h"
#include "artifact_test_util.h"
#include "test_util.h"

namespace cuvil {
namespace {

using namespace test::artifact_files;

// x -> Conv 3x3 (Winograd's shape) -> Relu -> Conv 1x1 -> Conv 3x3 stride 2, optimized (fused, channels-last...).
std::shared_ptr<Graph> convnet() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 16, 14, 14})});
  auto conv = [&](Value* in, int64_t cin, int64_t cout, int64_t k, int64_t stride, uint32_t seed) {
    Value* w = g->add_constant("w" + std::to_string(seed), random_tensor({cout, cin, k, k}, seed));
    Value* b = g->add_constant("b" + std::to_string(seed), random_tensor({cout}, seed + 100));
    int64_t p = k / 2;
    return g->add_node(OpKind::Conv, {in, w, b}, {"conv" + std::to_string(seed)},
                       {{"pads", Attribute(std::vector<int64_t>{p, p, p, p})},
                        {"strides", Attribute(std::vector<int64_t>{stride, stride})}})
        ->output(0);
  };
  Value* y = conv(x, 16, 32, 3, 1, 1);
  y = g->add_node(OpKind::Relu, {y}, {"relu"})->output(0);
  y = conv(y, 32, 48, 1, 1, 2);
  y = conv(y, 48, 24, 3, 2, 3);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  optimize(*g, 1);
  return g;
}

std::vector<Tensor> run(const std::shared_ptr<const Graph>& g) {
  Executor e(g);
  return e.run({random_tensor({1, 16, 14, 14}, 7)});
}

TEST(ArtifactPrepacked, LoadUsesTheImagesAndGivesTheSameBits) {
  auto g = convnet();
  std::vector<Tensor> want = run(g);
  std::string b = saved(g, true);
  auto a = load(b);
  ASSERT_TRUE(entry(b, artifact::SectionKind::prepacked));
  EXPECT_GE(a.prepacked_images, 3u);  // the three convolutions' weights at least
  EXPECT_TRUE(a.prepacked_unused.empty()) << a.prepacked_unused;
  onednn::PackCounts before = onednn::pack_counts();
  expect_same(run(a.graph), want);
  onednn::PackCounts after = onednn::pack_counts();
  EXPECT_GE(after.provided - before.provided, 3);
  EXPECT_EQ(after.reordered, before.reordered) << "a weight was reordered at load";
  // Without the section: the same bits, by reorders.
  auto plain = load(saved(g, false));
  EXPECT_EQ(plain.prepacked_images, 0u);
  before = onednn::pack_counts();
  expect_same(run(plain.graph), want);
  EXPECT_GT(onednn::pack_counts().reordered, before.reordered);
  // Saving a loaded artifact again keeps its images (the kernels found them provided).
  std::string again = saved(a.graph, true);
  EXPECT_EQ(entry(again, artifact::SectionKind::prepacked)->size, entry(b, artifact::SectionKind::prepacked)->size);
}

TEST(ArtifactPrepacked, AnotherLayoutOrOneDnnPacksAtLoad) {
  auto g = convnet();
  std::vector<Tensor> want = run(g);
  const std::string b = saved(g, true);
  size_t desc = onednn::packed_desc_bytes();
  // Every image's target layout differs from what this host chooses (a byte of each `to` descriptor changed).
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::prepacked);
    artifact::PrepackedHead h;
    std::memcpy(&h, c.data() + e->offset, sizeof h);
    for (uint64_t i = 0; i < h.count; ++i)
      c[e->offset + sizeof h + i * (sizeof(artifact::PrepackedEntry) + 2 * desc) + sizeof(artifact::PrepackedEntry) +
        desc + desc / 2] ^= 0x5a;
    reseal(c, artifact::SectionKind::prepacked);
    auto a = load(c);
    onednn::PackCounts before = onednn::pack_counts();
    expect_same(run(a.graph), want);
    EXPECT_EQ(onednn::pack_counts().provided, before.provided);
    EXPECT_GE(onednn::pack_counts().reordered - before.reordered, 3);
  }
  // Made by another oneDNN: not used, and the load says why.
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::prepacked);
    auto* h = reinterpret_cast<artifact::PrepackedHead*>(c.data() + e->offset);
    std::memset(h->layout_tag, 0, sizeof h->layout_tag);
    std::strcpy(h->layout_tag, "onednn 9.9.9 md1");
    reseal(c, artifact::SectionKind::prepacked);
    auto a = load(c);
    EXPECT_EQ(a.prepacked_images, 0u);
    EXPECT_NE(a.prepacked_unused.find("onednn 9.9.9"), std::string::npos) << a.prepacked_unused;
    onednn::PackCounts before = onednn::pack_counts();
    expect_same(run(a.graph), want);
    EXPECT_EQ(onednn::pack_counts().provided, before.provided);
  }
}

TEST(ArtifactPrepacked, DamagedSectionsAreClearErrors) {
  auto g = convnet();
  const std::string b = saved(g, true);
  auto expect_error = [&](const std::string& c, const std::string& says) {
    try {
      load(c);
      ADD_FAILURE() << "loaded; expected: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  // Truncated inside the section (its head, an entry, an image) or at its end.
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::prepacked);
    for (uint64_t cut : {e->offset, e->offset + 40, e->offset + 200, e->offset + e->size / 2, e->offset + e->size - 1})
      expect_error(b.substr(0, cut), "truncated");
  }
  // A flipped bit in an image: the checksum.
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::prepacked);
    c[e->offset + e->size - 1] ^= 1;
    expect_error(c, "section prepacked is corrupt (checksum)");
  }
  // Edits behind a valid checksum: every field of the head and of an entry.
  struct Edit {
    const char* what;
    std::function<void(char* section, uint64_t size)> apply;
    const char* says;
  };
  uint64_t e0 = sizeof(artifact::PrepackedHead);
  std::vector<Edit> edits = {
      {"count", [](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedHead*>(s)->count = uint64_t(1) << 60; },
       "corrupt count"},
      {"zero count", [](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedHead*>(s)->count = 0; }, "corrupt count"},
      {"descriptor size", [](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedHead*>(s)->desc_bytes = 0; },
       "descriptor size"},
      {"huge descriptor size",
       [](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedHead*>(s)->desc_bytes = 0xffffffffu; },
       "descriptor size"},
      {"tag", [](char* s, uint64_t) { std::memset(reinterpret_cast<artifact::PrepackedHead*>(s)->layout_tag, 'x', 64); },
       "corrupt head"},
      {"weight", [&](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->weight = 999; },
       "names weight 999"},
      {"offset", [&](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->offset += 4; },
       "outside the section"},
      {"offset past the end",
       [&](char* s, uint64_t size) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->offset = size; },
       "outside the section"},
      {"size", [&](char* s, uint64_t size) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->nbytes = size; },
       "outside the section"},
      {"overflow",
       [&](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->nbytes = ~uint64_t(0) - 10; },
       "outside the section"},
      {"scale", [&](char* s, uint64_t) { reinterpret_cast<artifact::PrepackedEntry*>(s + e0)->scale = NAN; },
       "corrupt entry"},
  };
  for (const Edit& ed : edits) {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::prepacked);
    ed.apply(c.data() + e->offset, e->size);
    reseal(c, artifact::SectionKind::prepacked);
    SCOPED_TRACE(ed.what);
    expect_error(c, ed.says);
  }
  // A section shorter than its head.
  std::string why;
  EXPECT_THROW(artifact::read_prepacked(std::string_view("abc", 3), nullptr, {}, &why), Error);
}

}  // namespace
}  // namespace cuvil
