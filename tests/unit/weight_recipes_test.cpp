// Weights by their original names on a model whose passes folded them (runtime/weight_recipes.h): the recipes
// found at save (a BatchNormalization folded into a Conv and into a Gemm), kept in the artifact, and updates of
// conv.weight / bn.running_var ... on a loaded artifact and a C API session giving, bit for bit, what a fresh
// compile with those weights gives; bad updates refused all at once; damaged recipes a clear load error.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "artifact/artifact.h"
#include "artifact/checksum.h"
#include "artifact/format.h"
#include "cuvil/cuvil.h"
#include "passes/pipeline.h"
#include "runtime/weight_recipes.h"
#include "runtime/weights.h"
#include "test_util.h"

namespace cuvil {
namespace {

using Weights = std::vector<std::pair<std::string, Tensor>>;

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Weights net_weights(uint32_t seed) {
  return {{"conv.weight", random_tensor({8, 3, 3, 3}, seed)},
          {"conv.bias", random_tensor({8}, seed + 1)},
          {"bn.weight", random_tensor({8}, seed + 2, 0.5f, 1.5f)},
          {"bn.bias", random_tensor({8}, seed + 3)},
          {"bn.running_mean", random_tensor({8}, seed + 4)},
          {"bn.running_var", random_tensor({8}, seed + 5, 0.5f, 2.f)},
          {"fc.weight", random_tensor({5, 8}, seed + 6)},
          {"fc.bias", random_tensor({5}, seed + 7)},
          {"bn2.weight", random_tensor({5}, seed + 8, 0.5f, 1.5f)},
          {"bn2.bias", random_tensor({5}, seed + 9)},
          {"bn2.running_mean", random_tensor({5}, seed + 10)},
          {"bn2.running_var", random_tensor({5}, seed + 11, 0.5f, 2.f)}};
}

// x -> Conv -> BN -> Relu -> GlobalAveragePool -> Flatten -> Gemm(transB) -> BN, before the passes.
std::shared_ptr<Graph> net(const Weights& w) {
  auto g = std::make_shared<Graph>();
  std::map<std::string, Value*> c;
  for (const auto& [name, t] : w) c[name] = g->add_constant(name, t);
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({2, 3, 8, 8})});
  Value* y = g->add_node(OpKind::Conv, {x, c["conv.weight"], c["conv.bias"]}, {"conv"},
                         {{"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}})->output(0);
  y = g->add_node(OpKind::BatchNormalization,
                  {y, c["bn.weight"], c["bn.bias"], c["bn.running_mean"], c["bn.running_var"]}, {"bn"})->output(0);
  y = g->add_node(OpKind::Relu, {y}, {"relu"})->output(0);
  y = g->add_node(OpKind::GlobalAveragePool, {y}, {"pool"})->output(0);
  y = g->add_node(OpKind::Flatten, {y}, {"flat"})->output(0);
  y = g->add_node(OpKind::Gemm, {y, c["fc.weight"], c["fc.bias"]}, {"fc"}, {{"transB", Attribute(int64_t(1))}})
          ->output(0);
  y = g->add_node(OpKind::BatchNormalization,
                  {y, c["bn2.weight"], c["bn2.bias"], c["bn2.running_mean"], c["bn2.running_var"]}, {"bn2"})
          ->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  return g;
}

std::shared_ptr<Graph> compiled(const Weights& w) {
  auto g = net(w);
  optimize(*g, 1);
  return g;
}

// The artifact of set `seed`, with its recipes.
std::string artifact_of(uint32_t seed) {
  auto source = net(net_weights(seed));
  auto g = compiled(net_weights(seed));
  artifact::SaveInput in;
  in.graph = g;
  auto r = std::make_shared<WeightRecipes>(derive_fold_recipes(*source, *g));
  in.recipes = r;
  return artifact::serialize(in);
}

Tensor input() { return random_tensor({2, 3, 8, 8}, 99); }

std::vector<Tensor> run(const std::shared_ptr<const Graph>& g) {
  ExecutorOptions o;
  o.threads = 1;
  return Executor(g, o).run({input()});
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].same_bytes(b[i])) << i;
}

TEST(WeightRecipes, FoundAtSaveAndKeptInTheArtifact) {
  auto source = net(net_weights(1));
  auto g = compiled(net_weights(1));
  WeightRecipes r = derive_fold_recipes(*source, *g);
  ASSERT_EQ(r.folds.size(), 2u) << print_graph(*g);
  EXPECT_EQ(r.folds[0].w, "conv.weight");
  EXPECT_EQ(r.folds[0].var, "bn.running_var");
  EXPECT_FALSE(r.folds[0].by_column);
  EXPECT_EQ(r.folds[1].w, "fc.weight");
  EXPECT_FALSE(r.folds[1].by_column);  // (transB: W's rows are the output channels)
  EXPECT_EQ(r.originals.size(), 12u);
  // The names a caller sees: the originals, not the folded constants.
  std::vector<std::string> names;
  for (const WeightInfo& w : list_weights(*g, r)) names.push_back(w.name);
  for (const auto& [n, t] : net_weights(1)) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const FoldRecipe& f : r.folds) EXPECT_EQ(std::find(names.begin(), names.end(), f.out_w), names.end());

