// The .cuv artifact: exact round trips (graph text, weights, outputs bit for bit), and a loader that refuses every
// damaged, foreign or wrong-version file with a clear error, and a file whose CPU features the host lacks.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/cpu_features.h"
#include "artifact/format.h"
#include "artifact/kernel_library.h"
#include "artifact/prepacked.h"
#include "frontend/onnx/onnx_importer.h"
#include "passes/pipeline.h"
#include "test_util.h"

namespace cuvil {
namespace {

namespace fs = std::filesystem;
using artifact::Loaded;

// Constants of several dtypes and sizes (NaN payloads, f16, a large one, a shared one), a region, locations.
const char* kModel = R"(graph @main(%x: f32[n, 20], %c: bool[]) {
  %w: f32[20, 20] = constant 0x%W%
  %b: f32[20] = constant 0x%B%
  %nanv: f32[2] = constant 0x0000c07f0100c0ff
  %h: f16[3] = constant [1.5, -2, 0.25]
  %y: f32[n, 20] = MatMul(%x, %w) loc("mm")
  %z: f32[n, 20] = Add(%y, %b) loc("model.py":12)
  %r: f32[n, 20] = If(%c) {else_branch = graph @e() {
    %q: f32[n, 20] = Relu(%z)
    return %q
  }, then_branch = graph @t() {
    %q2: f32[n, 20] = Neg(%z)
    return %q2
  }}
  return %r, %nanv, %h
}
)";

std::string hex_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    float f = u(rng);
    uint8_t b[4];
    std::memcpy(b, &f, 4);
    for (uint8_t x : b) {
      std::snprintf(buf, sizeof buf, "%02x", x);
      s += buf;
    }
  }
  return s;
}

std::shared_ptr<Graph> model() {
  std::string text = kModel;
  text.replace(text.find("%W%"), 3, hex_floats(400, 1));
  text.replace(text.find("%B%"), 3, hex_floats(20, 2));
  return test::parse_checked(text);
}

std::string bytes_of(const std::shared_ptr<Graph>& g) {
  artifact::SaveInput in;
  in.graph = g;
  in.config_json = R"({"opt_level": 1})";
  in.dim_ranges = {{"n", 1, 64}};
  return artifact::serialize(in);
}

Loaded load(const std::string& b, const artifact::LoadOptions& o = {}) { return artifact::load_memory(b.data(), b.size(), o); }

// Rewrites the header's checksum after a test edits a header field (so the edit, not the checksum, is refused).
void reseal_header(std::string& b) {
  artifact::Header h;
  std::memcpy(&h, b.data(), sizeof h);
  h.header_checksum = artifact::checksum64(&h, offsetof(artifact::Header, header_checksum));
  std::memcpy(b.data(), &h, sizeof h);
}

TEST(Artifact, ChecksumSeesEveryBitAndLength) {
  std::string s(1000, 'a');
  uint64_t h = artifact::checksum64(s.data(), s.size());
  EXPECT_EQ(h, artifact::checksum64(s.data(), s.size()));
  for (size_t i : {0, 7, 31, 32, 500, 999}) {
    std::string t = s;
    t[i] ^= 1;
    EXPECT_NE(h, artifact::checksum64(t.data(), t.size())) << i;
  }
  EXPECT_NE(h, artifact::checksum64(s.data(), s.size() - 1));
}

TEST(Artifact, RoundTripIsExact) {
  auto g = model();
  std::string b = bytes_of(g);
  Loaded a = load(b);
  EXPECT_EQ(print_graph(*a.graph), print_graph(*g));
  EXPECT_EQ(a.manifest.format_version, artifact::kFormatVersion);
  EXPECT_FALSE(a.manifest.cuvil_version.empty());
  EXPECT_FALSE(a.manifest.git_revision.empty());
  EXPECT_FALSE(a.manifest.onednn_version.empty());
  ASSERT_EQ(a.manifest.inputs.size(), 2u);
  EXPECT_EQ(a.manifest.inputs[0].name, "x");
  EXPECT_EQ(a.manifest.inputs[0].type, "f32[n, 20]");
  ASSERT_EQ(a.manifest.dim_ranges.size(), 1u);
  EXPECT_EQ(a.manifest.dim_ranges[0].hi, 64);
  EXPECT_EQ(a.manifest.config_json, R"({"opt_level":1})");
  EXPECT_NE(a.source_map_json.find("model.py:12"), std::string::npos);
  // Large constants are views of the file's weights section, 64-byte aligned.
  for (Value* c : a.graph->constants())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c->constant().raw()) % 64, 0u) << c->name();
  // The same bits out, for the same inputs.
  Executor e1(g), e2(a.graph);
  Tensor x = Tensor::zeros(DType::f32, {3, 20});
  for (int i = 0; i < 60; ++i) x.data<float>()[i] = float(i % 7) - 3.5f;
  for (bool c : {true, false}) {
    auto r1 = e1.run({x, Tensor::scalar<bool>(c)}), r2 = e2.run({x, Tensor::scalar<bool>(c)});
    for (size_t k = 0; k < r1.size(); ++k) EXPECT_TRUE(r1[k].same_bytes(r2[k])) << k;
  }
  // Serializing the loaded graph gives the same file.
  EXPECT_EQ(bytes_of(a.graph), b);
}

