// Buffers outside the arena are recycled: a loop body's node outputs (reused once nothing holds the value they
// carried; the iteration number and condition are rewritten in place) and a graph's outputs (reused once the caller
// has let go of an earlier result). Results must never alias one another, earlier results must survive later runs,
// and the steady state allocates nothing.
#include <gtest/gtest.h>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

TensorType tt(DType d, std::vector<Dim> dims) { return {d, Shape(std::move(dims))}; }

// Loop(m, c0, h0, k0), body (i, c, h, k) -> (c, tanh(h @ w + h), k, tanh(..), i): h is carried through three
// nodes, k and the condition pass through unchanged (aliasing the body's inputs), and two scan outputs stack
// every iteration's value and the iteration number.
std::shared_ptr<Graph> recurrent_loop(bool with_scans) {
  auto g = std::make_shared<Graph>();
  Value* m = g->add_input("m", tt(DType::i64, {}));
  Value* c0 = g->add_input("c0", tt(DType::boolean, {}));
  Value* h0 = g->add_input("h0", tt(DType::f32, {2, 3}));
  Value* k0 = g->add_input("k0", tt(DType::f32, {2}));
  Value* w = g->add_constant("w", tensor<float>({0.5f, -0.25f, 0.125f, 0.75f, 0.5f, -1, -0.5f, 0.25f, 1}, {3, 3}));
  auto body = std::make_shared<Graph>("body");
  body->set_parent(g.get());
  Value* i = body->add_input("i", tt(DType::i64, {}));
  Value* c = body->add_input("c", tt(DType::boolean, {}));
  Value* h = body->add_input("h", tt(DType::f32, {2, 3}));
  Value* k = body->add_input("k", tt(DType::f32, {2}));
  Value* p = body->add_node(OpKind::MatMul, {h, w}, {"p"})->output(0);
  Value* q = body->add_node(OpKind::Add, {p, h}, {"q"})->output(0);
  Value* hn = body->add_node(OpKind::Tanh, {q}, {"hn"})->output(0);
  std::vector<Value*> outs{c, hn, k};
  std::vector<std::string> names{"h", "k"};
  if (with_scans) {
    outs.insert(outs.end(), {hn, i});
    names.insert(names.end(), {"hs", "is"});
  }
  body->set_outputs(outs);
  Node* n = g->add_node(OpKind::Loop, {m, c0, h0, k0}, names, {{"body", body}});
  g->set_outputs(n->outputs());
  infer_shapes(*g);
  verify(*g);
  return g;
}

