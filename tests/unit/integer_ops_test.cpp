// ONNX's integer ops on oneDNN's u8 x s8 kernels (kernels/onednn/integer_ops.cpp) against the reference kernels on
// random 8-bit inputs, bit for bit (the kernels requantize as the reference does; channels-first and -last). Odd
// channel counts, 1x1 / 3x3 / 5x3 windows, strides, pads, groups and depthwise, u8 and s8 activations, u8 weights,
// weight zero points of convolutions (window sums), zero points 0, 1, 128, 255, runtime zero points
// (DynamicQuantizeLinear's form), per-channel scales; and the cases that stay on the reference, with their reasons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "int8_test_util.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_q8(DType t, Ints shape, uint32_t seed, int lo = -1000, int hi = 1000) {
  std::mt19937 rng(seed);
  Tensor x = Tensor::zeros(t, std::move(shape));
  int a = t == DType::u8 ? 0 : -128, b = t == DType::u8 ? 255 : 127;
  std::uniform_int_distribution<int> u(std::max(a, lo), std::min(b, hi));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::u8) x.data<uint8_t>()[i] = uint8_t(u(rng));
    else x.data<int8_t>()[i] = int8_t(u(rng));
  }
  return x;
}

Tensor q8_scalar(DType t, int v) {
  return t == DType::u8 ? Tensor::scalar<uint8_t>(uint8_t(v)) : Tensor::scalar<int8_t>(int8_t(v));
}

Tensor random_scales(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.002f, 0.02f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(rng);
  return Tensor::from_vector<float>(v, {n});
}

// Runs `one` fast and on the reference; returns the kernel name and fallback of the fast run.
struct Outcome {
  Tensor got, want;
  std::string impl, fallback;
};
Outcome run_both(const OneOp& one) {
  Executor fast(one.g), ref(one.g, reference_kernels());
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  EXPECT_EQ(prof.size(), 1u);
  return {fast.run(one.feeds)[0], ref.run(one.feeds)[0], prof.at(0).impl, prof.at(0).fallback};
}

// Elements equal, and within one step: returns the fraction equal.
double compare(const Tensor& got, const Tensor& want, int64_t max_step) {
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.dtype(), want.dtype());
  int64_t same = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    int64_t g = got.get_i64(i), w = want.get_i64(i);
    same += g == w;
    EXPECT_LE(std::abs(g - w), max_step) << "element " << i << ": " << g << " vs " << w;
    if (std::abs(g - w) > max_step) break;
  }
  return double(same) / double(std::max<int64_t>(want.numel(), 1));
}

struct ConvCase {
  DType x_type, w_type, y_type;
  Ints x_shape, w_shape;  // x [N, C, H, W], w [M, C/group, kh, kw]
  int64_t group;
  Ints strides, pads;
  int x_zp, w_zp, y_zp;
  bool per_channel, bias;
};

