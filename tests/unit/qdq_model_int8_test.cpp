// A QDQ model's own int8 layers (node precision "int8" with kQdqReason, set by fold-quantize-dequantize) run int8
// at the default precision fp32, their reason saying why; everything else an fp32 executor runs stays f32
// (hints alone, other node precisions), run_with_values at fp32 (calibration's float reference) computes the QDQ
// layers in f32, and keep_model_int8_in_f32 (precision "fp32" asked explicitly) marks them f32 in the graph. At
// fp32 such layers link u8 between themselves as an int8 executor's do, with the same results bit for bit.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "artifact/artifact.h"
#include "cuvil/cuvil.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/qdq_precision.h"
#include "passes/pipeline.h"
#include "runtime/calibration.h"
#include "runtime/executor.h"
#include "runtime/int8_links.h"
#include "runtime/weights.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::test::int8;

namespace {

using Ints = std::vector<int64_t>;

bool vnni() { return machine_has_vnni(); }

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

AttrMap layer(const char* precision, const char* reason) {
  AttrMap a{{"pads", Attribute(Ints{1, 1, 1, 1})},
            {"channels_last", Attribute(int64_t(1))},
            {"activation", Attribute("Relu")},
            {"quant_x_scale", Attribute(4.0 / 255)},
            {"quant_x_zero_point", Attribute(int64_t(128))}};
  if (precision) {
    a["precision"] = Attribute(precision);
    a["precision_reason"] = Attribute(reason);
  }
  return a;
}

// x -> FusedConv -> FusedConv -> y (NHWC 3x3), both with the attributes `a`.
std::shared_ptr<Graph> chain(const AttrMap& a) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 9, 11, 8})});
  Value* h = g->add_node(OpKind::FusedConv, {x, g->add_constant("w1", random_tensor({12, 8, 3, 3}, 2)),
                                             g->add_constant("b1", random_tensor({12}, 3))}, {"h"}, a)->output(0);
  Value* y = g->add_node(OpKind::FusedConv, {h, g->add_constant("w2", random_tensor({6, 12, 3, 3}, 4)),
                                             g->add_constant("b2", random_tensor({6}, 5))}, {"y"}, a)->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  return g;
}

std::vector<NodeTime> profile_at(const std::shared_ptr<Graph>& g, Precision p) {
  ExecutorOptions o;
  o.kernels.precision = p;
  return Executor(g, o).profile({random_tensor({1, 9, 11, 8}, 1)});
}

std::vector<Tensor> run_at(const std::shared_ptr<Graph>& g, Precision p) {
  ExecutorOptions o;
  o.kernels.precision = p;
  return Executor(g, o).run({random_tensor({1, 9, 11, 8}, 1)});
}

TEST(QdqModelInt8, MarkedLayersRunInt8AtFp32WithTheReason) {
  auto g = chain(layer("int8", kQdqReason));
  for (const NodeTime& t : profile_at(g, Precision::fp32)) {
    EXPECT_EQ(t.precision.reason.rfind(kQdqReason, 0), 0u) << t.precision.reason;
    if (vnni()) EXPECT_EQ(t.precision.precision, Precision::int8) << t.impl;
    else EXPECT_EQ(t.precision.precision, Precision::fp32);  // (the int8 kernel declines without VNNI, and says so)
  }
  // the same arithmetic as an int8 executor's, links included
  if (vnni()) {
    ExecutorOptions o;
    EXPECT_EQ(count_int8_links(Executor(g, o).graph()), 1);
    EXPECT_TRUE(bitwise_equal(run_at(g, Precision::fp32)[0], run_at(g, Precision::int8)[0]));
  }
  // the float reference (run_with_values at fp32): f32, the marks restored after
  auto plain = chain(layer(nullptr, nullptr));
  ExecutorOptions o;
  Tensor x = random_tensor({1, 9, 11, 8}, 1);
  std::vector<Tensor> h = run_with_values(g, o, {x}, {g->nodes()[0]->output(0)});
  std::vector<Tensor> hp = run_with_values(plain, o, {x}, {plain->nodes()[0]->output(0)});
  EXPECT_TRUE(bitwise_equal(h[0], hp[0]));
  EXPECT_EQ(count_model_int8(*g), 2);
  if (vnni()) EXPECT_FALSE(bitwise_equal(run_at(g, Precision::fp32)[0], run_at(plain, Precision::fp32)[0]));
}

