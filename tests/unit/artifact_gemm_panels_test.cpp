// The artifact's gemm_panels section (artifact/prepacked.h): the CPU GEMM's packed B panels saved at compile time
// are used where they lie at load (nothing packed), with the same output bits as packing; panels under another
// layout tag are not used (the load says why) and the products pack as before, same bits; every damaged field is a
// clear error; format version 1 files still load, and a version 1 file cannot hold the section.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/format.h"
#include "artifact/prepacked.h"
#include "kernels/cpu/gemm.h"
#include "kernels/onednn/prepacked.h"
#include "passes/pipeline.h"
#include "artifact_test_util.h"
#include "test_util.h"

namespace cuvil {
namespace {

using namespace test::artifact_files;

// x [19, 70] -> MatMul [70, 100] + bias -> Relu -> Gemm (transB, alpha 0.5) [37, 100]: two CPU GEMM products, one
// reading B [k, n], the other [n, k] times alpha; odd sizes (a narrow last panel).
std::shared_ptr<Graph> mlp() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({19, 70})});
  Value* w1 = g->add_constant("w1", random_tensor({70, 100}, 1));
  Value* b1 = g->add_constant("b1", random_tensor({100}, 2));
  Value* y = g->add_node(OpKind::MatMul, {x, w1}, {"mm"})->output(0);
  y = g->add_node(OpKind::Add, {y, b1}, {"add"})->output(0);
  y = g->add_node(OpKind::Relu, {y}, {"relu"})->output(0);
  Value* w2 = g->add_constant("w2", random_tensor({37, 100}, 3));
  y = g->add_node(OpKind::Gemm, {y, w2}, {"gemm"},
                  {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.5f)}})
          ->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  optimize(*g, 1);
  return g;
}

std::vector<Tensor> run(const std::shared_ptr<const Graph>& g) {
  Executor e(g);
  return e.run({random_tensor({19, 70}, 7)});
}

// The same file as format version 1 wrote it (header and manifest say 1).
std::string as_version_1(std::string b) {
  artifact::SectionEntry* m = entry(b, artifact::SectionKind::manifest);
  std::string_view text(b.data() + m->offset, m->size);
  size_t at = text.find("\"format_version\": 2");
  EXPECT_NE(at, std::string::npos);
  b[m->offset + at + std::strlen("\"format_version\": ")] = '1';
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  h.format_version = 1;
  std::memcpy(b.data(), &h, sizeof h);
  reseal(b, artifact::SectionKind::manifest);
  return b;
}

void expect_error(const std::string& c, const std::string& says) {
  try {
    load(c);
    ADD_FAILURE() << "loaded; expected: " << says;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ArtifactGemmPanels, LoadUsesThePanelsAndGivesTheSameBits) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512: the CPU GEMM does not run here";
  auto g = mlp();
  std::vector<Tensor> want = run(g);
  std::string b = saved(g, true);
  ASSERT_TRUE(entry(b, artifact::SectionKind::gemm_panels));
  auto a = load(b);
  EXPECT_EQ(a.gemm_panels, 2u);
  EXPECT_TRUE(a.gemm_panels_unused.empty()) << a.gemm_panels_unused;
  onednn::PackCounts before = onednn::pack_counts();
  expect_same(run(a.graph), want);
  onednn::PackCounts after = onednn::pack_counts();
  EXPECT_EQ(after.gemm_provided - before.gemm_provided, 2);
  EXPECT_EQ(after.gemm_packed, before.gemm_packed) << "a product packed its panels at load";
  // Without the section: the same bits, packed at prepare.
  auto plain = load(saved(g, false));
  EXPECT_EQ(plain.gemm_panels, 0u);
  before = onednn::pack_counts();
  expect_same(run(plain.graph), want);
  EXPECT_EQ(onednn::pack_counts().gemm_packed - before.gemm_packed, 2);
  EXPECT_EQ(onednn::pack_counts().gemm_provided, before.gemm_provided);
  // Saving a loaded artifact again keeps its panels (the products found them provided).
  std::string again = saved(a.graph, true);
  ASSERT_TRUE(entry(again, artifact::SectionKind::gemm_panels));
  EXPECT_EQ(entry(again, artifact::SectionKind::gemm_panels)->size, entry(b, artifact::SectionKind::gemm_panels)->size);
  // The describing text names the section.
  EXPECT_NE(artifact::describe(a).find("GEMM panels: in the artifact"), std::string::npos);
}

TEST(ArtifactGemmPanels, AnotherLayoutTagPacksAtLoad) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512: the CPU GEMM does not run here";
  auto g = mlp();
  std::vector<Tensor> want = run(g);
  std::string c = saved(g, true);
  artifact::SectionEntry* e = entry(c, artifact::SectionKind::gemm_panels);
  ASSERT_TRUE(e);
  auto* h = reinterpret_cast<artifact::GemmPanelsHead*>(c.data() + e->offset);
  std::memset(h->layout_tag, 0, sizeof h->layout_tag);
  std::strcpy(h->layout_tag, "cuvil-gemm panels32 f32 avx2 r9");
  reseal(c, artifact::SectionKind::gemm_panels);
  auto a = load(c);
  EXPECT_EQ(a.gemm_panels, 0u);
  EXPECT_NE(a.gemm_panels_unused.find("panels32"), std::string::npos) << a.gemm_panels_unused;
  EXPECT_NE(artifact::describe(a).find("panels32"), std::string::npos);
  onednn::PackCounts before = onednn::pack_counts();
  expect_same(run(a.graph), want);
  EXPECT_EQ(onednn::pack_counts().gemm_provided, before.gemm_provided);
  EXPECT_EQ(onednn::pack_counts().gemm_packed - before.gemm_packed, 2);
}