std::vector<ConvCase> conv_cases() {
  using enum DType;
  return {
      {u8, i8, u8, {1, 3, 11, 13}, {7, 3, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, 0, 0, 0, true, true},
      {u8, i8, u8, {2, 19, 9, 7}, {17, 19, 1, 1}, 1, {1, 1}, {0, 0, 0, 0}, 128, 0, 128, true, true},
      {u8, i8, u8, {1, 5, 15, 14}, {9, 5, 5, 3}, 1, {2, 2}, {2, 1, 2, 1}, 255, 0, 1, false, false},
      {u8, i8, i8, {1, 8, 10, 10}, {6, 4, 3, 3}, 2, {1, 2}, {1, 1, 0, 0}, 37, 0, -5, true, true},
      {u8, i8, u8, {1, 24, 9, 9}, {24, 1, 3, 3}, 24, {1, 1}, {1, 1, 1, 1}, 3, 0, 10, true, true},  // depthwise
      {i8, i8, u8, {1, 21, 8, 8}, {11, 21, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, -3, 0, 100, true, true},
      {u8, u8, u8, {1, 6, 7, 9}, {5, 6, 3, 3}, 1, {2, 1}, {1, 1, 1, 1}, 17, 128, 64, false, true},
      // weight zero points (asymmetric u8 weights, as older quantize_dynamic wrote them): window sums
      {u8, u8, u8, {2, 7, 9, 8}, {5, 7, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, 9, 131, 7, true, true},
      {u8, i8, u8, {1, 8, 10, 10}, {6, 4, 3, 3}, 2, {2, 2}, {1, 0, 1, 0}, 200, -3, 50, true, false},
      {i8, u8, i8, {1, 16, 7, 7}, {16, 1, 3, 3}, 16, {1, 1}, {1, 1, 1, 1}, 5, 77, 0, true, true},  // depthwise
  };
}

OneOp conv_op(const ConvCase& c, uint32_t seed, bool weights_constant = true, bool channels_last = false) {
  Ints xs = c.x_shape;
  if (channels_last) xs = {xs[0], xs[2], xs[3], xs[1]};  // [N, H, W, C]
  Tensor x = random_q8(c.x_type, xs, seed), w = random_q8(c.w_type, c.w_shape, seed + 1);
  if (c.w_type == DType::u8)  // weights around their zero point, as u8 models hold them
    for (int64_t i = 0; i < w.numel(); ++i) w.data<uint8_t>()[i] = uint8_t(std::clamp(int(w.data<uint8_t>()[i]), 1, 255));
  int64_t M = c.w_shape[0];
  std::vector<int32_t> b(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) b[size_t(m)] = int32_t((m * 7919) % 4001) - 2000;
  AttrMap attrs{{"group", Attribute(c.group)}, {"strides", Attribute(c.strides)}, {"pads", Attribute(c.pads)},
                {"kernel_shape", Attribute(Ints(c.w_shape.begin() + 2, c.w_shape.end()))}};
  if (channels_last) attrs["channels_last"] = Attribute(int64_t(1));
  OpArg wa = weights_constant ? constant(w) : input(w);
  return build_op(OpKind::QLinearConv,
                  {input(x), constant(Tensor::scalar<float>(0.02f)), constant(q8_scalar(c.x_type, c.x_zp)), wa,
                   constant(c.per_channel ? random_scales(M, seed + 2) : Tensor::scalar<float>(0.007f)),
                   constant(q8_scalar(c.w_type, c.w_zp)), constant(Tensor::scalar<float>(0.9f)),
                   constant(q8_scalar(c.y_type, c.y_zp)),
                   c.bias ? constant(Tensor::from_vector<int32_t>(b, {M})) : absent()},
                  attrs);
}

TEST(IntegerOps, QLinearConvExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 10;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE("case " + std::to_string(seed));
    OneOp one = conv_op(c, seed += 10);
    Outcome o = run_both(one);
    EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
    EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
  }
}

// assign-layouts' channels-last form ([N, H, W, C] in and out, no reorders) against the reference's (which runs the
// channels-first body between permutations).
TEST(IntegerOps, QLinearConvChannelsLastExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 110;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE("case " + std::to_string(seed));
    OneOp one = conv_op(c, seed += 10, true, /*channels_last=*/true);
    EXPECT_EQ(one.type().shape[3].value(), c.w_shape[0]);  // [N, H, W, M]
    Outcome o = run_both(one);
    EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
    EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
  }
}

TEST(IntegerOps, ConvIntegerExactWithRuntimeZeroPoint) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 200;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE("case " + std::to_string(seed));
    Tensor x = random_q8(c.x_type, c.x_shape, seed), w = random_q8(c.w_type, c.w_shape, seed + 1);
    AttrMap attrs{{"group", Attribute(c.group)}, {"strides", Attribute(c.strides)}, {"pads", Attribute(c.pads)}};
    // x's zero point a graph input (DynamicQuantizeLinear computes it per call); the weights' constant
    OneOp one = build_op(OpKind::ConvInteger,
                         {input(x), constant(w), input(q8_scalar(c.x_type, c.x_zp)), constant(q8_scalar(c.w_type, c.w_zp))},
                         attrs);
    Outcome o = run_both(one);
    EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
    EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
    seed += 10;
  }
}

struct MatCase {
  DType a_type, b_type;
  Ints a_shape;
  int64_t n;
  int a_zp;
  std::vector<int> b_zp;  // one (per tensor) or n (per column)
};

std::vector<MatCase> mat_cases() {
  using enum DType;
  return {
      {u8, i8, {16, 384}, 37, 0, {0}},
      {u8, i8, {2, 5, 19}, 23, 131, {0}},
      {u8, i8, {7, 33}, 17, 255, {3}},
      {i8, i8, {3, 4, 50}, 9, -7, {1, -2, 3, 0, 5, -6, 7, 8, -9}},
      {u8, u8, {1, 64}, 31, 1, {128}},
      {u8, u8, {5, 27}, 5, 90, {0, 255, 128, 7, 200}},
  };
}

