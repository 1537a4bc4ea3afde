// Randomized shape fuzzing: graphs with symbolic dims, optimized (-O1: fusion, generated kernels, shape-generic
// matrix products) and run on the fast kernels at random shapes — new, repeated and evicted signatures, odd
// sizes, single rows, empty batches — against the unoptimized graph on the reference kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

// `n` random values as IR constant text.
std::string values(std::mt19937& rng, int n) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < n; ++i) os << (i ? ", " : "") << u(rng);
  os << "]";
  return os.str();
}

struct Template {
  std::string name;
  std::string text;
  // The inputs' shapes at symbol values b, s.
  std::vector<Ints> (*shapes)(int64_t b, int64_t s);
};

std::vector<Template> templates(std::mt19937& rng) {
  std::vector<Template> t;
  t.push_back({"encoder block", R"(graph @main(%x: f32[b, s, 16], %m: f32[s]) {
  %w: f32[16, 16] = constant )" + values(rng, 256) + R"(
  %bias: f32[16] = constant )" + values(rng, 16) + R"(
  %g: f32[16] = constant )" + values(rng, 16) + R"(
  %axes: i64[1] = constant [-1]
  %h: f32[b, s, 16] = MatMul(%x, %w)
  %hb: f32[b, s, 16] = Add(%h, %bias)
  %r: f32[b, s, 16] = Relu(%hb)
  %res: f32[b, s, 16] = Add(%r, %x)
  %ln: f32[b, s, 16] = LayerNormalization(%res, %g) {axis = -1}
  %kt: f32[b, 16, s] = Transpose(%ln) {perm = [0, 2, 1]}
  %sc: f32[b, s, s] = MatMul(%ln, %kt)
  %sm: f32[b, s, s] = Add(%sc, %m)
  %p: f32[b, s, s] = Softmax(%sm) {axis = -1}
  %ctx: f32[b, s, 16] = MatMul(%p, %ln)
  %red: f32[b, s, 1] = ReduceMean(%ctx, %axes)
  %out: f32[b, s, 16] = Sub(%ctx, %red)
  return %out, %p
})",
                   [](int64_t b, int64_t s) { return std::vector<Ints>{{b, s, 16}, {s}}; }});
  t.push_back({"shape arithmetic", R"(graph @main(%x: f32[b, s, 6]) {
  %c0: i64[] = constant [0]
  %one: i64[1] = constant [1]
  %neg: i64[1] = constant [-1]
  %axes: i64[1] = constant [0]
  %sh: i64[3] = Shape(%x)
  %b0: i64[] = Gather(%sh, %c0) {axis = 0}
  %b1: i64[1] = Reshape(%b0, %one)
  %tgt: i64[2] = Concat(%b1, %neg) {axis = 0}
  %flat: f32[b, 6*s] = Reshape(%x, %tgt)
  %t: f32[6*s, b] = Transpose(%flat) {perm = [1, 0]}
  %e: f32[6*s, b] = Exp(%t)
  %sum: f32[1, b] = ReduceSum(%e, %axes)
  %y: f32[6*s, b] = Div(%e, %sum)
  return %y
})",
                   [](int64_t b, int64_t s) { return std::vector<Ints>{{b, s, 6}}; }});
  t.push_back({"broadcast, select, concat", R"(graph @main(%x: f32[b, s], %y: f32[s]) {
  %z: f32[] = constant [0]
  %axes: i64[1] = constant [1]
  %a: f32[b, s] = Add(%x, %y)
  %c: bool[b, s] = Greater(%a, %z)
  %n: f32[b, s] = Neg(%a)
  %w: f32[b, s] = Where(%c, %a, %n)
  %cat: f32[b, 2*s] = Concat(%w, %x) {axis = 1}
  %th: f32[b, 2*s] = Tanh(%cat)
  %mx: f32[b, 1] = ReduceMax(%th, %axes)
  return %mx, %cat
})",
                   [](int64_t b, int64_t s) { return std::vector<Ints>{{b, s}, {s}}; }});
  return t;
}

Tensor random_input(std::mt19937& rng, const Ints& shape) {
  std::normal_distribution<float> n(0.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

TEST(ShapeFuzz, OptimizedFastMatchesReferenceAtRandomShapes) {
  std::mt19937 rng(2026);
  for (const Template& tpl : templates(rng)) {
    SCOPED_TRACE(tpl.name);
    auto reference_graph = parse_graph(tpl.text);
    infer_shapes(*reference_graph);
    verify(*reference_graph);
    auto optimized = parse_graph(tpl.text);
    infer_shapes(*optimized);
    optimize(*optimized, 1);
    verify(*optimized);
    int fused = 0;
    for (auto& n : optimized->nodes()) fused += n->op() == OpKind::FusedKernel;
    EXPECT_GT(fused, 0) << "the optimized graph has no generated kernel";
    ExecutorOptions o;
    o.max_plans = 3;  // evictions and re-plans happen along the way
    Executor fast(optimized, o), ref(reference_graph, reference_kernels());
    std::vector<std::pair<int64_t, int64_t>> seen;
    for (int trial = 0; trial < 40; ++trial) {
      int64_t b, s;
      if (!seen.empty() && rng() % 4 == 0) {
        std::tie(b, s) = seen[rng() % seen.size()];  // a signature seen before (cached or evicted)
      } else {
        b = rng() % 10 == 0 ? 0 : 1 + int64_t(rng() % 5);
        s = 1 + int64_t(rng() % (rng() % 3 == 0 ? 70 : 9));
        seen.emplace_back(b, s);
      }
      std::vector<Tensor> feeds;
      for (const Ints& shape : tpl.shapes(b, s)) feeds.push_back(random_input(rng, shape));
      std::vector<Tensor> got = fast.run(feeds), want = ref.run(feeds);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].shape(), want[k].shape()) << "b=" << b << " s=" << s << " output " << k;
        for (int64_t i = 0; i < want[k].numel(); ++i) {
          float g = got[k].data<float>()[i], w = want[k].data<float>()[i];
          ASSERT_NEAR(g, w, 1e-4 * (1 + std::fabs(w))) << "b=" << b << " s=" << s << " output " << k << " at " << i;
        }
      }
    }
    EXPECT_LE(fast.stats().plans_cached, 3);
    EXPECT_GT(fast.stats().plan_evictions, 0);
  }
}

}  // namespace
