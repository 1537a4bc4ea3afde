// cuvil serve's hot weight swap (serving/served_model.h): a model file that differs from the served one in weights
// alone is swapped in as the next weights version (small, inline-printed constants included), one with another
// graph is refused (0: the repository reloads it instead), a file that does not load throws and changes nothing;
// and under load — threads running while the weights are swapped — every output is bit for bit the output of
// exactly the weights version it reports. ServedModelSwap.ThreadSafety*OneThreadEach* runs under ThreadSanitizer
// in CI (scripts/test.sh's filter).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "serving/served_model.h"
#include "support/error.h"

using namespace cuvil;
using namespace cuvil::serving;
namespace fs = std::filesystem;

namespace {

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x[batch, 8] -> relu(x @ W[8, 6] + B[6]) (extra_relu: one more Relu, another graph with the same signature).
// W prints as bytes, B (6 elements) inline.
std::string mlp_text(uint32_t seed, bool extra_relu = false) {
  Graph g;
  Value* w = g.add_constant("W", random_tensor({8, 6}, seed));
  Value* b = g.add_constant("B", random_tensor({6}, seed + 1));
  Value* x = g.add_input("x", TensorType{DType::f32, Shape(std::vector<Dim>{Dim::symbol("batch"), Dim(8)})});
  Value* y = g.add_node(OpKind::MatMul, {x, w}, {"mm"})->output(0);
  y = g.add_node(OpKind::Add, {y, b}, {"add"})->output(0);
  y = g.add_node(OpKind::Relu, {y}, {"relu"})->output(0);
  if (extra_relu) y = g.add_node(OpKind::Relu, {y}, {"relu2"})->output(0);
  g.add_output(y);
  infer_shapes(g);
  verify(g);
  return print_graph(g);
}

class ServedModelSwap : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cuvil-serving-swap-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static ServedModelOptions options(int instances) {
    ServedModelOptions o;
    o.instances = instances;
    o.threads = 1;
    return o;
  }
  // What a model loaded from `file` alone answers.
  static std::vector<Tensor> reference(const std::string& file, const std::vector<Tensor>& inputs) {
    return load_served_model(file, options(1))->run(inputs);
  }
  fs::path dir_;
};

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    ASSERT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()), 0) << "output " << i;
  }
}

TEST_F(ServedModelSwap, WeightsOnlySwapsOtherGraphsAndBadFilesDoNot) {
  std::string v1 = write("v1.cvir", mlp_text(1)), v2 = write("v2.cvir", mlp_text(2));
  std::string other = write("other.cvir", mlp_text(3, true)), bad = write("bad.cvir", "graph @nope(");
  std::vector<Tensor> in = {random_tensor({3, 8}, 7)};
  auto m = load_served_model(v1, options(2));
  uint64_t version = 0;
  expect_same(m->run_versioned(in, &version), reference(v1, in));
  EXPECT_EQ(version, 1u);

  uint64_t told = 0;
  EXPECT_EQ(m->swap_weights(v2, [&](uint64_t v) { told = v; }), 2u);
  EXPECT_EQ(told, 2u);
  std::vector<Tensor> out = m->run_versioned(in, &version);
  EXPECT_EQ(version, 2u);
  expect_same(out, reference(v2, in));
  EXPECT_NE(std::memcmp(out[0].raw(), reference(v1, in)[0].raw(), out[0].nbytes()), 0);

  // Another graph with the same inputs and outputs: not a weights swap.
  told = 0;
  EXPECT_EQ(m->swap_weights(other, [&](uint64_t v) { told = v; }), 0u);
  EXPECT_EQ(told, 0u);
  // A file that does not load: an error, and the weights serving stay.
  EXPECT_THROW(m->swap_weights(bad, [](uint64_t) {}), Error);
  EXPECT_THROW(m->swap_weights((dir_ / "missing.cvir").string(), [](uint64_t) {}), Error);
  expect_same(m->run_versioned(in, &version), reference(v2, in));
  EXPECT_EQ(version, 2u);
  // Swapping back to the first weights is a new version with the first outputs; other batch sizes run too.
  EXPECT_EQ(m->swap_weights(v1, [](uint64_t) {}), 3u);
  std::vector<Tensor> one = {random_tensor({1, 8}, 8)};
  expect_same(m->run_versioned(one, &version), reference(v1, one));
  EXPECT_EQ(version, 3u);
}

TEST_F(ServedModelSwap, WarmedUpShapesArePreparedForTheNextWeights) {
  std::string v1 = write("v1.cvir", mlp_text(1)), v2 = write("v2.cvir", mlp_text(2));
  auto m = load_served_model(v1, options(2));
  for (int64_t b = 1; b <= 4; ++b) m->prepare({{b, 8}});
  ASSERT_EQ(m->swap_weights(v2, [](uint64_t) {}), 2u);
  for (int64_t b = 1; b <= 4; ++b) {
    std::vector<Tensor> in = {random_tensor({b, 8}, uint32_t(b))};
    uint64_t version = 0;
    expect_same(m->run_versioned(in, &version), reference(v2, in));
    EXPECT_EQ(version, 2u);
  }
}

TEST_F(ServedModelSwap, ThreadSafetyServedModelSwapOneThreadEachRunsWhileSwapping) {
  std::vector<std::string> files = {write("v1.cvir", mlp_text(1)), write("v2.cvir", mlp_text(2))};
  std::vector<Tensor> in = {random_tensor({2, 8}, 5)};
  std::vector<std::vector<Tensor>> want = {reference(files[0], in), reference(files[1], in)};
  auto m = load_served_model(files[0], options(2));
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!stop) {
        uint64_t version = 0;
        std::vector<Tensor> out = m->run_versioned(in, &version);
        // Version v serves files[(v - 1) % 2]: 1 is the first file, each swap alternates.
        if (version == 0 || std::memcmp(out[0].raw(), want[(version - 1) % 2][0].raw(), out[0].nbytes()) != 0)
          ++wrong;
        ++runs;
      }
    });
  int seen = 0;
  for (int i = 0; i < 30; ++i) {
    // Runs between every two swaps (the threads may start late on a loaded machine): each swap races real runs.
    while (runs.load() == seen) std::this_thread::yield();
    seen = runs.load();
    EXPECT_EQ(m->swap_weights(files[size_t((i + 1) % 2)], [](uint64_t) {}), uint64_t(i + 2));
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(runs.load(), 30);
}

}  // namespace