Tensor zp_tensor(DType t, const std::vector<int>& v) {
  if (v.size() == 1) return q8_scalar(t, v[0]);
  int64_t n = int64_t(v.size());
  if (t == DType::u8) return Tensor::from_vector<uint8_t>(std::vector<uint8_t>(v.begin(), v.end()), {n});
  return Tensor::from_vector<int8_t>(std::vector<int8_t>(v.begin(), v.end()), {n});
}

TEST(IntegerOps, MatMulIntegerExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 400;
  for (const MatCase& c : mat_cases()) {
    SCOPED_TRACE("case " + std::to_string(seed));
    Tensor a = random_q8(c.a_type, c.a_shape, seed), b = random_q8(c.b_type, {c.a_shape.back(), c.n}, seed + 1);
    OneOp one = build_op(OpKind::MatMulInteger, {input(a), constant(b), input(q8_scalar(c.a_type, c.a_zp)),
                                                 constant(zp_tensor(c.b_type, c.b_zp))});
    Outcome o = run_both(one);
    EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
    EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
    seed += 10;
  }
}

TEST(IntegerOps, QLinearMatMulExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 600;
  for (const MatCase& c : mat_cases())
    for (DType yt : {DType::u8, DType::i8}) {
      SCOPED_TRACE("case " + std::to_string(seed));
      Tensor a = random_q8(c.a_type, c.a_shape, seed), b = random_q8(c.b_type, {c.a_shape.back(), c.n}, seed + 1);
      OneOp one = build_op(OpKind::QLinearMatMul,
                           {input(a), constant(Tensor::scalar<float>(0.05f)), constant(q8_scalar(c.a_type, c.a_zp)),
                            constant(b), constant(c.b_zp.size() == 1 ? Tensor::scalar<float>(0.01f) : random_scales(c.n, seed)),
                            constant(zp_tensor(c.b_type, c.b_zp)), constant(Tensor::scalar<float>(0.3f)),
                            constant(q8_scalar(yt, yt == DType::u8 ? 120 : -3))});
      Outcome o = run_both(one);
      EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
      EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
      seed += 10;
    }
}

// Floats equal bit for bit (any NaN matches any NaN).
void expect_same_floats(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), DType::f32);
  ASSERT_EQ(want.dtype(), DType::f32);
  for (int64_t i = 0; i < want.numel(); ++i) {
    float g = got.data<float>()[i], w = want.data<float>()[i];
    if (std::isnan(g) && std::isnan(w)) continue;
    uint32_t gb, wb;
    std::memcpy(&gb, &g, 4), std::memcpy(&wb, &w, 4);
    ASSERT_EQ(gb, wb) << "element " << i << ": " << g << " vs " << w;
  }
}

// MatMulInteger's dequantizing form (fuse-matmul's; ORT's MatMulIntegerToFloat) on oneDNN against its reference
// (the int32 sums, then float(acc) * (scale * scale2) + bias): bit for bit, scale2 absent, per tensor or per
// column, with and without bias.
TEST(IntegerOps, DequantizingMatMulIntegerExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  uint32_t seed = 700;
  for (const MatCase& c : mat_cases())
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE("case " + std::to_string(seed));
      Tensor a = random_q8(c.a_type, c.a_shape, seed), b = random_q8(c.b_type, {c.a_shape.back(), c.n}, seed + 1);
      OpArg scale2 = variant == 0 ? absent()
                                  : constant(variant == 1 ? Tensor::scalar<float>(0.0123f) : random_scales(c.n, seed));
      OpArg bias = variant == 2 ? absent() : input(int8::random_tensor({c.n}, seed + 2, -2, 2));
      OneOp one = build_op(OpKind::MatMulInteger,
                           {input(a), constant(b), input(q8_scalar(c.a_type, c.a_zp)),
                            constant(zp_tensor(c.b_type, c.b_zp)), input(Tensor::scalar<float>(0.0371f)), scale2, bias});
      Outcome o = run_both(one);
      EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
      expect_same_floats(o.got, o.want);
      seed += 10;
    }
}

