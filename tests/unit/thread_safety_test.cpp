// Thread safety: models prepared on one thread and run from others, one at a time (a model handed from the
// loading thread to a serving thread) and many at once (a pool of executors, one per request thread, as the
// Python layer keeps). Each family of kernels is covered: oneDNN convolutions (Winograd, direct, fused with a
// residual), pools, matrix products (Cuvil's GEMM and oneDNN's), Cuvil's CPU kernels, generated kernels,
// attention and control flow. Every result must equal the one the preparing thread computed.
//
// These run under ThreadSanitizer in CI (scripts/test.sh builds build-tsan/ for the ThreadSafety suite).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <thread>

#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(Ints shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

struct Family {
  std::string name;
  std::shared_ptr<const Graph> graph;
  std::vector<Tensor> feeds;
};

Family one_node(std::string name, OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}) {
  OneOp one = build_op(op, args, std::move(attrs));
  return {std::move(name), one.g, one.feeds};
}

// A graph from IR text after the -O1 passes (fusions, generated kernels), fed random f32 inputs.
Family optimized(std::string name, const std::string& text, uint32_t seed) {
  std::shared_ptr<Graph> g = parse_checked(text);
  PassContext ctx;
  optimize(*g, 1, ctx);
  std::vector<Tensor> feeds;
  for (Value* v : g->inputs()) feeds.push_back(random_tensor(v->shape().static_dims(), seed++));
  return {std::move(name), g, feeds};
}

std::vector<Family> families() {
  std::vector<Family> f;
  AttrMap pad1{{"pads", Attribute(Ints{1, 1, 1, 1})}};
  // The issue's crash: nn.Conv2d(3, 8, 3, padding=1) at batch 2 runs Winograd.
  f.push_back(one_node("Conv 3x3 (Winograd)", OpKind::Conv,
                       {input(random_tensor({2, 3, 32, 32}, 1)), constant(random_tensor({8, 3, 3, 3}, 2)),
                        constant(random_tensor({8}, 3))},
                       pad1));
  AttrMap fused{{"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))},
                {"activation", Attribute("Relu")}};
  f.push_back(one_node("FusedConv NHWC Winograd + sum", OpKind::FusedConv,
                       {input(random_tensor({1, 14, 12, 32}, 4)), constant(random_tensor({64, 32, 3, 3}, 5)),
                        constant(random_tensor({64}, 6)), input(random_tensor({1, 14, 12, 64}, 7))},
                       fused));
  f.push_back(one_node("Conv stride 2 (direct)", OpKind::Conv,
                       {input(random_tensor({1, 16, 28, 28}, 8)), constant(random_tensor({32, 16, 3, 3}, 9))},
                       {{"pads", Attribute(Ints{1, 1, 1, 1})}, {"strides", Attribute(Ints{2, 2})}}));
  f.push_back(one_node("Conv depthwise", OpKind::Conv,
                       {input(random_tensor({1, 24, 20, 20}, 10)), constant(random_tensor({24, 1, 3, 3}, 11))},
                       {{"pads", Attribute(Ints{1, 1, 1, 1})}, {"group", Attribute(int64_t(24))}}));
  f.push_back(one_node("MaxPool", OpKind::MaxPool, {input(random_tensor({2, 16, 33, 33}, 12))},
                       {{"kernel_shape", Attribute(Ints{3, 3})}, {"strides", Attribute(Ints{2, 2})}}));
  f.push_back(one_node("AveragePool", OpKind::AveragePool, {input(random_tensor({2, 16, 33, 33}, 13))},
                       {{"kernel_shape", Attribute(Ints{3, 3})}, {"strides", Attribute(Ints{2, 2})}}));
  f.push_back(one_node("MatMul constant B (CPU GEMM)", OpKind::MatMul,
                       {input(random_tensor({67, 130}, 14)), constant(random_tensor({130, 97}, 15))}));
  f.push_back(one_node("MatMul few rows (oneDNN)", OpKind::MatMul,
                       {input(random_tensor({7, 130}, 16)), constant(random_tensor({130, 97}, 17))}));
  f.push_back(one_node("MatMul batched, variable B", OpKind::MatMul,
                       {input(random_tensor({4, 33, 40}, 18)), input(random_tensor({4, 40, 29}, 19))}));
  f.push_back(one_node("Softmax", OpKind::Softmax, {input(random_tensor({64, 300}, 20))}));
  f.push_back(one_node("Transpose", OpKind::Transpose, {input(random_tensor({3, 64, 65}, 21))},
                       {{"perm", Attribute(Ints{2, 0, 1})}}));
  f.push_back(optimized("generated element-wise chain + LayerNorm", R"(graph @main(%x: f32[37, 129], %y: f32[129]) {
  %a: f32[37, 129] = Add(%x, %y)
  %r: f32[37, 129] = Relu(%a)
  %e: f32[37, 129] = Tanh(%r)
  %n: f32[37, 129] = LayerNormalization(%e, %y) {axis = -1}
  %ax: i64[1] = constant [1]
  %s: f32[37, 1] = ReduceSum(%n, %ax) {keepdims = 1}
  return %n, %s
}
)",
                      22));
  f.push_back(optimized("attention", R"(graph @main(%q: f32[1, 2, 33, 16], %k: f32[1, 2, 33, 16], %v: f32[1, 2, 33, 16]) {
  %kt: f32[1, 2, 16, 33] = Transpose(%k) {perm = [0, 1, 3, 2]}
  %s: f32[1, 2, 33, 33] = MatMul(%q, %kt)
  %quarter: f32[] = constant [0.25]
  %s2: f32[1, 2, 33, 33] = Mul(%s, %quarter)
  %p: f32[1, 2, 33, 33] = Softmax(%s2) {axis = -1}
  %y: f32[1, 2, 33, 16] = MatMul(%p, %v)
  return %y
}
)",
                      23));
  f.push_back(optimized("Loop", R"(graph @main(%x: f32[4], %h: f32[4]) {
  %n: i64[] = constant [5]
  %go: bool[] = constant [1]
  %out: f32[4], %ys: f32[5, 4] = Loop(%n, %go, %h) {body = graph @body(%i: i64[], %c: bool[], %acc: f32[4]) {
    %e: f32[4] = Exp(%x)
    %next: f32[4] = Add(%acc, %e)
    %fi: f32[] = Cast(%i) {to = 1}
    %step: f32[4] = Mul(%next, %fi)
    return %c, %next, %step
  }}
  return %out, %ys
}
)",
                    24));
  return f;
}

