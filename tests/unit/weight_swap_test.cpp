// Hot weight swap (runtime/weights.h, runtime/versioned_model.h): replacing named constants gives what a model
// built with those weights gives, bit for bit, also through the passes (BatchNorm folded into the convolution);
// bad updates change nothing; runs keep the version they started on; and under load — 8 threads running while
// the weights are swapped 100 times — every output is the reference output of exactly the version it reports.
// ThreadSafetyWeightSwap.OneThreadEach* runs under ThreadSanitizer in CI (scripts/test.sh's filter).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "passes/pipeline.h"
#include "runtime/versioned_model.h"
#include "runtime/weights.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Weights = std::vector<std::pair<std::string, Tensor>>;

Tensor random_tensor(DType dt, std::vector<int64_t> shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::zeros(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// The weights of the test net, named as a front end would; `seed` picks one set.
Weights net_weights(uint32_t seed) {
  return {{"conv.weight", random_tensor(DType::f32, {4, 3, 3, 3}, seed)},
          {"conv.bias", random_tensor(DType::f32, {4}, seed + 1)},
          {"bn.weight", random_tensor(DType::f32, {4}, seed + 2, 0.5f, 1.5f)},
          {"bn.bias", random_tensor(DType::f32, {4}, seed + 3)},
          {"bn.running_mean", random_tensor(DType::f32, {4}, seed + 4)},
          {"bn.running_var", random_tensor(DType::f32, {4}, seed + 5, 0.5f, 2.f)},
          {"fc.weight", random_tensor(DType::f32, {4, 5}, seed + 6)},
          {"fc.bias", random_tensor(DType::f32, {5}, seed + 7)}};
}

// x -> Conv -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> MatMul -> Add, before the passes.
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
  y = g->add_node(OpKind::MatMul, {y, c["fc.weight"]}, {"mm"})->output(0);
  y = g->add_node(OpKind::Add, {y, c["fc.bias"]}, {"out"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  return g;
}

std::shared_ptr<Graph> optimized(std::shared_ptr<Graph> g) {
  optimize(*g, 1);
  return g;
}

std::vector<Tensor> feeds() { return {random_tensor(DType::f32, {2, 3, 8, 8}, 99)}; }

ExecutorOptions one_thread() {
  ExecutorOptions o;
  o.threads = 1;
  return o;
}

std::vector<Tensor> run_fresh(std::shared_ptr<const Graph> g) {
  Executor e(std::move(g), one_thread());
  return e.run(feeds());
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_bytes(b[i])) return false;
  return true;
}

TEST(WeightSwap, ListsTopLevelConstants) {
  std::shared_ptr<Graph> g = net(net_weights(1));
  std::vector<WeightInfo> w = list_weights(*g);
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w[0].name, "conv.weight");
  EXPECT_EQ(w[0].type.str(), "f32[4, 3, 3, 3]");
  EXPECT_TRUE(w[0].required);
}

TEST(WeightSwap, ReplacedWeightsGiveTheFreshModelsBits) {
  Weights a = net_weights(1), b = net_weights(100);
  std::shared_ptr<Graph> src = net(a);
  std::shared_ptr<Graph> updated = with_weights(*src, b, /*strict=*/true);
  // The source graph is untouched; the copy runs like a model built with b, before and after the passes (which
  // fold the BatchNorm into the convolution's weights and fuse the rest).
  EXPECT_TRUE(same(run_fresh(src), run_fresh(net(a))));
  EXPECT_TRUE(same(run_fresh(updated), run_fresh(net(b))));
  EXPECT_FALSE(same(run_fresh(updated), run_fresh(net(a))));
  std::shared_ptr<Graph> opt_updated = optimized(with_weights(*src, b, true));
  EXPECT_TRUE(same(run_fresh(opt_updated), run_fresh(optimized(net(b)))));
  EXPECT_EQ(print_graph(*opt_updated), print_graph(*optimized(net(b))));
  // Against the reference kernels on the unoptimized graph.
  Executor ref(net(b), reference_kernels());
  std::vector<Tensor> want = ref.run(feeds()), got = run_fresh(opt_updated);
  for (int64_t i = 0; i < want[0].numel(); ++i)
    EXPECT_NEAR(got[0].get_f64(i), want[0].get_f64(i), 1e-4 * (1 + std::fabs(want[0].get_f64(i))));
}

TEST(WeightSwap, SubsetKeepsTheOtherWeights) {
  Weights a = net_weights(1), b = net_weights(100);
  Weights mixed = a;
  mixed[6] = b[6];  // fc.weight
  std::shared_ptr<Graph> updated = with_weights(*net(a), {b[6]}, /*strict=*/false);
  EXPECT_TRUE(same(run_fresh(optimized(updated)), run_fresh(optimized(net(mixed)))));
  EXPECT_CUVIL_ERROR(with_weights(*net(a), {b[6]}, /*strict=*/true), "strict update: missing 'conv.weight'");
}

TEST(WeightSwap, BadUpdatesNameEveryProblemAndChangeNothing) {
  std::shared_ptr<Graph> g = net(net_weights(1));
  std::string before = print_graph(*g);
  EXPECT_CUVIL_ERROR(with_weights(*g, {{"conv.wieght", random_tensor(DType::f32, {4, 3, 3, 3}, 1)}}, false),
                     "'conv.wieght' is not a weight of this model");
  EXPECT_CUVIL_ERROR(with_weights(*g, {{"fc.bias", Tensor::zeros(DType::f64, {5})}}, false),
                     "'fc.bias' is f32, given f64");
  EXPECT_CUVIL_ERROR(with_weights(*g, {{"fc.bias", Tensor::zeros(DType::f32, {6})}}, false),
                     "'fc.bias' has shape f32[5], given f32[6]");
  EXPECT_CUVIL_ERROR(with_weights(*g, {{"fc.bias", Tensor::zeros(DType::f32, {5})}, {"fc.bias", Tensor::zeros(DType::f32, {5})}}, false),
                     "'fc.bias' is given twice");
  try {
    with_weights(*g, {{"nope", Tensor::zeros(DType::f32, {5})}, {"fc.bias", Tensor::zeros(DType::f32, {1, 5})}}, false);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {  // every problem at once
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'fc.bias' has shape"), std::string::npos) << e.what();
  }
  EXPECT_EQ(print_graph(*g), before);
}

TEST(WeightSwap, RunsKeepTheirVersionAndOldVersionsAreFreed) {
  Weights a = net_weights(1), b = net_weights(100);
  std::shared_ptr<Graph> src = net(a);
  VersionedModel m(optimized(clone_graph(*src)), one_thread());
  m.prepare({{2, 3, 8, 8}});
  std::vector<Tensor> ref_a = run_fresh(optimized(net(a))), ref_b = run_fresh(optimized(net(b)));
  std::weak_ptr<WeightsVersion> v1 = m.current();
  {
    VersionedModel::Lease in_flight = m.lease();  // a run that started before the swap
    EXPECT_EQ(in_flight.version_id(), 1u);
    uint64_t id = m.swap(optimized(with_weights(*src, b, true)));
    EXPECT_EQ(id, 2u);
    EXPECT_EQ(m.current_id(), 2u);
    EXPECT_TRUE(same(in_flight.executor().run(feeds()), ref_a));
    EXPECT_FALSE(v1.expired());  // held by the run
    VersionedModel::Lease after = m.lease();
    EXPECT_EQ(after.version_id(), 2u);
    EXPECT_TRUE(same(after.executor().run(feeds()), ref_b));
  }
  EXPECT_TRUE(v1.expired());  // freed with its last run
  // The swap prepared the new version for the shapes served: a run takes a prepared executor.
  VersionedModel::Lease l = m.lease();
  EXPECT_GE(l.executor().stats().kernels_prepared, 1);
  // A graph with another signature is refused; a stale staged version too.
  EXPECT_CUVIL_ERROR(m.swap(parse_checked("graph @main(%x: f32[2, 3, 8, 8]) {\n  %out: f32[2, 3, 8, 8] = "
                                          "Relu(%x)\n  return %out\n}\n")),
                     "weights not updated: outputs 0 would change from 'out': f32[2, 5]");
  auto staged = m.stage(optimized(with_weights(*src, a, true)));
  m.swap(optimized(with_weights(*src, a, true)));
  EXPECT_CUVIL_ERROR(m.commit(staged, 2), "staged from version 2, but version");
}

// 8 threads run continuously while the main thread swaps the weights 100 times (cycling through 4 sets, each
// swap re-folding the BatchNorm and preparing the executors). Every output must be bit for bit the reference of
// the set its reported version was built from, and of no other set.
void swap_under_load(int executor_threads) {
  constexpr int kThreads = 8, kSwaps = 100, kSets = 4;
  std::shared_ptr<Graph> src = net(net_weights(1));
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<std::vector<Tensor>> refs;
  for (int k = 0; k < kSets; ++k) {
    graphs.push_back(optimized(with_weights(*src, net_weights(uint32_t(1 + 1000 * k)), true)));
    refs.push_back(run_fresh(graphs.back()));
  }
  for (int i = 0; i < kSets; ++i)
    for (int j = i + 1; j < kSets; ++j) ASSERT_FALSE(same(refs[size_t(i)], refs[size_t(j)]));
  ExecutorOptions o;
  o.threads = executor_threads;
  VersionedModel m(graphs[0], o);
  m.prepare({{2, 3, 8, 8}});
  // Version id -> weight set, written before the version is published (the mutex orders it for the readers).
  std::mutex set_mu;
  std::map<uint64_t, int> set_of{{1, 0}};
  std::atomic<bool> stop{false};
  std::vector<std::string> failures(kThreads);
  std::vector<std::atomic<int64_t>> runs(kThreads);
  std::vector<std::atomic<bool>> ended(kThreads);
  std::vector<std::set<uint64_t>> seen(kThreads);  // versions each thread ran on
  std::vector<std::thread> threads;
  std::vector<Tensor> in = feeds();
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      struct End {
        std::atomic<bool>& e;
        ~End() { e = true; }
      } end{ended[size_t(t)]};
      try {
        while (!stop.load()) {
          VersionedModel::Lease l = m.lease();
          std::vector<Tensor> got = l.executor().run(in);
          l.note_shapes({{2, 3, 8, 8}});
          int want;
          {
            std::lock_guard<std::mutex> lock(set_mu);
            want = set_of.at(l.version_id());
          }
          int matches = 0;
          for (int k = 0; k < kSets; ++k) matches += same(got, refs[size_t(k)]);
          if (matches != 1 || !same(got, refs[size_t(want)])) {
            failures[size_t(t)] = "version " + std::to_string(l.version_id()) + ": output matches " +
                                  std::to_string(matches) + " references, not set " + std::to_string(want);
            return;
          }
          ++runs[size_t(t)];
          seen[size_t(t)].insert(l.version_id());
        }
      } catch (const std::exception& e) {
        failures[size_t(t)] = e.what();
      }
    });
  // Every thread runs before the first swap and after the last (a thread that failed has ended).
  auto each_ran = [&] {
    std::vector<int64_t> before(kThreads);
    for (int t = 0; t < kThreads; ++t) before[size_t(t)] = runs[size_t(t)];
    for (int t = 0; t < kThreads; ++t)
      while (runs[size_t(t)] == before[size_t(t)] && !ended[size_t(t)]) std::this_thread::yield();
  };
  each_ran();
  for (int s = 1; s <= kSwaps; ++s) {
    int k = s % kSets;
    std::shared_ptr<WeightsVersion> v = m.stage(graphs[size_t(k)]);
    {
      std::lock_guard<std::mutex> lock(set_mu);
      set_of[v->id()] = k;
    }
    m.commit(v);
  }
  each_ran();
  stop = true;
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[size_t(t)], "") << "thread " << t;
    EXPECT_GE(runs[size_t(t)], 2) << "thread " << t;
  }
  EXPECT_EQ(m.current_id(), uint64_t(kSwaps + 1));
  std::set<uint64_t> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  EXPECT_GT(all.size(), 1u) << "the runs never met a swap";
}

TEST(ThreadSafetyWeightSwap, OneThreadEachSwapUnderLoad) { swap_under_load(1); }

}  // namespace