// quantize_dynamic's chain, DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * b_scale) -> Add(bias),
// twice from one quantized input (as Q and K share theirs): -O1 fuses each chain into one dequantizing MatMulInteger and
// the result equals the unfused graph on the reference kernels bit for bit; inputs with NaN (quantized to the zero
// point), all zeros (scale 0: every output is the bias), one-sided ranges; weights u8 with a zero point. With B a
// graph input the fused op runs on the reference and says why.
TEST(IntegerOps, DynamicQuantizedProductFusedExact) {
  struct Case {
    Ints x_shape;
    int64_t n;
    DType b_type;
    int b_zp;
    bool b_constant;
  };
  uint32_t seed = 800;
  for (const Case& c : std::vector<Case>{{{1, 16, 384}, 384, DType::i8, 0, true},
                                         {{3, 5, 33}, 17, DType::i8, 0, true},
                                         {{7, 64}, 9, DType::u8, 131, true},
                                         {{2, 19}, 1, DType::i8, -3, true},
                                         {{4, 24}, 6, DType::i8, 0, false}})
    for (int fill = 0; fill < 3; ++fill) {  // random, with NaN, all zeros
      SCOPED_TRACE("case " + std::to_string(seed) + " fill " + std::to_string(fill));
      Tensor x = int8::random_tensor(c.x_shape, seed, fill == 0 ? -3.f : 0.5f, 4.f);
      if (fill == 1) x.data<float>()[x.numel() / 2] = std::nanf("");
      if (fill == 2) x = Tensor::zeros(DType::f32, c.x_shape);
      int64_t k = c.x_shape.back();
      std::vector<Tensor> feeds{x};
      auto build = [&] {
      auto g = std::make_shared<Graph>();
      Value* xv = g->add_input("x", TensorType{DType::f32, Shape::of(x.shape())});
      Node* dq = g->add_node(OpKind::DynamicQuantizeLinear, {xv}, {"q", "s", "z"}, {}, Location{});
      for (int p = 0; p < 2; ++p) {
        std::string t = std::to_string(p);
        Tensor bt = random_q8(c.b_type, {k, c.n}, seed + 1 + uint32_t(p));
        Value* b = nullptr;
        if (c.b_constant) {
          b = g->add_constant("b" + t, bt);
        } else {
          b = g->add_input("b" + t, TensorType{c.b_type, Shape::of(bt.shape())});
          if (feeds.size() < 3) feeds.push_back(bt);
        }
        Value* zb = g->add_constant("zb" + t, q8_scalar(c.b_type, c.b_zp));
        Value* bs = g->add_constant("bs" + t, Tensor::scalar<float>(p ? 0.0071f : 0.013f));
        Value* bias = g->add_constant("bias" + t, int8::random_tensor({c.n}, seed + 5 + uint32_t(p), -1, 1));
        Value* sc = g->add_node(OpKind::Mul, {dq->output(1), bs}, {"sc" + t}, {}, Location{})->output(0);
        Value* acc = g->add_node(OpKind::MatMulInteger, {dq->output(0), b, dq->output(2), zb}, {"acc" + t}, {},
                                 Location{})->output(0);
        Value* accf = g->add_node(OpKind::Cast, {acc}, {"accf" + t}, {{"to", Attribute(int64_t(1))}}, Location{})
                          ->output(0);
        Value* m = g->add_node(OpKind::Mul, {accf, sc}, {"m" + t}, {}, Location{})->output(0);
        g->add_output(g->add_node(OpKind::Add, {bias, m}, {"y" + t}, {}, Location{})->output(0));
      }
      infer_shapes(*g);
      verify(*g);
      return g;
      };
      std::shared_ptr<Graph> g = build(), opt = build();
      std::vector<Tensor> want = Executor(g, reference_kernels()).run(feeds);
      optimize(*opt, 1);
      int fused = 0;
      for (auto& n : opt->nodes()) fused += n->op() == OpKind::MatMulInteger && n->num_inputs() > 4;
      EXPECT_EQ(fused, 2);
      Executor fast(opt);
      std::vector<Tensor> got = fast.run(feeds);
      for (size_t i = 0; i < 2; ++i) expect_same_floats(got[i], want[i]);
      for (const NodeTime& t : fast.profile(feeds)) {
        if (t.node->op() != OpKind::MatMulInteger) continue;
        if (!c.b_constant) {
          EXPECT_EQ(t.impl, "ref:MatMulInteger");
          EXPECT_NE(t.fallback.find("B not constant"), std::string::npos) << t.fallback;
        } else if (int8::machine_has_vnni()) {
          EXPECT_EQ(t.impl.rfind("onednn:", 0), 0u) << t.impl << " " << t.fallback;
        }
      }
      seed += 10;
    }
}

