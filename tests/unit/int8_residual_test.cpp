// Linked residuals (runtime/int8_links.h): an int8 convolution reading its residual sum as u8 on the sum's grid
// (quant_sum_scale / quant_sum_zero_point), into a u8 or an f32 output, against the same layer given the
// dequantized residual in f32; the boundary kernel's conversion of a u8 sum; and the links a ResNet-like block
// gets.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cstdlib>
#include <random>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "runtime/calibration.h"
#include "runtime/executor.h"
#include "runtime/int8_links.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::test::int8;

namespace {

using Ints = std::vector<int64_t>;

AttrMap conv(float x_scale, int64_t zp, const char* act = "Relu", bool pad = true) {
  AttrMap a{{"channels_last", Attribute(int64_t(1))},
            {"quant_x_scale", Attribute(double(x_scale))},
            {"quant_x_zero_point", Attribute(zp)}};
  if (pad) a["pads"] = Attribute(Ints{1, 1, 1, 1});
  if (act) a["activation"] = Attribute(act);
  return a;
}

// q on the grid, and its dequantized value as the kernels compute it.
void quantize(const Tensor& f, float scale, int32_t zp, Tensor* q, Tensor* deq) {
  *q = Tensor::zeros(DType::u8, f.shape());
  *deq = f.clone();
  for (int64_t i = 0; i < f.numel(); ++i) {
    uint8_t v = onednn::quantize_u8(f.data<float>()[i], 1.f / scale, zp);
    q->data<uint8_t>()[i] = v;
    deq->data<float>()[i] = float(int32_t(v) - zp) * scale;
  }
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

// A u8 residual into an f32 output is dequantized into it first: bit-identical to the dequantized f32 residual.
// Into a u8 output the sum post-op reads it on its grid: within one output step of the f32 result quantized.
TEST(Int8Residual, KernelAddsAU8Sum) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  ExecutorOptions o = int8_options();
  Tensor x = random_tensor({1, 9, 11, 8}, 1), w = random_tensor({12, 8, 3, 3}, 2), b = random_tensor({12}, 3);
  Tensor sum_f = random_tensor({1, 9, 11, 12}, 4, -2.f, 3.f), qs, ds;
  const float ss = 5.f / 255;
  const int32_t szp = 102;
  quantize(sum_f, ss, szp, &qs, &ds);
  for (const char* act : {"Relu", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(act ? act : "no activation");
    AttrMap a = conv(2.f / 255, 128, act);
    OneOp ref = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(ds)}, a);
    Tensor want = Executor(ref.g, o).run(ref.feeds)[0];
    a["quant_sum_scale"] = Attribute(double(ss));
    a["quant_sum_zero_point"] = Attribute(int64_t(szp));
    OneOp f32_out = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(qs)}, a);
    Executor ex(f32_out.g, o);
    EXPECT_EQ(ex.profile(f32_out.feeds)[0].precision.precision, Precision::int8);
    expect_same(ex.run(f32_out.feeds)[0], want);

    const int32_t yzp = act ? 0 : 120;  // (no activation: a wider grid, few values saturate)
    const float ys = act ? 0.04f : 0.08f;
    a["quant_y_scale"] = Attribute(double(ys));
    a["quant_y_zero_point"] = Attribute(int64_t(yzp));
    OneOp u8_out = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(qs)}, a);
    ASSERT_EQ(u8_out.g->outputs()[0]->dtype(), DType::u8);
    Executor eu(u8_out.g, o);
    EXPECT_EQ(eu.profile(u8_out.feeds)[0].precision.precision, Precision::int8);
    Tensor q = eu.run(u8_out.feeds)[0];
    int exact = 0, saturated = 0;
    for (int64_t i = 0; i < q.numel(); ++i) {
      int wq = onednn::quantize_u8(want.data<float>()[i], 1.f / ys, yzp), got = q.data<uint8_t>()[i];
      ASSERT_LE(std::abs(got - wq), 1) << "element " << i;
      exact += got == wq;
      saturated += wq == 255 || (wq == 0 && yzp > 0);
    }
    EXPECT_GE(exact, q.numel() * 99 / 100);
    EXPECT_LT(saturated, q.numel() / 10);
  }
  // an f32 residual into a u8 output: the f32 result quantized, bit for bit
  AttrMap a = conv(2.f / 255, 128, "Relu");
  OneOp ref = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum_f)}, a);
  Tensor want = Executor(ref.g, o).run(ref.feeds)[0];
  a["quant_y_scale"] = Attribute(0.03);
  a["quant_y_zero_point"] = Attribute(int64_t(0));
  OneOp u8_out = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum_f)}, a);
  Tensor q = Executor(u8_out.g, o).run(u8_out.feeds)[0];
  ASSERT_EQ(q.dtype(), DType::u8);
  for (int64_t i = 0; i < q.numel(); ++i)
    ASSERT_EQ(q.data<uint8_t>()[i], onednn::quantize_u8(want.data<float>()[i], 1.f / 0.03f, 0)) << "element " << i;
  // a u8 sum without its grid is an error of the graph
  AttrMap bad = conv(2.f / 255, 128);
  OneOp op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(qs)}, bad);
  EXPECT_THROW(op.infer(), Error);
}

