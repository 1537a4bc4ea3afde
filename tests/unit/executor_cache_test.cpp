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

}  // namespace