TEST(Artifact, SavesAtomicallyAndLoadsFromAFile) {
  fs::path p = fs::path(testing::TempDir()) / "artifact_test.cuv";
  auto g = model();
  artifact::SaveInput in;
  in.graph = g;
  artifact::save(p.string(), in);
  Loaded a = artifact::load_file(p.string());
  EXPECT_EQ(print_graph(*a.graph), print_graph(*g));
  std::string d = artifact::describe(a);
  EXPECT_NE(d.find("runs on this host: yes"), std::string::npos) << d;
  EXPECT_NE(d.find("weights: offset"), std::string::npos) << d;
  // The graph keeps the mapping alive after the rest of the load result is gone.
  std::shared_ptr<Graph> kept = a.graph;
  a = Loaded{};
  EXPECT_EQ(print_graph(*kept), print_graph(*g));
  fs::remove(p);
}

TEST(Artifact, RefusesForeignTruncatedAndCorruptFiles) {
  std::string b = bytes_of(model());
  EXPECT_CUVIL_ERROR(load(""), "not a Cuvil artifact");
  EXPECT_CUVIL_ERROR(load("\x08\x07\x12\x04onnx model bytes......................................................."),
                     "not a Cuvil artifact");
  // Every truncation is refused (never a read past the end).
  for (size_t n = 0; n < b.size(); n += (n < 4096 ? 1 : 997)) {
    std::string t = b.substr(0, n);
    EXPECT_THROW(load(t), Error) << n;
  }
  EXPECT_CUVIL_ERROR(load(b.substr(0, b.size() - 64)), "truncated");
  EXPECT_CUVIL_ERROR(load(b + std::string(64, '\0')), "extra bytes");
  // A flipped bit anywhere is refused: header, table, and each section (by its checksum).
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string t = b;
    size_t at = i < 200 ? size_t(i) : rng() % b.size();
    t[at] ^= char(1 << (rng() % 8));
    EXPECT_THROW(load(t), Error) << at;
  }
}

TEST(Artifact, RefusesOtherFormatVersions) {
  for (uint32_t v : {0u, artifact::kFormatVersion + 1}) {
    std::string b = bytes_of(model());
    artifact::Header h;
    std::memcpy(&h, b.data(), sizeof h);
    h.format_version = v;
    std::memcpy(b.data(), &h, sizeof h);
    reseal_header(b);
    EXPECT_CUVIL_ERROR(load(b), "artifact format version " + std::to_string(v) + "; this Cuvil");
  }
}

TEST(Artifact, ChecksHeaderFieldsBehindTheChecksums) {
  // With checksums off (as the fuzzer runs), out-of-range fields are still refused by their own checks.
  std::string b = bytes_of(model());
  artifact::LoadOptions o;
  o.verify_checksums = false;
  auto edit = [&](auto f) {
    std::string t = b;
    artifact::SectionEntry e;
    std::memcpy(&e, t.data() + sizeof(artifact::Header), sizeof e);
    f(e);
    std::memcpy(t.data() + sizeof(artifact::Header), &e, sizeof e);
    return t;
  };
  EXPECT_CUVIL_ERROR(load(edit([](auto& e) { e.offset = ~uint64_t(0) - 63; }), o), "outside the file");
  EXPECT_CUVIL_ERROR(load(edit([](auto& e) { e.size = ~uint64_t(0); }), o), "outside the file");
  EXPECT_CUVIL_ERROR(load(edit([](auto& e) { e.offset += 1; }), o), "outside the file");
  EXPECT_CUVIL_ERROR(load(edit([](auto& e) { e.kind = 99; }), o), "unknown section kind");
  EXPECT_CUVIL_ERROR(load(edit([](auto& e) { e.kind = 2; }), o), "two graph sections");
}