void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape()) << what;
    // The same kernels on the same inputs; only a threaded or single-threaded twin of a small convolution may be
    // picked differently (SpinAwareKernel), which reassociates sums.
    for (int64_t i = 0; i < got[k].numel(); ++i) {
      double g = got[k].get_f64(i), w = want[k].get_f64(i);
      ASSERT_NEAR(g, w, 1e-5 * (1 + std::fabs(w))) << what << ": output " << k << " element " << i;
    }
  }
}

// Runs `fn` on a new thread and waits for it (exceptions come back to the caller's test).
void on_new_thread(const std::function<void()>& fn) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

class ThreadSafety : public ::testing::TestWithParam<int> {};  // the executors' thread count (0: all cores)

// Prepared (first run) on this thread, then run on another: the issue's crash (oneDNN's default scratchpad is
// per creating thread, so a Winograd convolution wrote through a null pointer on the serving thread).
TEST_P(ThreadSafety, PreparedOnOneThreadRunOnAnother) {
  ExecutorOptions options;
  options.threads = GetParam();
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    Executor exec(f.graph, options);
    std::vector<Tensor> want = exec.run(f.feeds);
    Executor ref(f.graph, reference_kernels());
    std::vector<Tensor> oracle = ref.run(f.feeds);
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < want[k].numel(); ++i)
        ASSERT_NEAR(want[k].get_f64(i), oracle[k].get_f64(i), 1e-4 * (1 + std::fabs(oracle[k].get_f64(i))));
    for (int round = 0; round < 2; ++round)
      on_new_thread([&] { expect_same(exec.run(f.feeds), want, f.name + " on a new thread"); });
    // Prepared for a shape on another thread, then run here.
    Executor late(f.graph, options);
    on_new_thread([&] { late.prepare([&] {
                        std::vector<std::vector<int64_t>> shapes;
                        for (const Tensor& t : f.feeds) shapes.push_back(t.shape());
                        return shapes;
                      }()); });
    expect_same(late.run(f.feeds), want, f.name + " prepared on another thread");
  }
}

// Many threads at once, each with its own executor prepared on this thread, each running several times.
TEST_P(ThreadSafety, ManyThreadsAtOnce) {
  ExecutorOptions options;
  options.threads = GetParam();
  constexpr int kThreads = 6, kRounds = 3;
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    std::vector<std::unique_ptr<Executor>> pool;
    for (int t = 0; t < kThreads; ++t) pool.push_back(std::make_unique<Executor>(f.graph, options));
    std::vector<Tensor> want = pool[0]->run(f.feeds);
    for (int t = 1; t < kThreads; ++t) pool[size_t(t)]->run(f.feeds);
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int r = 0; r < kRounds; ++r) {
            std::vector<Tensor> got = pool[size_t(t)]->run(f.feeds);
            for (size_t k = 0; k < got.size(); ++k)
              for (int64_t i = 0; i < got[k].numel(); ++i) {
                double g = got[k].get_f64(i), w = want[k].get_f64(i);
                if (!(std::fabs(g - w) <= 1e-5 * (1 + std::fabs(w)))) {
                  failures[size_t(t)] = "output " + std::to_string(k) + " element " + std::to_string(i) + ": " +
                                        std::to_string(g) + " != " + std::to_string(w);
                  return;
                }
              }
          }
        } catch (const std::exception& e) {
          failures[size_t(t)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[size_t(t)], "") << "thread " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ThreadSafety, ::testing::Values(1, 0),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 1 ? std::string("OneThreadEach") : std::string("AllCores");
                         });

}  // namespace