// The boundary kernel (a linked layer on the reference kernels) dequantizes a u8 sum exactly as the int8 kernel.
TEST(Int8Residual, BoundaryKernelDequantizesTheSum) {
  ExecutorOptions o = int8_options();
  o.kernels.reference_ops = {OpKind::FusedConv};
  Tensor x = random_tensor({1, 5, 6, 8}, 11), w = random_tensor({4, 8, 3, 3}, 12), sum_f = random_tensor({1, 5, 6, 4}, 13);
  Tensor qs, ds;
  quantize(sum_f, 0.01f, 90, &qs, &ds);
  AttrMap a = conv(2.f / 255, 128);
  OneOp ref = build_op(OpKind::FusedConv, {input(x), constant(w), absent(), input(ds)}, a);
  a["quant_sum_scale"] = Attribute(0.01);
  a["quant_sum_zero_point"] = Attribute(int64_t(90));
  OneOp got = build_op(OpKind::FusedConv, {input(x), constant(w), absent(), input(qs)}, a);
  Executor ex(got.g, o);
  EXPECT_NE(ex.profile(got.feeds)[0].precision.reason.find("u8 activations converted around it"), std::string::npos);
  expect_same(ex.run(got.feeds)[0], Executor(ref.g, o).run(ref.feeds)[0]);
}

// Two bottleneck-like blocks: x -> A -> h; h -> B -> C(+h) -> r; r -> D -> E(+r) -> y. h and r link as X of B / D
// and as C's / E's residual; every layer stays int8, and the linked model matches the unlinked one within what
// quantizing the residuals on their readers' grids costs.
TEST(Int8Residual, BlocksLinkTheirResiduals) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 8, 8, 16})});
  auto w = [&](const char* n, uint32_t seed) { return g->add_constant(n, random_tensor({16, 16, 1, 1}, seed, -.3f, .3f)); };
  auto node = [&](const char* name, std::vector<Value*> in, AttrMap a) {
    return g->add_node(OpKind::FusedConv, std::move(in), {name}, std::move(a))->output(0);
  };
  Value* h = node("h", {x, w("wa", 1)}, conv(4.f / 255, 128, "Relu", false));
  Value* bb = node("b", {h, w("wb", 2)}, conv(1.5f / 255, 0, "Relu", false));
  Value* r = node("r", {bb, w("wc", 3), nullptr, h}, conv(1.f / 255, 0, "Relu", false));
  Value* d = node("d", {r, w("wd", 4)}, conv(2.5f / 255, 0, "Relu", false));
  Value* y = node("y", {d, w("we", 5), nullptr, r}, conv(1.2f / 255, 0, "Relu", false));
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  ExecutorOptions o = int8_options();
  o.kernels.lower_final_outputs = false;  // y (a graph output) stays f32: E reads d and r as u8 into it
  Executor ex(g, o);
  // h, b, r, d are u8 (E writes the final output in f32 from its u8 inputs); C and E read their residual on its grid
  EXPECT_EQ(count_int8_links(ex.graph()), 4);
  int sums = 0;
  for (const auto& n : ex.graph().nodes()) sums += n->has_attr("quant_sum_scale") && n->attr("quant_sum_scale").f() > 0;
  EXPECT_EQ(sums, 2);
  setenv("CUVIL_INT8_LINKS", "x", 1);  // X links only: b alone (h and r are read as sums)
  EXPECT_EQ(count_int8_links(Executor(g, o).graph()), 2);  // b and d
  unsetenv("CUVIL_INT8_LINKS");
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  std::vector<Tensor> in{random_tensor({1, 8, 8, 16}, 9)};
  int int8_layers = 0;
  for (const NodeTime& t : ex.profile(in)) int8_layers += t.precision.precision == Precision::int8;
  EXPECT_EQ(int8_layers, 5);  // y too: its output is f32, its product u8 x s8
  Tensor got = ex.run(in)[0];
  setenv("CUVIL_INT8_LINKS", "0", 1);
  Executor unlinked(g, o);
  unsetenv("CUVIL_INT8_LINKS");
  Tensor want = unlinked.run(in)[0];
  // h on B's grid (4/255) and r on D's (2.5/255): half a step each, through at most two layers of |w| <= 0.3 x 16.
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double gv = got.data<float>()[i], wv = want.data<float>()[i];
    num += (gv - wv) * (gv - wv), den += wv * wv;
  }
  EXPECT_LE(std::sqrt(num / den), 0.05);
}