std::vector<Tensor> feeds(int64_t trips, bool cond) {
  return {Tensor::scalar<int64_t>(trips), Tensor::scalar<bool>(cond),
          tensor<float>({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {2, 3}), tensor<float>({1, 2}, {2})};
}

class BufferRecycling : public ::testing::TestWithParam<bool> {
 protected:
  ExecutorOptions options() const { return GetParam() ? ExecutorOptions{} : reference_kernels(); }
};

// One executor over runs of varied trip counts (0, 1, many, and a false initial condition) gives exactly what a
// fresh executor gives each time, and every result it returned earlier is left as it was.
TEST_P(BufferRecycling, ResultsMatchAFreshExecutorAndNeverChangeLater) {
  auto g = recurrent_loop(true);
  Executor ex(g, options());
  std::vector<std::pair<std::vector<Tensor>, std::vector<Tensor>>> kept;  // results, and copies of them
  const std::pair<int64_t, bool> runs[] = {{5, true}, {0, true}, {1, true}, {7, true}, {3, false}, {64, true},
                                           {2, true}, {64, true}};
  for (auto [trips, cond] : runs) {
    std::vector<Tensor> got = ex.run(feeds(trips, cond));
    std::vector<Tensor> want = Executor(g, options()).run(feeds(trips, cond));
    ASSERT_EQ(got.size(), want.size());
    std::vector<Tensor> copies;
    for (size_t j = 0; j < got.size(); ++j) {
      EXPECT_TRUE(got[j].same_bytes(want[j])) << "trips " << trips << " output " << j << ": " << got[j].type_str();
      copies.push_back(got[j].clone());
    }
    // No two results share memory.
    for (size_t a = 0; a < got.size(); ++a)
      for (size_t b = a + 1; b < got.size(); ++b)
        if (got[a].nbytes() && got[b].nbytes()) {
          EXPECT_NE(got[a].raw(), got[b].raw()) << a << " and " << b;
        }
    kept.emplace_back(std::move(got), std::move(copies));
  }
  for (size_t r = 0; r < kept.size(); ++r)
    for (size_t j = 0; j < kept[r].first.size(); ++j)
      EXPECT_TRUE(kept[r].first[j].same_bytes(kept[r].second[j])) << "run " << r << " output " << j
                                                                    << " changed after later runs";
  // The pass-through carried value is the input's value, not the caller's buffer.
  std::vector<Tensor> in = feeds(4, true);
  std::vector<Tensor> out = ex.run(in);
  EXPECT_NE(out[1].raw(), in[3].raw());
  EXPECT_TRUE(out[1].same_bytes(in[3]));
}

// Once warm, a loop without scan outputs allocates nothing outside the arena, however many iterations it runs;
// a caller holding last call's result (y = model(x) in a loop) costs at most a buffer or two per call.
TEST_P(BufferRecycling, SteadyStateAllocatesNothing) {
  auto g = recurrent_loop(false);
  Executor ex(g, options());
  ex.run(feeds(64, true));
  ex.run(feeds(64, true));
  EXPECT_EQ(ex.stats().dynamic_bytes, 0);
  ex.run(feeds(200, true));
  EXPECT_EQ(ex.stats().dynamic_bytes, 0);
  std::vector<Tensor> held = ex.run(feeds(64, true));
  for (int r = 0; r < 4; ++r) {
    held = ex.run(feeds(64, true));
    EXPECT_LE(ex.stats().dynamic_bytes, 2 * 24) << "run " << r;  // two f32[2, 3] buffers at most
  }
  // With scan outputs every stacked value needs its own buffer: allocation grows with the trip count only there.
  auto scans = recurrent_loop(true);
  Executor sx(scans, options());
  sx.run(feeds(64, true));
  sx.run(feeds(64, true));
  EXPECT_LE(sx.stats().dynamic_bytes, 64 * 24 + 2 * 24);
}

// A graph's outputs live outside the arena: a result the caller still holds is never written again; once it is
// released its buffer serves the next call (no allocation, so no page faults for a large output).
TEST_P(BufferRecycling, GraphOutputsAreReusedOnlyOnceReleased) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", tt(DType::f32, {Dim::symbol("n"), 1000}));
  g->add_output(g->add_node(OpKind::Relu, {x}, {"y"})->output(0));
  g->add_output(g->add_node(OpKind::Neg, {x}, {"z"})->output(0));
  infer_shapes(*g);
  verify(*g);
  Executor ex(g, options());
  auto input = [](int64_t n, float v) {
    Tensor t = Tensor::zeros(DType::f32, {n, 1000});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (i % 3 ? v : -v) + float(i % 7);
    return t;
  };
  std::vector<Tensor> first = ex.run({input(300, 1)});
  std::vector<Tensor> first_copy{first[0].clone(), first[1].clone()};
  std::vector<Tensor> second = ex.run({input(300, 2)});
  EXPECT_GT(ex.stats().dynamic_bytes, 0);  // `first` is held: new buffers
  EXPECT_TRUE(first[0].same_bytes(first_copy[0]));
  EXPECT_TRUE(first[1].same_bytes(first_copy[1]));
  EXPECT_NE(first[0].raw(), second[0].raw());
  std::vector<Tensor> want = Executor(g, options()).run({input(300, 2)});
  EXPECT_TRUE(second[0].same_bytes(want[0]));
  EXPECT_TRUE(second[1].same_bytes(want[1]));
  first.clear();
  second = ex.run({input(300, 3)});  // the previous `second` is held until this returns; `first`'s are free
  EXPECT_EQ(ex.stats().dynamic_bytes, 0);
  want = Executor(g, options()).run({input(300, 3)});
  EXPECT_TRUE(second[0].same_bytes(want[0]));
  EXPECT_TRUE(second[1].same_bytes(want[1]));
  EXPECT_NE(second[0].raw(), second[1].raw());
  // Another shape gets its own buffers and the same answers.
  std::vector<Tensor> other = ex.run({input(7, 4)});
  want = Executor(g, options()).run({input(7, 4)});
  EXPECT_TRUE(other[0].same_bytes(want[0]));
  EXPECT_TRUE(second[0].same_bytes(Executor(g, options()).run({input(300, 3)})[0]));
}

// A graph listing one value twice among its outputs, an input and a constant as outputs: every result is the
// caller's own tensor (two aliased arrays let a write to one change the other; a returned constant written by
// the caller would change the model).
TEST_P(BufferRecycling, RepeatedInputAndConstantOutputsNeverAlias) {
  auto g = parse_checked(R"(graph @main(%x: f32[3]) {
  %c: f32[3] = constant [1, 2, 3]
  %y: f32[3] = Add(%x, %c)
  return %y, %y, %x, %c, %y
}
)");
  Executor ex(g, options());
  Tensor x = tensor<float>({10, 20, 30}, {3});
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> out = ex.run({x});
    ASSERT_EQ(out.size(), 5u);
    for (size_t a = 0; a < out.size(); ++a)
      for (size_t b = a + 1; b < out.size(); ++b) EXPECT_NE(out[a].raw(), out[b].raw()) << a << " and " << b;
    EXPECT_NE(out[2].raw(), x.raw());
    for (Tensor& t : out) t.data<float>()[0] = -1;  // the caller writes every result
    EXPECT_EQ(x.data<float>()[0], 10);
  }
  std::vector<Tensor> again = ex.run({x});
  expect_values(again[0], {11, 22, 33});
  expect_values(again[3], {1, 2, 3});
}

INSTANTIATE_TEST_SUITE_P(Kernels, BufferRecycling, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "fast" : "reference"; });

}  // namespace