TEST(QdqModelInt8, Fp32ExecutorsLowerNothingElse) {
  // hints alone (a calibrated model's): f32 at fp32, no links
  auto hinted = chain(layer(nullptr, nullptr));
  for (const NodeTime& t : profile_at(hinted, Precision::fp32)) {
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "");
  }
  ExecutorOptions o;
  EXPECT_EQ(count_int8_links(Executor(hinted, o).graph()), 0);
  // node precision int8 for another reason: not the model's own quantization
  for (const NodeTime& t : profile_at(chain(layer("int8", "some other reason")), Precision::fp32)) {
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "");
  }
  // explicit bf16: the executor's precision stands for the QDQ layers (never int8)
  for (const NodeTime& t : profile_at(chain(layer("int8", kQdqReason)), Precision::bf16))
    EXPECT_NE(t.precision.precision, Precision::int8);
}

TEST(QdqModelInt8, KeepInF32MarksTheModelsLayers) {
  auto g = chain(layer("int8", kQdqReason));
  g->add_node(OpKind::Relu, {g->outputs()[0]}, {"other"}, {});  // (no precision attribute)
  EXPECT_EQ(count_model_int8(*g), 2);
  EXPECT_EQ(keep_model_int8_in_f32(*g), 2);
  EXPECT_EQ(count_model_int8(*g), 0);
  EXPECT_EQ(keep_model_int8_in_f32(*g), 0);
  std::vector<NodeTime> times = profile_at(g, Precision::fp32);
  ASSERT_EQ(times.size(), 3u);
  for (const NodeTime& t : times) {
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, t.node->op() == OpKind::Relu ? "" : kQdqF32Reason);
  }
  // and an int8 executor keeps them f32 too (a node's fp32 raises it)
  for (const NodeTime& t : profile_at(g, Precision::int8)) EXPECT_EQ(t.precision.precision, Precision::fp32);
}

}  // namespace

namespace {

// A QDQ model as onnxruntime writes it: x -> pair -> Conv -> pair -> MaxPool -> pair -> Conv -> pair -> (Relu, the
// second conv's reader) ..., s8 weights behind DequantizeLinear; optimized at -O1 (folds, fuses, FusedKernel pairs).
std::shared_ptr<Graph> qdq_model(bool pooled_read_elsewhere) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 8, 10, 12})});
  auto pair = [&](Value* v, float s, uint8_t z, const std::string& name) {
    Value* sc = g->add_constant(name + "_s", Tensor::scalar<float>(s));
    Value* zp = g->add_constant(name + "_z", Tensor::scalar<uint8_t>(z));
    Value* q = g->add_node(OpKind::QuantizeLinear, {v, sc, zp}, {name + "_q"}, {})->output(0);
    return g->add_node(OpKind::DequantizeLinear, {q, sc, zp}, {name + "_dq"}, {})->output(0);
  };
  auto weights = [&](int64_t co, int64_t ci, const std::string& name) {
    Tensor q = Tensor::zeros(DType::i8, {co, ci, 3, 3});
    for (int64_t i = 0; i < q.numel(); ++i) q.data<int8_t>()[i] = int8_t((i * 37) % 255 - 127);
    Value* wq = g->add_constant(name + "_wq", q);
    Value* ws = g->add_constant(name + "_ws", Tensor::scalar<float>(0.004f));
    return g->add_node(OpKind::DequantizeLinear, {wq, ws}, {name + "_w"}, {})->output(0);
  };
  AttrMap conv{{"pads", Attribute(Ints{1, 1, 1, 1})}, {"kernel_shape", Attribute(Ints{3, 3})}};
  Value* c1 = g->add_node(OpKind::Conv, {pair(x, 0.02f, 128, "in"), weights(16, 8, "c1")}, {"c1"}, conv)->output(0);
  Value* r1 = g->add_node(OpKind::Relu, {c1}, {"r1"}, {})->output(0);
  AttrMap pool{{"kernel_shape", Attribute(Ints{2, 2})}, {"strides", Attribute(Ints{2, 2})}};
  Value* p = g->add_node(OpKind::MaxPool, {pair(r1, 0.01f, 0, "r1")}, {"p"}, pool)->output(0);
  Value* pq = pair(p, 0.01f, 0, "p");
  Value* c2 = g->add_node(OpKind::Conv, {pq, weights(8, 16, "c2")}, {"c2"}, conv)->output(0);
  Value* y = pair(c2, 0.03f, 128, "y");
  if (pooled_read_elsewhere) y = g->add_node(OpKind::Add, {y, g->add_node(OpKind::Slice, {pq,
      g->add_constant("st", Tensor::from_vector<int64_t>({0}, {1})), g->add_constant("en", Tensor::from_vector<int64_t>({8}, {1})),
      g->add_constant("ax", Tensor::from_vector<int64_t>({1}, {1}))}, {"sl"}, {})->output(0)}, {"sum"}, {})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  optimize(*g, 1);
  return g;
}