// A value read only as a residual (the first block of a ResNet stage: C adds B's output t) has no calibrated grid:
// it stays f32, and C, whose output r D reads as X, quantizes after its primitive: bit-identical to unlinked.
TEST(Int8Residual, SumOnlyValueStaysF32) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 8, 8, 16})});
  auto w = [&](const char* n, uint32_t seed) { return g->add_constant(n, random_tensor({16, 16, 1, 1}, seed, -.3f, .3f)); };
  auto node = [&](const char* name, std::vector<Value*> in, AttrMap a) {
    return g->add_node(OpKind::FusedConv, std::move(in), {name}, std::move(a))->output(0);
  };
  Value* h = node("h", {x, w("wa", 1)}, conv(4.f / 255, 128, "Relu", false));
  Value* t = node("t", {h, w("wb", 2)}, conv(3.f / 255, 0, nullptr, false));
  Value* r = node("r", {h, w("wc", 3), nullptr, t}, conv(3.f / 255, 0, "Relu", false));
  g->add_output(node("y", {r, w("wd", 4)}, conv(2.f / 255, 0, "Relu", false)));
  infer_shapes(*g);
  verify(*g);
  ExecutorOptions o = int8_options();
  Executor ex(g, o);
  EXPECT_EQ(count_int8_links(ex.graph()), 2);  // h and r; t stays f32
  EXPECT_EQ(ex.graph().nodes()[1]->output(0)->dtype(), DType::f32);
  EXPECT_EQ(ex.graph().nodes()[2]->output(0)->dtype(), DType::u8);
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  std::vector<Tensor> in{random_tensor({1, 8, 8, 16}, 9)};
  for (const NodeTime& nt : ex.profile(in)) EXPECT_EQ(nt.precision.precision, Precision::int8) << nt.precision.reason;
  setenv("CUVIL_INT8_LINKS", "0", 1);
  Executor unlinked(g, o);
  unsetenv("CUVIL_INT8_LINKS");
  expect_same(ex.run(in)[0], unlinked.run(in)[0]);
}

