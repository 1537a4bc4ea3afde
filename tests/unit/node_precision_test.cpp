// A node's own precision (its `precision` / `precision_reason` attributes, set by cuvil.quantize's fallback and
// precision="auto"): it raises the node above the executor's precision with its reason, never lowers it, and an
// fp32 executor ignores it (the float model stays the reference).
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <random>

#include "runtime/executor.h"
#include "runtime/int8_links.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

bool has_isa(dnnl::cpu_isa want) {
  auto isa = unsigned(dnnl::get_effective_cpu_isa());
  return (isa & unsigned(want)) == unsigned(want);
}

NodeTime run_at(Precision executor, const char* node_precision) {
  AttrMap a{{"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})},
            {"channels_last", Attribute(int64_t(1))},
            {"quant_x_scale", Attribute(2.0 / 255)},
            {"quant_x_zero_point", Attribute(int64_t(128))},
            {"precision", Attribute(node_precision)},
            {"precision_reason", Attribute("measured: too harmful")}};
  OneOp one = build_op(OpKind::FusedConv, {input(random_tensor({1, 9, 9, 16}, 1)), constant(random_tensor({32, 16, 3, 3}, 2))}, a);
  ExecutorOptions o;
  o.kernels.precision = executor;
  o.kernels.lower_final_outputs = true;
  return Executor(one.g, o).profile(one.feeds)[0];
}

TEST(NodePrecision, RaisesNeverLowers) {
  NodeTime t = run_at(Precision::int8, "fp32");
  EXPECT_EQ(t.precision.precision, Precision::fp32);
  EXPECT_EQ(t.precision.reason, "measured: too harmful");
  t = run_at(Precision::int8, "bf16");
  EXPECT_EQ(t.precision.reason.rfind("measured: too harmful", 0), 0u) << t.precision.reason;
  if (has_isa(dnnl::cpu_isa::avx512_core_bf16)) EXPECT_EQ(t.precision.precision, Precision::bf16) << t.impl;
  else EXPECT_EQ(t.precision.precision, Precision::fp32);
  // lower than the executor's: ignored
  t = run_at(Precision::bf16, "int8");
  EXPECT_NE(t.precision.precision, Precision::int8);
  EXPECT_EQ(t.precision.reason.find("measured"), std::string::npos);
  // an fp32 executor computes the float model whatever the nodes say
  t = run_at(Precision::fp32, "bf16");
  EXPECT_EQ(t.precision.precision, Precision::fp32);
  EXPECT_EQ(t.precision.reason, "");
  // "" is the executor's precision
  t = run_at(Precision::int8, "");
  if (has_isa(dnnl::cpu_isa::avx512_core_vnni)) EXPECT_EQ(t.precision.precision, Precision::int8) << t.precision.reason;
  EXPECT_CUVIL_ERROR(run_at(Precision::int8, "fp16"), "unknown precision 'fp16'");
}

// Products take bf16 on their own branch of kernel selection: the node's reason reaches them too.
TEST(NodePrecision, ProductsCarryTheReason) {
  AttrMap a{{"quant_x_scale", Attribute(2.0 / 255)},
            {"quant_x_zero_point", Attribute(int64_t(128))},
            {"precision", Attribute("bf16")},
            {"precision_reason", Attribute("measured: too harmful")}};
  OneOp one = build_op(OpKind::FusedMatMul, {input(random_tensor({7, 64}, 3)), constant(random_tensor({64, 48}, 4))}, a);
  ExecutorOptions o;
  o.kernels.precision = Precision::int8;
  o.kernels.lower_final_outputs = true;
  NodeTime t = Executor(one.g, o).profile(one.feeds)[0];
  EXPECT_EQ(t.precision.reason.rfind("measured: too harmful", 0), 0u) << t.precision.reason;
  EXPECT_NE(t.precision.precision, Precision::int8);
  if (has_isa(dnnl::cpu_isa::avx512_core_bf16)) EXPECT_EQ(t.precision.precision, Precision::bf16) << t.impl;
}

}  // namespace