  std::string b = artifact_of(1);
  artifact::Loaded a = artifact::load_memory(b.data(), b.size());
  ASSERT_TRUE(a.recipes);
  EXPECT_EQ(a.recipes->folds.size(), 2u);
  for (const auto& [n, t] : net_weights(1)) {
    const Tensor* held = a.recipes->original(n);
    ASSERT_TRUE(held) << n;
    EXPECT_TRUE(held->same_bytes(t)) << n;
  }
}

TEST(WeightRecipes, UpdatesByOriginalNamesAreAFreshCompile) {
  std::string b = artifact_of(1);
  artifact::Loaded a = artifact::load_memory(b.data(), b.size());
  // All of set 2 (strict), then a subset: set 3's BN statistics over set 2.
  WeightRecipes next;
  auto derived = translate_updates(*a.graph, *a.recipes, net_weights(2), true, &next);
  auto g2 = with_weights(*a.graph, derived, false);
  expect_same(run(g2), run(compiled(net_weights(2))));
  Weights subset, mixed = net_weights(2);
  for (const auto& [n, t] : net_weights(3))
    if (n.rfind("bn", 0) == 0) subset.emplace_back(n, t);
  for (auto& [n, t] : mixed)
    for (const auto& [m, u] : subset)
      if (n == m) t = u;
  WeightRecipes third;
  auto g3 = with_weights(*g2, translate_updates(*g2, next, subset, false, &third), false);
  expect_same(run(g3), run(compiled(mixed)));
  EXPECT_FALSE(run(g3)[0].same_bytes(run(g2)[0]));
}

TEST(WeightRecipes, BadUpdatesAreRefusedAllAtOnce) {
  std::string b = artifact_of(1);
  artifact::Loaded a = artifact::load_memory(b.data(), b.size());
  WeightRecipes next;
  Weights bad = {{"conv.weight", random_tensor({8, 3, 3, 2}, 5)},
                 {a.recipes->folds[0].out_w, random_tensor({8, 3, 3, 3}, 5)},
                 {"nope", random_tensor({1}, 5)},
                 {"bn.bias", random_tensor({8}, 5)},
                 {"bn.bias", random_tensor({8}, 6)}};
  try {
    translate_updates(*a.graph, *a.recipes, bad, false, &next);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'conv.weight' has shape f32[8, 3, 3, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("BatchNormalization folded in: update 'conv.weight'"), std::string::npos) << m;
    EXPECT_NE(m.find("'nope' is not a weight"), std::string::npos) << m;
    EXPECT_NE(m.find("'bn.bias' is given twice"), std::string::npos) << m;
  }
  try {
    translate_updates(*a.graph, *a.recipes, {{"bn.bias", random_tensor({8}, 5)}}, true, &next);
    FAIL() << "strict accepted a subset";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("strict update: missing"), std::string::npos) << e.what();
  }
}

