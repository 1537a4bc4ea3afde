// The executor's caches stay bounded when many distinct shapes arrive: plans per shape signature (LRU) and,
// inside regions, kernels per input shapes. Results stay right across evictions and re-plans.
#include <gtest/gtest.h>

#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

Tensor ramp(int64_t n) {
  Tensor t = Tensor::zeros(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = float(i % 7) - 3.f;
  return t;
}

void expect_relu_of(const Tensor& got, const Tensor& x) {
  ASSERT_EQ(got.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(got.data<float>()[i], std::max(0.f, x.data<float>()[i])) << i;
}

TEST(ExecutorCaches, PlansAreBoundedLeastRecentlyUsedFirst) {
  auto g = parse_checked(R"(graph @main(%x: f32[n]) {
  %y: f32[n] = Relu(%x)
  %z: f32[n] = Neg(%y)
  %w: f32[n] = Neg(%z)
  return %w
})");
  ExecutorOptions o;
  o.max_plans = 4;
  Executor e(g, o);
  for (int64_t n = 1; n <= 300; ++n) expect_relu_of(e.run({ramp(n)})[0], ramp(n));
  EXPECT_EQ(e.stats().plans_built, 300);
  EXPECT_EQ(e.stats().plans_cached, 4);
  EXPECT_EQ(e.stats().plan_evictions, 296);
  // The four most recent signatures are hits; the oldest ones are planned again.
  for (int64_t n = 297; n <= 300; ++n) expect_relu_of(e.run({ramp(n)})[0], ramp(n));
  EXPECT_EQ(e.stats().plans_built, 300);
  expect_relu_of(e.run({ramp(5)})[0], ramp(5));
  EXPECT_EQ(e.stats().plans_built, 301);
  EXPECT_EQ(e.stats().plans_cached, 4);
}

TEST(ExecutorCaches, RegionKernelsAreBounded) {
  // The Relu inside the If runs without a plan: its kernels are cached per input shapes, at most 3 here.
  auto g = parse_checked(R"(graph @main(%c: bool[], %x: f32[n]) {
  %y: f32[n] = If(%c) {else_branch = graph @e() {
    %r: f32[n] = Neg(%x)
    return %r
  }, then_branch = graph @t() {
    %r2: f32[n] = Relu(%x)
    return %r2
  }}
  return %y
})");
  ExecutorOptions o;
  o.max_region_kernels = 3;
  Executor e(g, o);
  for (int round = 0; round < 2; ++round)
    for (int64_t n = 1; n <= 20; ++n) expect_relu_of(e.run({Tensor::scalar<bool>(true), ramp(n)})[0], ramp(n));
  EXPECT_EQ(e.stats().kernel_evictions, 40 - 3);
  // Repeating the most recent shape is a hit.
  e.run({Tensor::scalar<bool>(true), ramp(20)});
  EXPECT_EQ(e.stats().kernel_evictions, 40 - 3);
}

TEST(ExecutorCaches, PrepareAheadOfTheFirstRun) {
  auto g = parse_checked(R"(graph @main(%x: f32[n]) {
  %y: f32[n] = Relu(%x)
  return %y
})");
  Executor e(g);
  e.prepare({{17}});
  EXPECT_EQ(e.stats().plans_built, 1);
  expect_relu_of(e.run({ramp(17)})[0], ramp(17));
  EXPECT_EQ(e.stats().plans_built, 1);  // the prepared plan served the run
  EXPECT_CUVIL_ERROR(e.prepare({{2, 3}}), "expected rank 1");
  EXPECT_CUVIL_ERROR(e.prepare({}), "expected 1 inputs");
}

// Before a plan's first run its kernels are prepared ahead on several threads (oneDNN's JIT, packing): the same
// kernels, so the same bits, as one thread makes; and a node whose preparation fails ahead is prepared again by
// the run, whose error names it as before.
TEST(ExecutorCaches, PreparedAheadOnThreadsGiveTheSameBits) {
  // x[n, 8, 9, 9] -> Conv 3x3 -> Relu -> Conv 1x1 -> Conv 3x3 stride 2 -> Flatten -> MatMul: oneDNN primitives
  // and Cuvil's GEMM panels, prepared for the batch the run brings.
  auto g = std::make_shared<Graph>();
  Value* in = g->add_input("x", TensorType{DType::f32, Shape({Dim::symbol("n"), Dim(8), Dim(9), Dim(9)})});
  uint32_t seed = 1;
  auto weight = [&](std::vector<int64_t> shape) {
    Tensor t = Tensor::zeros(DType::f32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(int64_t((i + 1) * 2654435761u * seed % 97) - 48) / 256.f;
    return g->add_constant("w" + std::to_string(seed++), t);
  };
  auto conv = [&](Value* v, int64_t cin, int64_t cout, int64_t k, int64_t stride) {
    int64_t p = k / 2;
    return g->add_node(OpKind::Conv, {v, weight({cout, cin, k, k})}, {"conv" + std::to_string(seed)},
                       {{"pads", Attribute(std::vector<int64_t>{p, p, p, p})},
                        {"strides", Attribute(std::vector<int64_t>{stride, stride})}})
        ->output(0);
  };
  Value* v = conv(in, 8, 16, 3, 1);
  v = g->add_node(OpKind::Relu, {v}, {"relu"})->output(0);
  v = conv(conv(v, 16, 12, 1, 1), 12, 12, 3, 2);
  v = g->add_node(OpKind::Flatten, {v}, {"flat"}, {{"axis", Attribute(int64_t(1))}})->output(0);
  v = g->add_node(OpKind::MatMul, {v, weight({300, 10})}, {"y"})->output(0);
  g->add_output(v);
  infer_shapes(*g);
  verify(*g);
  Tensor x = Tensor::zeros(DType::f32, {3, 8, 9, 9});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float((i * 37) % 23) * 0.125f - 1.f;
  std::vector<std::vector<float>> outs;
  std::vector<int64_t> prepared;
  for (int pt : {1, 2, 4}) {
    ExecutorOptions o;
    o.threads = 2;
    o.prepare_threads = pt;
    Executor e(g, o);
    outs.push_back(values<float>(e.run({x})[0]));
    prepared.push_back(e.stats().kernels_prepared);
    outs.push_back(values<float>(e.run({x})[0]));  // the second run prepares nothing more
    EXPECT_EQ(e.stats().kernels_prepared, prepared.back());
  }
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << i;
  EXPECT_EQ(prepared[1], prepared[0]);
  EXPECT_EQ(prepared[2], prepared[0]);
  std::vector<Tensor> ref = run_graph(g, {x});
  std::vector<double> want = as_f64(ref[0]);
  expect_values(tensor(outs[0], {3, 10}), want, 1e-3);
}

}  // namespace
