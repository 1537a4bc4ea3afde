// u8 activations between int8 layers (runtime/int8_links.h): which values link, the int8 kernels writing and
// reading u8 on a grid (against the same arithmetic done in f32 and quantized by onednn::quantize_u8), and the
// boundary kernel where a linked layer cannot run int8 (against the reference kernels with the u8 round trip).
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cstdlib>
#include <random>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "runtime/executor.h"
#include "runtime/int8_links.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::test::int8;

namespace {

using Ints = std::vector<int64_t>;

AttrMap conv(float x_scale, int64_t zp, const char* act = "Relu") {
  AttrMap a{{"pads", Attribute(Ints{1, 1, 1, 1})},
            {"channels_last", Attribute(int64_t(1))},
            {"quant_x_scale", Attribute(double(x_scale))},
            {"quant_x_zero_point", Attribute(zp)}};
  if (act) a["activation"] = Attribute(act);
  return a;
}

// x -> FusedConv(a1) -> FusedConv(a2) -> y, NHWC 3x3 layers; `extra_output` also makes the middle value an output.
std::shared_ptr<Graph> conv_chain(const AttrMap& a1, const AttrMap& a2, bool extra_output = false) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 9, 11, 8})});
  Value* w1 = g->add_constant("w1", random_tensor({12, 8, 3, 3}, 2));
  Value* b1 = g->add_constant("b1", random_tensor({12}, 3));
  Value* w2 = g->add_constant("w2", random_tensor({6, 12, 3, 3}, 4));
  Value* b2 = g->add_constant("b2", random_tensor({6}, 5));
  Value* h = g->add_node(OpKind::FusedConv, {x, w1, b1}, {"h"}, a1)->output(0);
  Value* y = g->add_node(OpKind::FusedConv, {h, w2, b2}, {"y"}, a2)->output(0);
  g->add_output(y);
  if (extra_output) g->add_output(h);
  infer_shapes(*g);
  verify(*g);
  return g;
}

// Runs g at int8 with the links off (CUVIL_INT8_LINKS=0), restoring the environment.
std::vector<Tensor> run_unlinked(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& in,
                                 ExecutorOptions o = int8_options()) {
  setenv("CUVIL_INT8_LINKS", "0", 1);
  Executor ex(g, o);
  unsetenv("CUVIL_INT8_LINKS");
  EXPECT_EQ(count_int8_links(ex.graph()), 0);
  return ex.run(in);
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  if (a.dtype() == DType::f32)
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << "element " << i;
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

TEST(Int8Links, LinksOnlyWhereEveryReaderTakesTheSameGrid) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  Tensor x = random_tensor({1, 9, 11, 8}, 1);
  auto linked = [&](const std::shared_ptr<Graph>& g) { return count_int8_links(Executor(g, int8_options()).graph()); };
  EXPECT_EQ(linked(conv_chain(conv(2.f / 255, 128), conv(0.02f, 0))), 1);
  // the middle value is also a graph output: it stays f32
  EXPECT_EQ(linked(conv_chain(conv(2.f / 255, 128), conv(0.02f, 0), true)), 0);
  // the reader is not calibrated
  AttrMap plain = conv(0.02f, 0);
  plain.erase("quant_x_scale");
  EXPECT_EQ(linked(conv_chain(conv(2.f / 255, 128), plain)), 0);
  // the producer is not calibrated: it runs f32 and writes f32
  AttrMap first = conv(2.f / 255, 128);
  first.erase("quant_x_scale");
  EXPECT_EQ(linked(conv_chain(first, conv(0.02f, 0))), 0);
  // fp32 and bf16 executors never link
  ExecutorOptions bf16;
  bf16.kernels.precision = Precision::bf16;
  EXPECT_EQ(count_int8_links(Executor(conv_chain(conv(2.f / 255, 128), conv(0.02f, 0)), bf16).graph()), 0);
  EXPECT_EQ(count_int8_links(Executor(conv_chain(conv(2.f / 255, 128), conv(0.02f, 0))).graph()), 0);
}