TEST(IntegerOps, StayOnReferenceWithReason) {
  // Weights (B) not constant: the reference, with the reason.
  ConvCase c = conv_cases()[0];
  Outcome o = run_both(conv_op(c, 5, /*weights_constant=*/false));
  EXPECT_EQ(o.impl, "ref:QLinearConv");
  EXPECT_NE(o.fallback.find("weights not constant"), std::string::npos) << o.fallback;
  EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
  if (!int8::machine_has_vnni()) return;
  Tensor a = random_q8(DType::u8, {4, 8}, 1), b = random_q8(DType::i8, {8, 3}, 2);
  o = run_both(build_op(OpKind::MatMulInteger, {input(a), input(b)}));
  EXPECT_EQ(o.impl, "ref:MatMulInteger");
  EXPECT_NE(o.fallback.find("B not constant"), std::string::npos) << o.fallback;
}

TEST(IntegerOps, SaturatedOperandsExact) {
  if (!int8::machine_has_vnni()) GTEST_SKIP() << "no VNNI: the integer ops stay on the reference";
  // Every product at its extreme (255 x -128, 255 x 127): VNNI's 32-bit sums, no 16-bit pair saturation.
  Tensor a = Tensor::zeros(DType::u8, {3, 64}), b = Tensor::zeros(DType::i8, {64, 4});
  for (int64_t i = 0; i < a.numel(); ++i) a.data<uint8_t>()[i] = 255;
  for (int64_t i = 0; i < b.numel(); ++i) b.data<int8_t>()[i] = int8_t(i % 2 ? 127 : -128);
  Outcome o = run_both(build_op(OpKind::MatMulInteger, {input(a), constant(b)}));
  EXPECT_EQ(o.impl.rfind("onednn:", 0), 0u) << o.impl << " " << o.fallback;
  EXPECT_EQ(compare(o.got, o.want, 0), 1.0);
}

// DynamicQuantizeLinear on its CPU kernel (and through -O1, which no longer writes it out) bit for bit against
// the reference: ranges across 0, excluding 0 on either side, NaN (skipped by the range, quantized to the zero
// point), all zeros (scale 0), values at the range's ends, sizes odd and large enough to split between threads.
TEST(IntegerOps, DynamicQuantizeLinearExact) {
  uint32_t seed = 900;
  std::vector<Tensor> cases{int8::random_tensor({64, 77}, seed++, -3, 5), int8::random_tensor({3, 5, 7}, seed++, 0.5f, 9),
                            int8::random_tensor({1000}, seed++, -7, -1), Tensor::zeros(DType::f32, {4, 9}),
                            int8::random_tensor({1, 64, 56, 57}, seed++, -0.3f, 11),
                            int8::random_tensor({6, 11}, seed++)};
  cases.back().data<float>()[5] = std::nanf("");
  // NaN and -0 past the vectorized range's 64-float steps; a tensor of -0 only (scale 0).
  cases.push_back(int8::random_tensor({3, 67}, seed++, -2, 3));
  cases.back().data<float>()[198] = std::nanf(""), cases.back().data<float>()[3] = -0.0f;
  cases.push_back(int8::random_tensor({131}, seed++, 0.25f, 2));
  for (int64_t i = 0; i < 131; i += 2) cases.back().data<float>()[i] = -0.0f;
  cases.push_back(Tensor::zeros(DType::f32, {129}));
  for (int64_t i = 0; i < 129; ++i) cases.back().data<float>()[i] = -0.0f;
  for (const Tensor& x : cases) {
    SCOPED_TRACE(Shape::of(x.shape()).str());
    OneOp one = build_op(OpKind::DynamicQuantizeLinear, {input(x)}, {}, 3);
    Executor fast(one.g), ref(one.g, reference_kernels());
    std::vector<NodeTime> prof = fast.profile(one.feeds);
    EXPECT_EQ(prof.at(0).impl, "cpu:dynamic_quantize");
    std::vector<Tensor> got = fast.run(one.feeds), want = ref.run(one.feeds);
    EXPECT_EQ(compare(got[0], want[0], 0), 1.0);
    EXPECT_EQ(got[1].data<float>()[0], want[1].data<float>()[0]);
    EXPECT_EQ(got[2].data<uint8_t>()[0], want[2].data<uint8_t>()[0]);
    optimize(*one.g, 1);
    for (auto& n : one.g->nodes()) EXPECT_EQ(n->op(), OpKind::DynamicQuantizeLinear);
    std::vector<Tensor> opt = Executor(one.g).run(one.feeds);
    EXPECT_EQ(compare(opt[0], want[0], 0), 1.0);
  }
}

}  // namespace