// Calibration gives a residual read only as a sum its own grid (quant_sum_scale on its reader): then it links
// too, and the model stays within that grid's half step of the unlinked one.
TEST(Int8Residual, CalibratedSumOnlyValueLinks) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 8, 8, 16})});
  auto w = [&](const char* n, uint32_t seed) { return g->add_constant(n, random_tensor({16, 16, 1, 1}, seed, -.3f, .3f)); };
  Value* h = g->add_node(OpKind::FusedConv, {x, w("wa", 1)}, {"h"}, AttrMap{{"channels_last", Attribute(int64_t(1))},
                                                                               {"activation", Attribute("Relu")}})
                 ->output(0);
  Value* t = g->add_node(OpKind::FusedConv, {h, w("wb", 2)}, {"t"}, AttrMap{{"channels_last", Attribute(int64_t(1))}})
                 ->output(0);
  Value* r = g->add_node(OpKind::FusedConv, {h, w("wc", 3), nullptr, t}, {"r"},
                         AttrMap{{"channels_last", Attribute(int64_t(1))}, {"activation", Attribute("Relu")}})
                 ->output(0);
  g->add_output(g->add_node(OpKind::FusedConv, {r, w("wd", 4)}, {"y"}, AttrMap{{"channels_last", Attribute(int64_t(1))}})
                    ->output(0));
  infer_shapes(*g);
  verify(*g);
  ASSERT_EQ(quant_sum_targets(*g).size(), 1u);
  std::vector<std::vector<Tensor>> samples;
  for (uint32_t i = 0; i < 3; ++i) samples.push_back({random_tensor({1, 8, 8, 16}, 20 + i)});
  calibrate_minmax(g, ExecutorOptions{}, samples);
  const Node& rn = *g->nodes()[2];
  ASSERT_GT(rn.attr("quant_sum_scale").f(), 0.0);
  EXPECT_GT(rn.attr("quant_sum_zero_point").i(), 0);  // t has no activation: negative values on the grid
  ExecutorOptions o = int8_options();
  Executor ex(g, o);
  EXPECT_EQ(count_int8_links(ex.graph()), 3);  // h, t (on its calibrated grid), r
  EXPECT_EQ(ex.graph().nodes()[1]->output(0)->dtype(), DType::u8);
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  std::vector<Tensor> in{random_tensor({1, 8, 8, 16}, 21)};
  for (const NodeTime& nt : ex.profile(in)) EXPECT_EQ(nt.precision.precision, Precision::int8) << nt.precision.reason;
  setenv("CUVIL_INT8_LINKS", "0", 1);
  Executor unlinked(g, o);
  unsetenv("CUVIL_INT8_LINKS");
  Tensor got = ex.run(in)[0], want = unlinked.run(in)[0];
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double gv = got.data<float>()[i], wv = want.data<float>()[i];
    num += (gv - wv) * (gv - wv), den += wv * wv;
  }
  EXPECT_LE(std::sqrt(num / den), 0.05);
  EXPECT_GT(num, 0.0);  // (t was quantized: not the unlinked model bit for bit)
}

// A MaxPool between int8 layers (the ResNet stem) passes u8 through: the stem writes u8 on its readers' grid and
// the pool runs on u8, bit-identical to pooling f32 and quantizing (max commutes with the monotone quantization).
TEST(Int8Residual, MaxPoolPassesU8) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  for (int64_t zp : {int64_t(0), int64_t(77)}) {
    SCOPED_TRACE(zp);
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 12, 13, 8})});
    Value* w1 = g->add_constant("w1", random_tensor({16, 8, 3, 3}, 1, -.3f, .3f));
    Value* w2 = g->add_constant("w2", random_tensor({16, 16, 1, 1}, 2, -.3f, .3f));
    Value* w3 = g->add_constant("w3", random_tensor({16, 16, 1, 1}, 3, -.3f, .3f));
    Value* h = g->add_node(OpKind::FusedConv, {x, w1}, {"h"}, conv(2.f / 255, 128, zp ? nullptr : "Relu"))->output(0);
    AttrMap pool{{"kernel_shape", Attribute(Ints{3, 3})}, {"strides", Attribute(Ints{2, 2})},
                 {"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))}};
    Value* p = g->add_node(OpKind::MaxPool, {h}, {"p"}, pool)->output(0);
    Value* a = g->add_node(OpKind::FusedConv, {p, w2}, {"a"}, conv(3.f / 255, zp, "Relu", false))->output(0);
    Value* y = g->add_node(OpKind::FusedConv, {p, w3, nullptr, a}, {"y"}, conv(3.f / 255, zp, "Relu", false))->output(0);
    g->add_output(y);
    infer_shapes(*g);
    verify(*g);
    ExecutorOptions o = int8_options();  // (y, the final layer, int8 too: it reads the pooled u8 as X)
    Executor ex(g, o);
    EXPECT_EQ(count_int8_links(ex.graph()), 1);  // h (through the pool); a is read only as y's sum
    EXPECT_EQ(ex.graph().nodes()[1]->output(0)->dtype(), DType::u8);
    if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
    std::vector<Tensor> in{random_tensor({1, 12, 13, 8}, 9)};
    setenv("CUVIL_INT8_LINKS", "0", 1);
    Executor unlinked(g, o);
    unsetenv("CUVIL_INT8_LINKS");
    expect_same(ex.run(in)[0], unlinked.run(in)[0]);
    // and on the reference kernels (the pool there takes u8 too)
    ExecutorOptions r = o;
    r.kernels.reference_ops = {OpKind::MaxPool};
    expect_same(Executor(g, r).run(in)[0], unlinked.run(in)[0]);
  }
}

}  // namespace