// The C API: a session from the artifact stages and commits by original names.
TEST(WeightRecipes, CApiStagesByOriginalNames) {
  std::string b = artifact_of(1);
  cuvil_session_options o = CUVIL_SESSION_OPTIONS_INIT;
  o.threads = 1;
  cuvil_session* s = cuvil_session_create_from_memory(b.data(), b.size(), &o, nullptr);
  ASSERT_NE(s, nullptr);
  std::vector<std::string> names;
  for (size_t i = 0; i < cuvil_session_weight_count(s); ++i) names.push_back(cuvil_session_weight_name(s, i));
  EXPECT_NE(std::find(names.begin(), names.end(), "bn.running_var"), names.end());
  auto run_c = [&]() {
    Tensor x = input();
    std::vector<float> y(10, -1.f);
    int64_t xd[4] = {2, 3, 8, 8}, yd[2] = {2, 5};
    cuvil_tensor in = CUVIL_TENSOR_INIT, out = CUVIL_TENSOR_INIT;
    in.rank = 4, in.dims = xd, in.data = x.raw(), in.bytes = size_t(x.nbytes());
    out.rank = 2, out.dims = yd, out.data = y.data(), out.bytes = y.size() * sizeof(float);
    EXPECT_EQ(cuvil_session_run(s, &in, 1, &out, 1, nullptr), CUVIL_OK);
    return y;
  };
  auto as_vector = [](const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
  EXPECT_EQ(run_c(), as_vector(run(compiled(net_weights(1)))[0]));
  for (uint32_t seed : {2u, 3u}) {
    Weights w = net_weights(seed);
    std::vector<const char*> ns;
    std::vector<cuvil_tensor> ts;
    std::vector<std::vector<int64_t>> dims;
    for (auto& [n, t] : w) dims.push_back(t.shape());
    for (size_t i = 0; i < w.size(); ++i) {
      cuvil_tensor t = CUVIL_TENSOR_INIT;
      t.rank = dims[i].size(), t.dims = dims[i].data(), t.data = w[i].second.raw(), t.bytes = size_t(w[i].second.nbytes());
      ns.push_back(w[i].first.c_str());
      ts.push_back(t);
    }
    cuvil_weights* staged = nullptr;
    cuvil_status* st = nullptr;
    ASSERT_EQ(cuvil_weights_stage(s, ns.data(), ts.data(), ns.size(), 0, &staged, &st), CUVIL_OK)
        << cuvil_status_message(st);
    ASSERT_EQ(cuvil_weights_commit(s, staged, nullptr, &st), CUVIL_OK) << cuvil_status_message(st);
    cuvil_weights_free(staged);
    EXPECT_EQ(run_c(), as_vector(run(compiled(w))[0])) << seed;
  }
  // A folded constant's own name is refused with the originals to use.
  cuvil_weights* staged = nullptr;
  cuvil_status* st = nullptr;
  Tensor t = random_tensor({8}, 1);
  int64_t d[1] = {8};
  cuvil_tensor ct = CUVIL_TENSOR_INIT;
  ct.rank = 1, ct.dims = d, ct.data = t.raw(), ct.bytes = 32;
  std::string out_b = artifact::load_memory(b.data(), b.size()).recipes->folds[0].out_b;
  const char* n = out_b.c_str();
  EXPECT_EQ(cuvil_weights_stage(s, &n, &ct, 1, CUVIL_WEIGHTS_SUBSET, &staged, &st), CUVIL_WEIGHTS_MISMATCH);
  EXPECT_NE(std::string(cuvil_status_message(st)).find("update 'conv.weight'"), std::string::npos)
      << cuvil_status_message(st);
  cuvil_status_free(st);
  cuvil_session_free(s);
}

TEST(WeightRecipes, DamagedRecipesAreClearLoadErrors) {
  const std::string b = artifact_of(1);
  auto with_section = [&](const std::string& text) {
    // The file again with the section's text replaced (same layout when the length is kept).
    std::string c = b;
    artifact::Header h;
    std::memcpy(&h, c.data(), sizeof h);
    auto* table = reinterpret_cast<artifact::SectionEntry*>(c.data() + sizeof h);
    for (uint32_t i = 0; i < h.section_count; ++i)
      if (table[i].kind == uint32_t(artifact::SectionKind::weight_recipes)) {
        EXPECT_EQ(text.size(), table[i].size);
        std::memcpy(c.data() + table[i].offset, text.data(), text.size());
        table[i].checksum = artifact::section_checksum(table[i].flags, text.data(), text.size());
      }
    h.table_checksum = artifact::checksum64(table, h.section_count * sizeof(artifact::SectionEntry));
    h.header_checksum = artifact::checksum64(&h, offsetof(artifact::Header, header_checksum));
    std::memcpy(c.data(), &h, sizeof h);
    return c;
  };
  std::string text;
  {
    artifact::Header h;
    std::memcpy(&h, b.data(), sizeof h);
    auto* table = reinterpret_cast<const artifact::SectionEntry*>(b.data() + sizeof h);
    for (uint32_t i = 0; i < h.section_count; ++i)
      if (table[i].kind == uint32_t(artifact::SectionKind::weight_recipes))
        text.assign(b.data() + table[i].offset, table[i].size);
  }
  ASSERT_FALSE(text.empty());
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return with_section(t);
  };
  struct Case {
    std::string from, to, says;
  };
  for (const Case& c : std::vector<Case>{{"\"bn.running_var\"", "\"bn.running_vaX\"", "no original weight"},
                                         {"\"dtype\":\"f32\"", "\"dtype\":\"f31\"", "unknown dtype"},
                                         {"\"batch_norm\"", "\"batch_nrom\"", "unknown fold kind"},
                                         {"\"by_column\":false", "\"by_column\":0    ", "not a boolean"},
                                         {"{\"originals\"", "[\"originals\"", "not a JSON object"}}) {
    try {
      artifact::load_memory(edit(c.from, c.to).data(), b.size());
      ADD_FAILURE() << "loaded: " << c.from;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cuvil