int count_op(const Graph& g, OpKind op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

// The graph's run at fp32 with the pairs kept (CUVIL_QDQ_BYPASS=0) and left out.
std::pair<std::vector<Tensor>, std::vector<Tensor>> kept_and_bypassed(const std::shared_ptr<Graph>& g, const Tensor& x,
                                                                      int* pairs_left) {
  ExecutorOptions o;
  setenv("CUVIL_QDQ_BYPASS", "0", 1);
  Executor kept(g, o);
  unsetenv("CUVIL_QDQ_BYPASS");
  Executor bypassed(g, o);
  *pairs_left = count_op(bypassed.graph(), OpKind::FusedKernel);
  return {kept.run({x}), bypassed.run({x})};
}

TEST(QdqModelInt8, PairsInFrontOfInt8LayersAreLeftOut) {
  if (!vnni()) GTEST_SKIP() << "no VNNI: QDQ layers keep f32, nothing links";
  Tensor x = random_tensor({1, 8, 10, 12}, 7, -2.f, 2.f);
  for (bool elsewhere : {false, true}) {
    auto g = qdq_model(elsewhere);
    int before = count_op(*g, OpKind::FusedKernel);
    int left = 0;
    auto [kept, bypassed] = kept_and_bypassed(g, x, &left);
    // the input's pair -> Transpose (layout) -> Conv: gone; r1 pair -> MaxPool -> p pair -> Conv: both gone, or
    // (the pooled value read by the Slice too) the first gone and the second kept; the output's pair stays (a
    // graph output)
    EXPECT_EQ(left, before - (elsewhere ? 2 : 3)) << "before " << before;
    ASSERT_EQ(kept[0].shape(), bypassed[0].shape());
    // the same grid arithmetic, x / s against x * (1 / s): at most one step of the output grid apart, rarely
    int far = 0;
    for (int64_t i = 0; i < kept[0].numel(); ++i) {
      float d = std::abs(kept[0].data<float>()[i] - bypassed[0].data<float>()[i]);
      EXPECT_LE(d, 0.03f * 1.001f + (elsewhere ? 0.01f * 1.001f : 0.f)) << i;
      far += d > 0;
    }
    EXPECT_LE(far, kept[0].numel() / 50) << "elements off by a step";
  }
}

}  // namespace

namespace {

// A C API session of a QDQ model's artifact runs its QDQ layers int8 as the default executor does (the marks are
// in the saved graph), and one saved after keep_model_int8_in_f32 computes the QDQ graph in f32.
std::vector<float> run_c_api(const std::shared_ptr<Graph>& g, const Tensor& x) {
  artifact::SaveInput in;
  in.graph = g;
  std::string bytes = artifact::serialize(in);
  cuvil_status* st = nullptr;
  cuvil_session_options o = CUVIL_SESSION_OPTIONS_INIT;
  o.threads = 1;
  cuvil_session* s = cuvil_session_create_from_memory(bytes.data(), bytes.size(), &o, &st);
  EXPECT_NE(s, nullptr) << cuvil_status_message(st);
  if (!s) return {};
  Tensor y = Executor(g, ExecutorOptions{}).run({x})[0];
  std::vector<float> out(size_t(y.numel()));
  std::vector<int64_t> xd(x.shape().begin(), x.shape().end()), yd(y.shape().begin(), y.shape().end());
  Tensor xc = x;  // (the C API takes a non-const pointer)
  cuvil_tensor ti = CUVIL_TENSOR_INIT, to = CUVIL_TENSOR_INIT;
  ti.rank = int32_t(xd.size()), ti.dims = xd.data(), ti.data = xc.data<float>(), ti.bytes = size_t(x.nbytes());
  to.rank = int32_t(yd.size()), to.dims = yd.data(), to.data = out.data(), to.bytes = out.size() * 4;
  EXPECT_EQ(cuvil_session_run(s, &ti, 1, &to, 1, &st), CUVIL_OK) << cuvil_status_message(st);
  cuvil_session_free(s);
  return out;
}

TEST(QdqModelInt8, CApiSessionsRunTheMarks) {
  Tensor x = random_tensor({1, 8, 10, 12}, 7, -2.f, 2.f);
  auto g = qdq_model(false);
  ExecutorOptions o;
  o.threads = 1;
  Tensor want = Executor(g, o).run({x})[0];
  std::vector<float> got = run_c_api(g, x);
  ASSERT_EQ(int64_t(got.size()), want.numel());
  EXPECT_EQ(std::memcmp(got.data(), want.raw(), want.nbytes()), 0);
  auto f32 = clone_graph(*g);
  ASSERT_GT(keep_model_int8_in_f32(*f32), 0);
  Tensor want32 = Executor(f32, o).run({x})[0];
  std::vector<float> got32 = run_c_api(f32, x);
  ASSERT_EQ(int64_t(got32.size()), want32.numel());
  EXPECT_EQ(std::memcmp(got32.data(), want32.raw(), want32.nbytes()), 0);
  if (vnni()) EXPECT_NE(std::memcmp(got32.data(), got.data(), want.nbytes()), 0);
}

}  // namespace