// Two readers on different grids, or one reading the value as its residual sum: no link.
TEST(Int8Links, MixedReadersStayF32) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 7, 7, 8})});
  Value* w = g->add_constant("w", random_tensor({8, 8, 3, 3}, 2));
  Value* h = g->add_node(OpKind::FusedConv, {x, w}, {"h"}, conv(2.f / 255, 128))->output(0);
  Value* a = g->add_node(OpKind::FusedConv, {h, w}, {"a"}, conv(0.02f, 0))->output(0);
  Value* b = g->add_node(OpKind::FusedConv, {h, w}, {"b"}, conv(0.03f, 0))->output(0);
  Value* c = g->add_node(OpKind::FusedConv, {a, w, nullptr, b}, {"c"}, conv(0.02f, 0))->output(0);
  g->add_output(c);
  infer_shapes(*g);
  verify(*g);
  // c writes the graph's output: that stays f32, but c runs int8 whatever lower_final_outputs says, so its X links
  ExecutorOptions o = int8_options();
  o.kernels.lower_final_outputs = false;
  EXPECT_EQ(count_int8_links(Executor(g, o).graph()), 1);
  EXPECT_EQ(Executor(g, o).graph().outputs()[0]->dtype(), DType::f32);
  o.kernels.lower_final_outputs = true;
  Executor ex(g, o);
  // h: two grids; b: read as a sum; a -> c's X: linked
  EXPECT_EQ(count_int8_links(ex.graph()), 1);
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  std::vector<Tensor> in{random_tensor({1, 7, 7, 8}, 9)};
  expect_same(ex.run(in)[0], run_unlinked(g, in, o)[0]);
}

// The producer requantizes with the same float operations the reader's quantization pass does (output scale,
// activation, 1 / y_scale, + zero point, round to nearest even), so linking changes no bit of the result.
TEST(Int8Links, LinkedConvolutionsEqualUnlinked) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  for (auto [zp, act] : {std::pair<int64_t, const char*>{0, "Relu"}, {128, nullptr}, {90, "Sigmoid"}}) {
    SCOPED_TRACE(std::to_string(zp) + (act ? act : ""));
    auto g = conv_chain(conv(2.f / 255, 128, act), conv(act && std::string(act) == "Relu" ? 0.03f : 0.02f, zp));
    std::vector<Tensor> in{random_tensor({1, 9, 11, 8}, 7)};
    ExecutorOptions o = int8_options();
    o.kernels.lower_final_outputs = true;
    Executor ex(g, o);
    ASSERT_EQ(count_int8_links(ex.graph()), 1);
    std::vector<NodeTime> prof = ex.profile(in);
    for (const NodeTime& t : prof) EXPECT_EQ(t.precision.precision, Precision::int8) << t.precision.reason;
    expect_same(ex.run(in)[0], run_unlinked(g, in, o)[0]);
  }
}

