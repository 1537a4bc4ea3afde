// bf16 activations between bf16 convolutions (runtime/bf16_links.h): which values link; a linked chain gives
// exactly the unlinked result (the producer's bf16 destination rounds as the reader's conversion did); residual
// blocks against fp32 within bf16's error; the boundary kernel where a linked layer runs f32.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "runtime/bf16_links.h"
#include "runtime/executor.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;
using int8::random_tensor;

bool machine_has_bf16() {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

ExecutorOptions bf16_options() {
  ExecutorOptions o;
  o.kernels.precision = Precision::bf16;
  return o;
}

AttrMap conv(Ints pads = {1, 1, 1, 1}, const char* act = "Relu") {
  AttrMap a{{"pads", Attribute(pads)}, {"channels_last", Attribute(int64_t(1))}};
  if (act) a["activation"] = Attribute(act);
  return a;
}

double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.data<float>()[i], w = want.data<float>()[i];
    num += (g - w) * (g - w), den += w * w;
  }
  return std::sqrt(num / den);
}

std::vector<Tensor> run_with_links(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& in, bool links,
                                   ExecutorOptions o = bf16_options(), int* count = nullptr) {
  if (!links) setenv("CUVIL_BF16_LINKS", "0", 1);
  Executor ex(g, o);
  unsetenv("CUVIL_BF16_LINKS");
  if (count) *count = count_bf16_links(ex.graph());
  return ex.run(in);
}

// x -> A (3x3) -> h -> B (1x1, no activation) -> y: odd sizes.
std::shared_ptr<Graph> chain(const char* act) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 9, 11, 13})});
  Value* h = g->add_node(OpKind::FusedConv, {x, g->add_constant("w1", random_tensor({17, 13, 3, 3}, 2)),
                                             g->add_constant("b1", random_tensor({17}, 3))},
                         {"h"}, conv({1, 1, 1, 1}, act))->output(0);
  Value* y = g->add_node(OpKind::FusedConv, {h, g->add_constant("w2", random_tensor({7, 17, 1, 1}, 4))}, {"y"},
                         conv({0, 0, 0, 0}, nullptr))->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  return g;
}

// Two bottleneck-like blocks: x -> A -> h; h -> B -> C(+h) -> r; r -> D -> E(+r) -> y (E writes the output).
std::shared_ptr<Graph> blocks() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 7, 5, 24})});
  auto w = [&](const char* n, Ints s, uint32_t seed) { return g->add_constant(n, random_tensor(s, seed, -.3f, .3f)); };
  auto node = [&](const char* name, std::vector<Value*> in, AttrMap a) {
    return g->add_node(OpKind::FusedConv, std::move(in), {name}, std::move(a))->output(0);
  };
  Value* h = node("h", {x, w("wa", {24, 24, 1, 1}, 1)}, conv({0, 0, 0, 0}));
  Value* b = node("b", {h, w("wb", {9, 24, 3, 3}, 2), w("bb", {9}, 7)}, conv());
  Value* r = node("r", {b, w("wc", {24, 9, 1, 1}, 3), nullptr, h}, conv({0, 0, 0, 0}));
  Value* d = node("d", {r, w("wd", {24, 24, 3, 3}, 4)}, conv());
  Value* y = node("y", {d, w("we", {24, 24, 1, 1}, 5), nullptr, r}, conv({0, 0, 0, 0}));
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  return g;
}