TEST(Artifact, RefusesAHostWithoutTheRequiredCpuFeatures) {
  std::string b = bytes_of(model());
  artifact::LoadOptions o;
  o.host_features = std::vector<std::string>{};
  EXPECT_CUVIL_ERROR(load(b, o), "needs CPU features this host lacks: sse2");
  EXPECT_EQ(artifact::missing_cpu_features({"avx2", "avx512f", "sse2"}, {"sse2", "avx2"}),
            (std::vector<std::string>{"avx512f"}));
  // This host has at least the baseline.
  EXPECT_TRUE(artifact::missing_cpu_features(artifact::baseline_cpu_features(), artifact::host_cpu_features()).empty());
}

TEST(Artifact, KernelFeaturesAndIndexAreChecked) {
  EXPECT_EQ(artifact::required_features("znver4 +avx2,+avx512f,-sse4a,+xsave,+fma"),
            (std::vector<std::string>{"avx2", "avx512f", "fma", "sse2"}));
  // A malformed index or a non-ELF object is an error before anything is loaded.
  for (std::string index : {"cuvil_aot_1 5\nabc\n", "nosymbol 3\nabc\n", "cuvil_aot_1 x\nabc\n", "cuvil_aot_1"})
    EXPECT_THROW(artifact::open_kernel_library("\x7f" "ELF....", index), Error) << index;
  EXPECT_CUVIL_ERROR(artifact::open_kernel_library("MZ......", ""), "not a shared object");
}

// Every ONNX node-suite model with static float inputs: optimized at -O1, saved and loaded, prints the same;
// a sample of them runs to the same bits.
TEST(Artifact, OnnxNodeSuiteRoundTrips) {
  const char* env = std::getenv("CUVIL_ONNX_NODE_TESTS");
  fs::path root = env ? fs::path(env) : fs::path(CUVIL_BINARY_DIR) / "onnx-node-tests" / "node";
  if (!fs::exists(root)) GTEST_SKIP() << "no ONNX node suite at " << root;
  std::vector<fs::path> dirs;
  for (auto& d : fs::directory_iterator(root)) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  int printed = 0, ran = 0;
  std::mt19937 rng(3);
  for (const fs::path& d : dirs) {
    std::shared_ptr<Graph> g;
    try {
      g = import_onnx_file((d / "model.onnx").string());
      optimize(*g, 1);
    } catch (const Error&) {
      continue;  // not supported: the conformance run reports those
    }
    std::string b = bytes_of(g);
    Loaded a = load(b);
    ASSERT_EQ(print_graph(*a.graph), print_graph(*g)) << d;
    ++printed;
    bool runnable = ran < 80 && printed % 5 == 0;
    for (Value* v : g->inputs()) runnable &= v->dtype() == DType::f32 && v->shape().is_static();
    if (!runnable) continue;
    std::vector<Tensor> ins;
    for (Value* v : g->inputs()) {
      Tensor t = Tensor::zeros(DType::f32, v->shape().static_dims());
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(int(rng() % 2001) - 1000) / 250.0f;
      ins.push_back(t);
    }
    std::vector<Tensor> r1, r2;
    try {
      r1 = Executor(g).run(ins);
    } catch (const Error&) {
      continue;  // (random data a model does not accept)
    }
    r2 = Executor(a.graph).run(ins);
    ASSERT_EQ(r1.size(), r2.size());
    for (size_t k = 0; k < r1.size(); ++k) EXPECT_TRUE(r1[k].same_bytes(r2[k])) << d << " output " << k;
    // With the weights prepacked (artifact/prepacked.h; the suite's weights are mostly inputs): the same bits.
    artifact::SaveInput in;
    in.graph = g;
    artifact::add_prepacked_weights(in);
    std::string pb = artifact::serialize(in);
    Loaded pa = load(pb);
    std::vector<Tensor> r3 = Executor(pa.graph).run(ins);
    for (size_t k = 0; k < r1.size(); ++k) EXPECT_TRUE(r1[k].same_bytes(r3[k])) << d << " prepacked, output " << k;
    ++ran;
  }
  EXPECT_GT(printed, 500);
  EXPECT_GT(ran, 20);
}

}  // namespace
}  // namespace cuvil