// An inverted residual block (MobileNetV2's): 1x1 expand -> depthwise 3x3 (stride 2) -> 1x1 project. The grouped
// layer links both ways and runs int8 on u8 in and out; with CUVIL_GROUPED_LINKS=0 (as before) it runs f32 and
// nothing around it links. Against fp32 within the grids' error; the grouped int8 kernel itself is checked
// against the quantized reference in int8_kernels_test (GroupedConvolutionsOnU8Activations).
TEST(Int8Links, GroupedLayerLinksBothWays) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 11, 13, 8})});
  AttrMap expand = conv(2.f / 255, 128, "Relu"), dw = conv(1.5f / 255, 0, "Relu"), project = conv(1.f / 255, 0, nullptr);
  expand["pads"] = Attribute(Ints{0, 0, 0, 0});
  project["pads"] = Attribute(Ints{0, 0, 0, 0});
  dw["group"] = Attribute(int64_t(24));
  dw["strides"] = Attribute(Ints{2, 2});
  Value* h = g->add_node(OpKind::FusedConv, {x, g->add_constant("we", random_tensor({24, 8, 1, 1}, 2, -.4f, .4f))},
                         {"h"}, expand)->output(0);
  Value* d = g->add_node(OpKind::FusedConv, {h, g->add_constant("wd", random_tensor({24, 1, 3, 3}, 3, -.4f, .4f)),
                                             g->add_constant("bd", random_tensor({24}, 4, -.1f, .1f))},
                         {"d"}, dw)->output(0);
  Value* y = g->add_node(OpKind::FusedConv, {d, g->add_constant("wp", random_tensor({7, 24, 1, 1}, 5, -.4f, .4f))},
                         {"y"}, project)->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  if (!machine_has_vnni()) {
    EXPECT_EQ(count_int8_links(Executor(g, int8_options()).graph()), 0);
    GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  }
  Executor ex(g, int8_options());
  EXPECT_EQ(count_int8_links(ex.graph()), 2);  // h and d
  std::vector<Tensor> in{random_tensor({1, 11, 13, 8}, 9)};
  for (const NodeTime& t : ex.profile(in)) EXPECT_EQ(t.precision.precision, Precision::int8) << t.precision.reason;
  setenv("CUVIL_GROUPED_LINKS", "0", 1);
  Executor before(g, int8_options());
  unsetenv("CUVIL_GROUPED_LINKS");
  EXPECT_EQ(count_int8_links(before.graph()), 0);
  std::vector<NodeTime> prof = before.profile(in);
  EXPECT_EQ(prof[1].precision.precision, Precision::fp32);
  EXPECT_EQ(prof[1].precision.reason.rfind("grouped convolution", 0), 0u) << prof[1].precision.reason;
  Tensor got = ex.run(in)[0], ref = run_graph(g, in)[0], old = before.run(in)[0];
  auto rel = [&](const Tensor& a) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      double e = double(a.data<float>()[i]) - ref.data<float>()[i];
      num += e * e, den += double(ref.data<float>()[i]) * ref.data<float>()[i];
    }
    return std::sqrt(num / den);
  };
  // three u8 grids of about 1/255 of their ranges, s8 weights: a few percent; d's grid adds one rounding to before's
  EXPECT_GT(rel(got), 0);
  EXPECT_LT(rel(got), 0.05);
  EXPECT_LT(rel(got), 2 * rel(old) + 0.01);
}

TEST(Int8Links, LinkedProductsEqualUnlinked) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({2, 13, 40})});
  Value* w1 = g->add_constant("w1", random_tensor({40, 64}, 2));
  Value* b1 = g->add_constant("b1", random_tensor({64}, 3));
  Value* w2 = g->add_constant("w2", random_tensor({64, 24}, 4));
  AttrMap a1{{"quant_x_scale", Attribute(2.0 / 255)}, {"quant_x_zero_point", Attribute(int64_t(128))},
             {"activation", Attribute("Gelu")}};
  AttrMap a2{{"quant_x_scale", Attribute(1.5 / 255)}, {"quant_x_zero_point", Attribute(int64_t(30))}};
  Value* h = g->add_node(OpKind::FusedMatMul, {x, w1, b1}, {"h"}, a1)->output(0);
  g->add_output(g->add_node(OpKind::FusedMatMul, {h, w2}, {"y"}, a2)->output(0));
  infer_shapes(*g);
  verify(*g);
  ExecutorOptions o = int8_options();
  o.kernels.lower_final_outputs = true;
  Executor ex(g, o);
  ASSERT_EQ(count_int8_links(ex.graph()), 1);
  EXPECT_EQ(ex.graph().nodes()[0]->output(0)->dtype(), DType::u8);
  std::vector<Tensor> in{random_tensor({2, 13, 40}, 8)};
  expect_same(ex.run(in)[0], run_unlinked(g, in, o)[0]);
}