TEST(Bf16Links, ChainEqualsUnlinked) {
  if (!machine_has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  for (const char* act : {"Relu", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(act ? act : "no activation");
    auto g = chain(act);
    std::vector<Tensor> in{random_tensor({1, 9, 11, 13}, 9)};
    int links = -1;
    Executor ex(g, bf16_options());
    ASSERT_EQ(count_bf16_links(ex.graph()), 1);
    EXPECT_EQ(ex.graph().nodes()[0]->output(0)->dtype(), DType::bf16);
    EXPECT_EQ(ex.graph().outputs()[0]->dtype(), DType::f32);
    for (const NodeTime& t : ex.profile(in)) EXPECT_EQ(t.precision.precision, Precision::bf16) << t.precision.reason;
    Tensor got = ex.run(in)[0];
    Tensor want = run_with_links(g, in, false, bf16_options(), &links)[0];
    EXPECT_EQ(links, 0);
    // A's bf16 destination rounds to nearest even, as B's conversion of an f32 h did: the same bits
    ASSERT_EQ(got.nbytes(), want.nbytes());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << "rel. L2 " << rel_l2(got, want);
    EXPECT_GT(rel_l2(got, run_graph(g, in)[0]), 0);  // bf16, not f32
  }
}

// x [1, 13, 24] -> P1 (bias, Gelu) -> P2 (transB) -> P3 -> y: products link A to A; P3 writes the graph output,
// which stays f32 at bf16, so P2 -> P3 does not link.
TEST(Bf16Links, ProductChainEqualsUnlinked) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 13, 24})});
  AttrMap gelu{{"activation", Attribute("Gelu")}}, trans{{"transB", Attribute(int64_t(1))}};
  Value* h = g->add_node(OpKind::FusedMatMul, {x, g->add_constant("w1", random_tensor({24, 37}, 2)),
                                               g->add_constant("b1", random_tensor({37}, 3))}, {"h"}, gelu)->output(0);
  Value* k = g->add_node(OpKind::FusedMatMul, {h, g->add_constant("w2", random_tensor({19, 37}, 4))}, {"k"},
                         trans)->output(0);
  Value* y = g->add_node(OpKind::FusedMatMul, {k, g->add_constant("w3", random_tensor({19, 5}, 5))}, {"y"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  std::vector<Tensor> in{random_tensor({1, 13, 24}, 9)};
  Executor ex(g, bf16_options());
  if (!machine_has_bf16()) {
    EXPECT_EQ(count_bf16_links(ex.graph()), 0);
    GTEST_SKIP() << "no AVX512-BF16";
  }
  ASSERT_EQ(count_bf16_links(ex.graph()), 1);
  EXPECT_EQ(ex.graph().nodes()[0]->output(0)->dtype(), DType::bf16);
  std::vector<NodeTime> prof = ex.profile(in);
  ASSERT_EQ(prof.size(), 3u);
  EXPECT_EQ(prof[0].precision.precision, Precision::bf16) << prof[0].precision.reason;
  EXPECT_EQ(prof[1].precision.precision, Precision::bf16) << prof[1].precision.reason;
  EXPECT_EQ(prof[2].precision.reason, "final output stays f32");
  Tensor got = ex.run(in)[0];
  int links = -1;
  Tensor want = run_with_links(g, in, false, bf16_options(), &links)[0];
  EXPECT_EQ(links, 0);
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << "rel. L2 " << rel_l2(got, want);
  double e = rel_l2(got, run_graph(g, in)[0]);
  EXPECT_GT(e, 0);
  EXPECT_LT(e, 2 * std::ldexp(1.0, -8) * 3);
  // P2 on the reference kernels: its f32 kernel between the conversions, the same model within bf16's error
  ExecutorOptions o = bf16_options();
  o.kernels.reference_ops.insert(OpKind::FusedMatMul);
  Executor boundary(g, o);
  ASSERT_EQ(count_bf16_links(boundary.graph()), 1);
  EXPECT_NE(boundary.profile(in)[1].precision.reason.find("(bf16 activations converted around it)"),
            std::string::npos);
  EXPECT_LT(rel_l2(boundary.run(in)[0], run_graph(g, in)[0]), 2 * std::ldexp(1.0, -8) * 3);
}

// A MaxPool between convolutions passes bf16 through: x -> A -> MaxPool (3x3 stride 2, padded) -> B -> y, odd
// sizes; bit-identical to unlinked (max commutes with rounding to bf16). A NaN still propagates.
TEST(Bf16Links, MaxPoolPassesBf16) {
  if (!machine_has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 13, 11, 5})});
  Value* a = g->add_node(OpKind::FusedConv, {x, g->add_constant("wa", random_tensor({16, 5, 3, 3}, 2))}, {"a"},
                         conv({1, 1, 1, 1}, nullptr))->output(0);
  AttrMap pool{{"kernel_shape", Attribute(Ints{3, 3})}, {"strides", Attribute(Ints{2, 2})},
               {"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))}};
  Value* p = g->add_node(OpKind::MaxPool, {a}, {"p"}, pool)->output(0);
  Value* y = g->add_node(OpKind::FusedConv, {p, g->add_constant("wb", random_tensor({7, 16, 1, 1}, 3))}, {"y"},
                         conv({0, 0, 0, 0}, nullptr))->output(0);  // (no Relu: oneDNN's maps NaN to 0)
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  std::vector<Tensor> in{random_tensor({1, 13, 11, 5}, 9)};
  Executor ex(g, bf16_options());
  ASSERT_EQ(count_bf16_links(ex.graph()), 1);
  EXPECT_EQ(ex.graph().nodes()[1]->output(0)->dtype(), DType::bf16);  // the pooled value
  std::vector<NodeTime> prof = ex.profile(in);
  EXPECT_EQ(prof[1].impl.rfind("onednn:", 0), 0u) << prof[1].impl;  // oneDNN's bf16 pooling, not the reference
  Tensor got = ex.run(in)[0];
  Tensor want = run_with_links(g, in, false)[0];
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << "rel. L2 " << rel_l2(got, want);
  in[0].data<float>()[40] = std::nanf("");
  Tensor nan = ex.run(in)[0], nan_unlinked = run_with_links(g, in, false)[0];
  int count = 0, count_unlinked = 0;
  for (int64_t i = 0; i < nan.numel(); ++i)
    count += std::isnan(nan.data<float>()[i]), count_unlinked += std::isnan(nan_unlinked.data<float>()[i]);
  EXPECT_GT(count_unlinked, 0);
  EXPECT_EQ(count, count_unlinked);
}

// One f32 value read as A by three bf16 products (attention's Q, K, V): converted once by an inserted Cast, the
// products read its bf16; bit-identical to each converting it (the same rounding).
TEST(Bf16Links, SharedSourceConvertsOnce) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 13, 24})});
  std::vector<Value*> ys;
  for (uint32_t i = 0; i < 3; ++i)
    ys.push_back(g->add_node(OpKind::FusedMatMul, {x, g->add_constant("w" + std::to_string(i), random_tensor({24, 9}, 2 + i))},
                             {"p" + std::to_string(i)})->output(0));
  Value* s = g->add_node(OpKind::Add, {ys[0], ys[1]}, {"s"})->output(0);
  Value* y = g->add_node(OpKind::Add, {s, ys[2]}, {"y"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  std::vector<Tensor> in{random_tensor({1, 13, 24}, 9)};
  Executor ex(g, bf16_options());
  if (!machine_has_bf16()) {
    EXPECT_EQ(count_bf16_links(ex.graph()), 0);
    GTEST_SKIP() << "no AVX512-BF16";
  }
  ASSERT_EQ(count_bf16_links(ex.graph()), 1);
  const Node& cast = *ex.graph().nodes()[0];
  ASSERT_EQ(cast.op(), OpKind::Cast);
  EXPECT_EQ(cast.output(0)->dtype(), DType::bf16);
  std::vector<NodeTime> prof = ex.profile(in);
  EXPECT_EQ(prof[0].impl.rfind("onednn:reorder", 0), 0u) << prof[0].impl;
  for (size_t i = 1; i <= 3; ++i) EXPECT_EQ(prof[i].precision.precision, Precision::bf16) << prof[i].precision.reason;
  Tensor got = ex.run(in)[0];
  Tensor want = run_with_links(g, in, false)[0];
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0) << "rel. L2 " << rel_l2(got, want);
  EXPECT_GT(rel_l2(got, run_graph(g, in)[0]), 0);
}