TEST(ArtifactGemmPanels, DamagedSectionsAreClearErrors) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512: no panels are recorded";
  auto g = mlp();
  const std::string b = saved(g, true);
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::gemm_panels);
    ASSERT_TRUE(e);
    c[e->offset + e->size - 1] ^= 1;
    expect_error(c, "section gemm_panels is corrupt (checksum)");
  }
  struct Edit {
    const char* what;
    std::function<void(char* section, uint64_t size)> apply;
    const char* says;
  };
  using Head = artifact::GemmPanelsHead;
  using Entry = artifact::GemmPanelsEntry;
  const uint64_t e0 = sizeof(Head), e1 = e0 + sizeof(Entry);
  auto at = [](char* s, uint64_t off) { return reinterpret_cast<Entry*>(s + off); };
  std::vector<Edit> edits = {
      {"count", [](char* s, uint64_t) { reinterpret_cast<Head*>(s)->count = uint64_t(1) << 60; }, "corrupt count"},
      {"zero count", [](char* s, uint64_t) { reinterpret_cast<Head*>(s)->count = 0; }, "corrupt count"},
      {"reserved", [](char* s, uint64_t) { reinterpret_cast<Head*>(s)->reserved = 1; }, "corrupt head"},
      {"tag", [](char* s, uint64_t) { std::memset(reinterpret_cast<Head*>(s)->layout_tag, 'x', 64); }, "corrupt head"},
      {"weight", [&](char* s, uint64_t) { at(s, e0)->weight = 999; }, "names weight 999"},
      {"k", [&](char* s, uint64_t) { at(s, e0)->k += 1; }, "does not match weight"},
      {"n", [&](char* s, uint64_t) { at(s, e1)->n = 3; }, "does not match weight"},
      {"negative k", [&](char* s, uint64_t) { at(s, e0)->k = -70; }, "does not match weight"},
      {"huge dims", [&](char* s, uint64_t) { at(s, e0)->k = at(s, e0)->n = int64_t(1) << 40; }, "does not match weight"},
      {"k and n swapped", [&](char* s, uint64_t) { std::swap(at(s, e0)->k, at(s, e0)->n); }, "wrong panel size"},
      {"size", [&](char* s, uint64_t) { at(s, e0)->nbytes += 64; }, "wrong panel size"},
      {"offset", [&](char* s, uint64_t) { at(s, e0)->offset += 4; }, "outside the section"},
      {"offset in the index", [&](char* s, uint64_t) { at(s, e1)->offset = 64; }, "outside the section"},
      {"offset past the end", [&](char* s, uint64_t size) { at(s, e1)->offset = size; }, "outside the section"},
      {"offset overflow", [&](char* s, uint64_t) { at(s, e1)->offset = ~uint64_t(63); }, "outside the section"},
      {"trans_b", [&](char* s, uint64_t) { at(s, e0)->trans_b = 2; }, "is corrupt"},
      {"alpha", [&](char* s, uint64_t) { at(s, e1)->alpha = NAN; }, "is corrupt"},
  };
  for (const Edit& ed : edits) {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::gemm_panels);
    ed.apply(c.data() + e->offset, e->size);
    reseal(c, artifact::SectionKind::gemm_panels);
    SCOPED_TRACE(ed.what);
    expect_error(c, ed.says);
  }
  // Every truncation of the section alone (the file resealed at each length) is refused or loads, never crashes.
  std::string why;
  EXPECT_THROW(artifact::read_gemm_panels(std::string_view("abc", 3), nullptr, {}, &why), Error);
  {
    std::string c = b;
    artifact::SectionEntry* e = entry(c, artifact::SectionKind::gemm_panels);
    std::string_view s(c.data() + e->offset, e->size);
    std::vector<artifact::WeightsIndexEntry> index(3, artifact::WeightsIndexEntry{0, 70 * 100 * 4});
    for (size_t len = 0; len < s.size(); len += len < 400 ? 1 : 997) {
      try {
        artifact::read_gemm_panels(s.substr(0, len), nullptr, index, &why);
      } catch (const Error&) {
      }
    }
  }
}

TEST(ArtifactGemmPanels, VersionOneFilesLoadButCannotHoldTheSection) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512: no panels are recorded";
  auto g = mlp();
  std::vector<Tensor> want = run(g);
  // Without the section, a version 1 file loads and runs to the same bits.
  auto a = load(as_version_1(saved(g, false)));
  EXPECT_EQ(a.manifest.format_version, 1u);
  expect_same(run(a.graph), want);
  // With it, the file is refused (version 1 had no such section).
  expect_error(as_version_1(saved(g, true)), "gemm_panels in a format version 1 file");
}

}  // namespace
}  // namespace cuvil