// The int8 kernels alone: a u8 output against the f32 output quantized (at most one grid step apart, where the
// two round a value near a half step differently), a u8 input against the same values given as f32.
TEST(Int8Links, KernelsWriteAndReadU8) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI";
  ExecutorOptions o = int8_options();
  o.kernels.lower_final_outputs = true;
  Tensor x = random_tensor({1, 9, 11, 8}, 11), w = random_tensor({12, 8, 3, 3}, 12), b = random_tensor({12}, 13);
  AttrMap a = conv(2.f / 255, 128, "Gelu");
  OneOp f32_out = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b)}, a);
  Tensor y = Executor(f32_out.g, o).run(f32_out.feeds)[0];
  const float ys = 0.05f;
  const int32_t yzp = 37;
  a["quant_y_scale"] = Attribute(double(ys));
  a["quant_y_zero_point"] = Attribute(int64_t(yzp));
  OneOp u8_out = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b)}, a);
  ASSERT_EQ(u8_out.g->outputs()[0]->dtype(), DType::u8);
  Executor ex(u8_out.g, o);
  EXPECT_EQ(ex.profile(u8_out.feeds)[0].precision.precision, Precision::int8);
  Tensor q = ex.run(u8_out.feeds)[0];
  int exact = 0, saturated = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    int want = onednn::quantize_u8(y.data<float>()[i], 1.f / ys, yzp), got = q.data<uint8_t>()[i];
    ASSERT_LE(std::abs(got - want), 1) << "element " << i;
    exact += got == want;
    saturated += want == 0 || want == 255;
  }
  EXPECT_GE(exact, q.numel() * 99 / 100);
  EXPECT_LT(saturated, q.numel() / 10);

  // u8 in: the same as the dequantized values in f32 (which the kernel quantizes back to the same u8)
  Tensor qx = Tensor::zeros(DType::u8, x.shape()), dx = x.clone();
  for (int64_t i = 0; i < x.numel(); ++i) {
    qx.data<uint8_t>()[i] = onednn::quantize_u8(x.data<float>()[i], 255.f / 2, 128);
    dx.data<float>()[i] = float(int32_t(qx.data<uint8_t>()[i]) - 128) * (2.f / 255);
  }
  AttrMap in_attrs = conv(2.f / 255, 128, "Relu");
  OneOp from_u8 = build_op(OpKind::FusedConv, {input(qx), constant(w), constant(b)}, in_attrs);
  OneOp from_f32 = build_op(OpKind::FusedConv, {input(dx), constant(w), constant(b)}, in_attrs);
  expect_same(Executor(from_u8.g, o).run(from_u8.feeds)[0], Executor(from_f32.g, o).run(from_f32.feeds)[0]);
  // bad grids are clear errors
  a["quant_y_zero_point"] = Attribute(int64_t(256));
  OneOp bad = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b)}, a);
  EXPECT_CUVIL_ERROR(Executor(bad.g, o).run(bad.feeds), "quant_y_zero_point must be in 0..255");
}

// Where a linked layer cannot run int8 (here: FusedConv forced onto the reference kernels), the boundary kernel
// converts around its f32 kernel: exactly the reference on the u8 round trip of the middle value.
TEST(Int8Links, BoundaryKernelComputesTheRoundTrip) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 layers keep f32, so nothing links";
  AttrMap a1 = conv(2.f / 255, 128, "Relu"), a2 = conv(0.02f, 3, nullptr);
  auto g = conv_chain(a1, a2);
  ExecutorOptions o = int8_options();
  o.kernels.reference_ops = {OpKind::FusedConv};
  Executor ex(g, o);
  ASSERT_EQ(count_int8_links(ex.graph()), 1);
  Tensor x = random_tensor({1, 9, 11, 8}, 21);
  std::vector<NodeTime> prof = ex.profile({x});
  ASSERT_EQ(prof.size(), 2u);
  EXPECT_NE(prof[0].precision.reason.find("u8 activations converted around it"), std::string::npos)
      << prof[0].precision.reason;
  Tensor got = ex.run({x})[0];

  // the same in steps on the reference kernels
  const Graph& src = *g;
  auto one = [&](size_t i, const Tensor& in) {
    const Node& n = *src.nodes()[i];
    std::vector<OpArg> args{input(in)};
    for (size_t k = 1; k < n.num_inputs(); ++k) args.push_back(constant(n.input(k)->constant()));
    OneOp op = build_op(n.op(), args, n.attrs());
    return Executor(op.g, reference_kernels()).run(op.feeds)[0];
  };
  Tensor h = one(0, x);
  for (int64_t i = 0; i < h.numel(); ++i) {
    uint8_t q = onednn::quantize_u8(h.data<float>()[i], 1.f / 0.02f, 3);
    h.data<float>()[i] = float(int32_t(q) - 3) * 0.02f;
  }
  expect_same(got, one(1, h));
}

}  // namespace