TEST(Bf16Links, ResidualBlocksWithinBf16Error) {
  auto g = blocks();
  std::vector<Tensor> in{random_tensor({1, 7, 5, 24}, 9)};
  Executor ex(g, bf16_options());
  if (!machine_has_bf16()) {
    EXPECT_EQ(count_bf16_links(ex.graph()), 0);  // no bf16 convolutions: nothing links
    GTEST_SKIP() << "no AVX512-BF16";
  }
  // h (X of B, sum of C), b, r (X of D, sum of E), d; y is the output
  EXPECT_EQ(count_bf16_links(ex.graph()), 4);
  for (const NodeTime& t : ex.profile(in)) EXPECT_EQ(t.precision.precision, Precision::bf16) << t.precision.reason;
  Tensor got = ex.run(in)[0];
  Tensor ref = run_graph(g, in)[0];
  Tensor unlinked = run_with_links(g, in, false)[0];
  // five layers, each rounding its inputs and weights to bf16 (u = 2^-8 relative at most): 2 u L
  double bound = 2 * std::ldexp(1.0, -8) * 5;
  double e_linked = rel_l2(got, ref), e_unlinked = rel_l2(unlinked, ref);
  EXPECT_LT(e_linked, bound);
  EXPECT_GT(e_linked, 0);
  // the residuals rounded to bf16 cost little next to the layers' own rounding
  EXPECT_LT(e_linked, 2 * e_unlinked + std::ldexp(1.0, -9));
}

TEST(Bf16Links, WhatDoesNotLink) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", TensorType{DType::f32, Shape::of({1, 6, 6, 8})});
  auto w = [&](const char* n, Ints s) { return g->add_constant(n, random_tensor(s, 3)); };
  Value* a = g->add_node(OpKind::FusedConv, {x, w("wa", {8, 8, 3, 3})}, {"a"}, conv())->output(0);
  Value* relu = g->add_node(OpKind::Relu, {a}, {"relu"})->output(0);  // a is read by a Relu too: f32
  Value* b = g->add_node(OpKind::FusedConv, {a, w("wb", {8, 8, 3, 3})}, {"b"}, conv())->output(0);
  AttrMap grouped = conv();
  grouped["group"] = Attribute(int64_t(8));
  Value* c = g->add_node(OpKind::FusedConv, {b, w("wc", {8, 1, 3, 3})}, {"c"}, grouped)->output(0);  // grouped: links
  AttrMap pinned = conv();
  pinned["precision"] = Attribute("fp32");
  Value* d = g->add_node(OpKind::FusedConv, {c, w("wd", {8, 8, 3, 3})}, {"d"}, conv())->output(0);
  Value* e = g->add_node(OpKind::FusedConv, {d, w("we", {8, 8, 3, 3})}, {"e"}, pinned)->output(0);  // fp32 node
  Value* f = g->add_node(OpKind::FusedConv, {e, w("wf", {8, 8, 3, 3})}, {"f"}, conv())->output(0);
  g->add_output(relu);
  g->add_output(f);
  g->add_output(b);  // b is a graph output besides c's X
  infer_shapes(*g);
  verify(*g);
  Executor ex(g, bf16_options());
  // the one link: the grouped c into d (grouped layers run bf16 where an end is linked)
  ASSERT_EQ(count_bf16_links(ex.graph()), 1);
  for (const auto& n : ex.graph().nodes())
    if (n->op() == OpKind::FusedConv) EXPECT_EQ(n->output(0)->dtype(), n->output(0)->name() == "c" ? DType::bf16 : DType::f32);
  setenv("CUVIL_GROUPED_LINKS", "0", 1);  // as before grouped layers ran bf16: nothing links
  EXPECT_EQ(count_bf16_links(Executor(g, bf16_options()).graph()), 0);
  unsetenv("CUVIL_GROUPED_LINKS");
  setenv("CUVIL_BF16_LINKS", "0", 1);
  EXPECT_EQ(count_bf16_links(Executor(blocks(), bf16_options()).graph()), 0);
  unsetenv("CUVIL_BF16_LINKS");
  ExecutorOptions f32;
  EXPECT_EQ(count_bf16_links(Executor(blocks(), f32).graph()), 0);  // fp32 lowers nothing
}

// Linked layers that run f32 after all (reference kernels asked for): wrapped in the conversions, they compute the
// same model (against the fp32 reference within bf16's error) and say so.
TEST(Bf16Links, BoundaryWhereALinkedLayerRunsF32) {
  if (!machine_has_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  auto g = blocks();
  std::vector<Tensor> in{random_tensor({1, 7, 5, 24}, 9)};
  ExecutorOptions o = bf16_options();
  o.kernels.reference_ops.insert(OpKind::FusedConv);
  Executor ex(g, o);
  ASSERT_EQ(count_bf16_links(ex.graph()), 4);
  for (const NodeTime& t : ex.profile(in)) {
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_NE(t.precision.reason.find("(bf16 activations converted around it)"), std::string::npos)
        << t.node->output(0)->name() << ": " << t.precision.reason;
  }
  Tensor got = ex.run(in)[0], ref = run_graph(g, in)[0];
  double e = rel_l2(got, ref);
  EXPECT_GT(e, 0);  // the linked values were rounded
  EXPECT_LT(e, 2 * std::ldexp(1.0, -8) * 5);
}

}  // namespace
