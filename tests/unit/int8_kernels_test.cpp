// int8 convolutions and matrix products (KernelOptions::precision = int8) against the reference kernels run in
// the same quantized arithmetic: the activation replaced by its dequantized u8 grid value ((q(x) - zp) * x_scale,
// q from onednn::quantize_u8), the weights by theirs (qw * w_scale[c]). The kernel's integer products are exact,
// so what differs is f32 summation and the one dequantizing multiply: tolerance 8 sqrt(K + 1) u32 sum|x w| (as in
// bf16_kernels_test). Each case also shows the tolerance discriminates: the same result is outside it against the
// unquantized inputs' reference. Edge cases: zero points 0 and 200, activations saturating at 0 and 255,
// per-channel scales over three orders of magnitude, given weight scales, uncalibrated nodes keeping f32.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cmath>
#include <random>

#include "kernels/onednn/onednn_kernels.h"
#include "runtime/executor.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::test::int8;

namespace {

using Ints = std::vector<int64_t>;

// Output channel c of the weights scaled by 10^(c mod 3 - 1): per-channel scales matter.
Tensor spread_channels(Tensor w, int64_t channels, bool channels_fastest) {
  int64_t inner = w.numel() / channels;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < inner; ++i)
      w.data<float>()[channels_fastest ? i * channels + c : c * inner + i] *= std::pow(10.f, float(c % 3 - 1));
  return w;
}

struct Case {
  OpKind op;
  std::vector<OpArg> args;  // args[0] the activation, args[1] the weights; the rest (bias, sum) stay f32
  AttrMap attrs;            // with quant_x_scale / quant_x_zero_point
  int64_t k;                // products summed per output element
  int64_t channels;         // output channels of the weights
  bool channels_fastest;    // weights stored [K, N] (a MatMul's B) rather than [M, ...]
  std::string what;
};

Tensor run_ref(OpKind op, const std::vector<OpArg>& args, AttrMap attrs) {
  for (const char* a : {"quant_x_scale", "quant_x_zero_point", "quant_w_scales"}) attrs.erase(a);
  OneOp one = build_op(op, args, attrs);
  return Executor(one.g, reference_kernels()).run(one.feeds)[0];
}

Tensor dequantized_input(const Tensor& x, float scale, int32_t zp) {
  Tensor r = x.clone();
  for (int64_t i = 0; i < r.numel(); ++i)
    r.data<float>()[i] = float(int32_t(onednn::quantize_u8(x.data<float>()[i], 1.f / scale, zp)) - zp) * scale;
  return r;
}

// Dynamic quantization: each row (last dim) on its own symmetric grid, max |x| / 127, zero point 128.
Tensor dequantized_rows(const Tensor& x) {
  Tensor r = x.clone();
  int64_t k = x.shape().back(), rows = x.numel() / k;
  for (int64_t i = 0; i < rows; ++i) {
    float m = 0;
    for (int64_t j = 0; j < k; ++j) m = std::max(m, std::fabs(x.data<float>()[i * k + j]));
    float s = m > 0 ? m / 127.f : 1.f;
    for (int64_t j = 0; j < k; ++j)
      r.data<float>()[i * k + j] = float(int32_t(onednn::quantize_u8(x.data<float>()[i * k + j], 1.f / s, 128)) - 128) * s;
  }
  return r;
}

Tensor dequantized_weights(const Tensor& w, int64_t channels, bool channels_fastest, std::vector<double> given) {
  Tensor r = w.clone();
  int64_t inner = w.numel() / channels;
  for (int64_t c = 0; c < channels; ++c) {
    auto at = [&](int64_t i) { return channels_fastest ? i * channels + c : c * inner + i; };
    float s;
    if (!given.empty()) {
      s = float(given.size() == 1 ? given[0] : given[size_t(c)]);
    } else {
      float m = 0;
      for (int64_t i = 0; i < inner; ++i) m = std::max(m, std::fabs(w.data<float>()[at(i)]));
      s = m > 0 ? m / 127.f : 1.f;
    }
    for (int64_t i = 0; i < inner; ++i) r.data<float>()[at(i)] = float(onednn::quantize_s8(w.data<float>()[at(i)], s)) * s;
  }
  return r;
}

Tensor map_abs(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = std::fabs(r.data<float>()[i]);
  return r;
}

void check(const Case& c) {
  SCOPED_TRACE(c.what);
  OneOp one = build_op(c.op, c.args, c.attrs);
  Executor fast(one.g, int8_options());
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  const PrecisionDecision& d = prof[0].precision;
  if (!machine_has_vnni()) {
    EXPECT_EQ(d.precision, Precision::fp32);
    EXPECT_FALSE(d.reason.empty());
    GTEST_SKIP() << "no VNNI here: " << d.reason;
  }
  ASSERT_EQ(d.precision, Precision::int8) << d.reason << " (" << prof[0].impl << ")";
  EXPECT_TRUE(runs_on_int8_dot_products(prof[0].impl)) << prof[0].impl;
  Tensor got = fast.run(one.feeds)[0];

  float xs = float(c.attrs.at("quant_x_scale").f());
  int32_t zp = c.attrs.count("quant_x_zero_point") ? int32_t(c.attrs.at("quant_x_zero_point").i()) : 0;
  std::vector<double> given;
  if (c.attrs.count("quant_w_scales")) given = c.attrs.at("quant_w_scales").floats();
  std::vector<OpArg> quantized = c.args, magnitude = c.args;
  quantized[0].t = xs == -1.f ? dequantized_rows(c.args[0].t) : dequantized_input(c.args[0].t, xs, zp);
  quantized[1].t = dequantized_weights(c.args[1].t, c.channels, c.channels_fastest, given);
  for (size_t i = 0; i < c.args.size(); ++i)
    if (c.args[i].kind != OpArg::Absent) magnitude[i].t = map_abs(quantized[i].t);
  AttrMap plain = c.attrs;
  plain.erase("activation");
  plain.erase("activation_params");
  Tensor want = run_ref(c.op, quantized, c.attrs), mag = run_ref(c.op, magnitude, plain);
  Tensor unquantized = run_ref(c.op, c.args, c.attrs);
  ASSERT_EQ(got.shape(), want.shape());
  double worst_unquantized = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.data<float>()[i], w = want.data<float>()[i];
    double tol = 8 * std::sqrt(double(c.k) + 1) * 0x1p-24 * std::fabs(mag.data<float>()[i]) + 1e-30;
    ASSERT_LE(std::fabs(g - w), tol) << "element " << i << ": " << g << " vs " << w;
    worst_unquantized = std::max(worst_unquantized, std::fabs(g - double(unquantized.data<float>()[i])) / tol);
  }
  EXPECT_GT(worst_unquantized, 1.0) << "the tolerance does not tell quantized from f32 inputs";
}

AttrMap conv_attrs(Ints pads, float x_scale, int64_t zp, Ints strides = {1, 1}, bool cl = true) {
  return {{"pads", Attribute(pads)},
          {"strides", Attribute(strides)},
          {"channels_last", Attribute(int64_t(cl))},
          {"quant_x_scale", Attribute(double(x_scale))},
          {"quant_x_zero_point", Attribute(zp)}};
}

TEST(Int8Kernels, ConvolutionsMatchQuantizedReference) {
  std::vector<Case> cases;
  {  // 3x3 with padding, odd sizes, bias + residual + Relu, a zero point: padding must count as a real 0
    AttrMap a = conv_attrs({1, 1, 1, 1}, 2.f / 255, 128);
    a["activation"] = Attribute("Relu");
    cases.push_back({OpKind::FusedConv,
                     {input(random_tensor({2, 9, 11, 6}, 1)), constant(spread_channels(random_tensor({10, 6, 3, 3}, 2), 10, false)),
                      constant(random_tensor({10}, 3)), input(random_tensor({2, 9, 11, 10}, 4))},
                     a, 6 * 9, 10, false, "3x3 NHWC, zp 128, bias + sum + relu, per-channel scales"});
  }
  // Post-ReLU-like input (zero point 0), 1x1, 33 outputs; the scale saturates values above 0.8 at 255.
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 7, 7, 16}, 5, 0.f, 1.f)), constant(random_tensor({33, 16, 1, 1}, 6)),
                    constant(random_tensor({33}, 7))},
                   conv_attrs({0, 0, 0, 0}, 0.8f / 255, 0), 16, 33, false, "1x1 zp 0, saturating at 255"});
  {  // zero point 200: most of [-1, 1] below the grid's 0 saturates at 0; stride 2 and asymmetric pads
    AttrMap a = conv_attrs({1, 0, 2, 1}, 1.f / 255, 200, {2, 2});
    a["quant_w_scales"] = Attribute(std::vector<double>{0.01});
    cases.push_back({OpKind::FusedConv,
                     {input(random_tensor({1, 15, 13, 24}, 8)), constant(random_tensor({40, 24, 3, 3}, 9)),
                      constant(random_tensor({40}, 10))},
                     a, 24 * 9, 40, false, "3x3 stride 2, zp 200 (saturating at 0), one given weight scale"});
  }
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 17, 13, 3}, 16)), constant(random_tensor({5, 3, 3, 3}, 17)),
                    constant(random_tensor({5}, 18))},
                   conv_attrs({1, 1, 1, 1}, 2.f / 255, 127), 27, 5, false, "3 input channels, 5 outputs"});
  // 51 M multiply-adds: above kAmxMinConvMacs, so on AMX CPUs this one runs on AMX tiles.
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 28, 28, 512}, 19)), constant(random_tensor({128, 512, 1, 1}, 20))},
                   conv_attrs({0, 0, 0, 0}, 2.f / 255, 128), 512, 128, false, "1x1 512 -> 128 on 28x28, zp 128"});
  for (const Case& c : cases) check(c);
}

// On AMX CPUs oneDNN 2.6 runs convolutions with a source zero point on jit AMX kernels that lose to its VNNI ones
// on small layers (MobileNetV2's): those take VNNI, large ones stay on AMX (int8.cpp, kAmxMinConvMacs).
TEST(Int8Kernels, SmallConvolutionsLeaveAmxForVnni) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 convolutions keep f32";
  auto impl_of = [](int64_t hw, int64_t cin, int64_t cout) {
    OneOp one = build_op(OpKind::FusedConv,
                         {input(random_tensor({1, hw, hw, cin}, 31)), constant(random_tensor({cout, cin, 1, 1}, 32))},
                         conv_attrs({0, 0, 0, 0}, 2.f / 255, 128));
    std::vector<NodeTime> prof = Executor(one.g, int8_options()).profile(one.feeds);
    EXPECT_EQ(prof.at(0).precision.precision, Precision::int8) << prof[0].precision.reason;
    return prof[0].impl;
  };
  std::string small = impl_of(14, 192, 64);  // 2.4 M multiply-adds
  EXPECT_TRUE(runs_on_int8_dot_products(small)) << small;
  EXPECT_EQ(small.find("amx"), std::string::npos) << small;
  if (!machine_has_amx()) GTEST_SKIP() << "no AMX: every int8 convolution runs on VNNI";
  std::string large = impl_of(28, 512, 128);  // 51 M
  EXPECT_NE(large.find("amx"), std::string::npos) << large;
}

TEST(Int8Kernels, MatrixProductsMatchQuantizedReference) {
  auto q = [](float s, int64_t zp) {
    return AttrMap{{"quant_x_scale", Attribute(double(s))}, {"quant_x_zero_point", Attribute(zp)}};
  };
  std::vector<Case> cases;
  cases.push_back({OpKind::FusedMatMul,
                   {input(random_tensor({37, 53}, 21)), constant(spread_channels(random_tensor({53, 29}, 22), 29, true))},
                   q(2.f / 255, 128), 53, 29, true, "37x53 * 53x29, per-column scales"});
  cases.push_back({OpKind::FusedMatMul, {input(random_tensor({1, 768}, 23)), constant(random_tensor({768, 64}, 24))},
                   q(1.5f / 255, 100), 768, 64, true, "one row, K 768"});
  {
    AttrMap a = q(2.f / 255, 127);
    a["activation"] = Attribute("Gelu");
    cases.push_back({OpKind::FusedMatMul,
                     {input(random_tensor({2, 19, 64}, 25)), constant(random_tensor({64, 48}, 26)),
                      constant(random_tensor({48}, 27)), input(random_tensor({2, 19, 48}, 28))},
                     a, 64, 48, true, "batched A + bias + residual + Gelu"});
  }
  {
    AttrMap a = q(1.f / 255, 0);  // negative inputs all saturate at the grid's 0
    a["transB"] = Attribute(int64_t(1));
    a["alpha"] = Attribute(0.5);
    cases.push_back({OpKind::FusedMatMul,
                     {input(random_tensor({17, 33}, 29)), constant(random_tensor({21, 33}, 30)),
                      constant(random_tensor({21}, 31))},
                     a, 33, 21, false, "transB, alpha 0.5, bias, zp 0 with negative inputs"});
  }
  {  // every input halfway between two grid points (ties to even, in the vector loop too), some past 255 and 0
    Tensor x = Tensor::zeros(DType::f32, {37, 64});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = (float(i % 301) - 150.5f) / 16;
    cases.push_back({OpKind::FusedMatMul, {input(x), constant(random_tensor({64, 24}, 36))}, q(1.f / 16, 100), 64, 24,
                     true, "ties and saturation on a 1/16 grid"});
  }
  {  // dynamic: rows quantized at run time, one row all zeros, rows of very different magnitudes
    Tensor x = random_tensor({2, 13, 96}, 32);
    for (int64_t j = 0; j < 96; ++j) x.data<float>()[5 * 96 + j] = 0.f;
    for (int64_t j = 0; j < 96; ++j) x.data<float>()[7 * 96 + j] *= 1000.f;
    AttrMap a{{"quant_x_scale", Attribute(-1.0)}, {"activation", Attribute("Relu")}};
    cases.push_back({OpKind::FusedMatMul,
                     {input(x), constant(spread_channels(random_tensor({96, 40}, 33), 40, true)),
                      constant(random_tensor({40}, 34)), input(random_tensor({2, 13, 40}, 35))},
                     a, 96, 40, true, "dynamic per row, bias + residual + Relu"});
  }
  for (const Case& c : cases) check(c);
}

// Rounding to nearest even, saturation, the zero point: the scalar form the vector loop must equal.
TEST(Int8Kernels, QuantizeRoundsAndSaturates) {
  EXPECT_EQ(onednn::quantize_u8(0.5f, 1.f, 0), 0);
  EXPECT_EQ(onednn::quantize_u8(1.5f, 1.f, 0), 2);
  EXPECT_EQ(onednn::quantize_u8(2.5f, 1.f, 10), 12);
  EXPECT_EQ(onednn::quantize_u8(-3.f, 1.f, 0), 0);
  EXPECT_EQ(onednn::quantize_u8(1e30f, 1.f, 0), 255);
  EXPECT_EQ(onednn::quantize_u8(-1e30f, 1.f, 255), 0);
  EXPECT_EQ(onednn::quantize_u8(254.6f, 1.f, 0), 255);
  EXPECT_EQ(onednn::quantize_u8(NAN, 1.f, 100), 0);
  EXPECT_EQ(onednn::quantize_s8(1.f, 1.f / 127), 127);
  EXPECT_EQ(onednn::quantize_s8(-2.f, 1.f / 127), -127);
  EXPECT_EQ(onednn::quantize_s8(0.5f, 1.f), 0);
}

// Nodes without quantization hints, depthwise layers and graph outputs keep f32, each with its reason; the hints
// change nothing at fp32.
TEST(Int8Kernels, KeepsF32WithReasons) {
  Tensor x = random_tensor({1, 15, 15, 32}, 43);
  {
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(random_tensor({16, 32, 3, 3}, 44))},
                         {{"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))}});
    NodeTime t = Executor(one.g, int8_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "not calibrated (no int8 quantization for its input)");
  }
  {
    AttrMap a = conv_attrs({1, 1, 1, 1}, 0.01f, 128);
    a["group"] = Attribute(int64_t(32));
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(random_tensor({32, 1, 3, 3}, 45))}, a);
    NodeTime t = Executor(one.g, int8_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason.rfind("grouped convolution", 0), 0u) << t.precision.reason;
  }
  {
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(random_tensor({16, 32, 3, 3}, 46))},
                         conv_attrs({1, 1, 1, 1}, 0.01f, 128));
    ExecutorOptions o;
    o.kernels.precision = Precision::int8;  // lower_final_outputs off: int8 still takes the final layer
    NodeTime t = Executor(one.g, o).profile(one.feeds)[0];
    if (machine_has_vnni()) {
      EXPECT_EQ(t.precision.precision, Precision::int8);
      EXPECT_EQ(t.precision.reason, "final output: u8 x s8 product, f32 output");
    }
    Executor f32(one.g);
    NodeTime plain = f32.profile(one.feeds)[0];
    EXPECT_EQ(plain.precision.precision, Precision::fp32);
    EXPECT_EQ(plain.precision.reason, "");
    expect_fast_matches_reference(one, "", 1e-4, 1e-5);  // hints ignored at fp32
  }
  {  // channels-first: oneDNN 2.6 has only its reference int8 kernel (assign-layouts makes convolutions NHWC)
    OneOp one = build_op(OpKind::FusedConv, {input(random_tensor({1, 3, 17, 13}, 48)), constant(random_tensor({5, 3, 3, 3}, 49))},
                         conv_attrs({1, 1, 1, 1}, 0.01f, 128, {1, 1}, false));
    NodeTime t = Executor(one.g, int8_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    if (machine_has_vnni()) EXPECT_EQ(t.precision.reason, "int8 would run onednn:ref_int8:any, not on VNNI dot products");
  }
  {
    AttrMap a = conv_attrs({1, 1, 1, 1}, 0.01f, 300);
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(random_tensor({16, 32, 3, 3}, 47))}, a);
    EXPECT_CUVIL_ERROR(Executor(one.g, int8_options()).run(one.feeds), "quant_x_zero_point must be in 0..255");
  }
}

// Grouped (depthwise) convolutions run int8 where their activations arrive u8 (a link from the layer before,
// runtime/int8_links.h) or leave u8: against the reference on the dequantized u8 input and weights, with an f32
// output (tolerance from f32 summation, as check()) and with a u8 output (the reference quantized on the output's
// grid: at most one step off, where f32 summation moves a value across a rounding tie).
TEST(Int8Kernels, GroupedConvolutionsOnU8Activations) {
  struct G {
    Ints x;          // NHWC
    int64_t group, m;  // groups, output channels
    Ints pads, strides;
    int32_t zp;
    const char* act;
    std::string what;
  };
  std::vector<G> cases{
      {{1, 13, 11, 19}, 19, 19, {1, 1, 1, 1}, {1, 1}, 0, "Relu", "depthwise 3x3, 19 channels, zp 0, Relu"},
      {{1, 15, 14, 32}, 32, 32, {1, 0, 1, 1}, {2, 2}, 117, nullptr, "depthwise 3x3 stride 2, zp 117"},
      {{2, 7, 9, 12}, 12, 24, {1, 1, 1, 1}, {1, 1}, 255, "Clip", "channel multiplier 2, zp 255"},
      {{1, 9, 9, 12}, 4, 8, {0, 0, 0, 0}, {1, 1}, 30, nullptr, "4 groups of 3 -> 2 channels, no padding"},
  };
  uint32_t seed = 60;
  for (const G& c : cases) {
    SCOPED_TRACE(c.what);
    int64_t cin = c.x[3] / c.group;
    float xs = 3.f / 255;
    Tensor xq = Tensor::zeros(DType::u8, c.x);
    std::mt19937 rng(seed++);
    for (int64_t i = 0; i < xq.numel(); ++i) xq.data<uint8_t>()[i] = uint8_t(rng() % 256);  // 0 and 255 included
    Tensor xd = Tensor::zeros(DType::f32, c.x);
    for (int64_t i = 0; i < xq.numel(); ++i) xd.data<float>()[i] = float(int32_t(xq.data<uint8_t>()[i]) - c.zp) * xs;
    Tensor w = spread_channels(random_tensor({c.m, cin, 3, 3}, seed++), c.m, false), b = random_tensor({c.m}, seed++);
    AttrMap a = conv_attrs(c.pads, xs, c.zp, c.strides);
    a["group"] = Attribute(c.group);
    if (c.act) a["activation"] = Attribute(c.act);
    if (c.act && std::string(c.act) == "Clip") a["activation_params"] = Attribute(std::vector<double>{0.0, 0.5});
    std::vector<OpArg> deq{input(xd), constant(dequantized_weights(w, c.m, false, {})), constant(b)};
    std::vector<OpArg> mag_args = deq;
    for (OpArg& m : mag_args) m.t = map_abs(m.t);
    AttrMap plain = a;
    plain.erase("activation");
    plain.erase("activation_params");
    Tensor want = run_ref(OpKind::FusedConv, deq, a), mag = run_ref(OpKind::FusedConv, mag_args, plain);
    Tensor unquantized = run_ref(OpKind::FusedConv, {input(xd), constant(w), constant(b)}, a);
    double k = double(cin * 9);

    OneOp one = build_op(OpKind::FusedConv, {input(xq), constant(w), constant(b)}, a);
    Executor fast(one.g, int8_options());
    NodeTime t = fast.profile(one.feeds)[0];
    if (!machine_has_vnni()) {
      EXPECT_EQ(t.precision.precision, Precision::fp32);  // the boundary's f32 kernel, with its reason
      continue;
    }
    // oneDNN 2.6 runs depthwise layers on VNNI (brdgmm_dw, jit_uni_dw); other grouped shapes may go to its
    // gemm-based int8 kernel, which is declined with a reason and wrapped in conversions
    bool depthwise = c.group == c.x[3] && c.m == c.group;
    if (!depthwise && t.precision.precision == Precision::fp32) {
      EXPECT_NE(t.precision.reason.find("(u8 activations converted around it)"), std::string::npos) << t.precision.reason;
      continue;
    }
    ASSERT_EQ(t.precision.precision, Precision::int8) << t.precision.reason << " (" << t.impl << ")";
    Tensor got = fast.run(one.feeds)[0];
    ASSERT_EQ(got.shape(), want.shape());
    double worst_unquantized = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double g = got.data<float>()[i], wv = want.data<float>()[i];
      double tol = 8 * std::sqrt(k + 1) * 0x1p-24 * std::fabs(mag.data<float>()[i]) + 1e-30;
      ASSERT_LE(std::fabs(g - wv), tol) << "element " << i << ": " << g << " vs " << wv;
      worst_unquantized = std::max(worst_unquantized, std::fabs(g - double(unquantized.data<float>()[i])) / tol);
    }
    EXPECT_GT(worst_unquantized, 1.0) << "the tolerance does not tell quantized from f32 weights";

    // u8 out (from an f32 input too: a grouped layer writing a link quantizes its input itself)
    float ys = 2.f / 255;
    int64_t yzp = 90;
    a["quant_y_scale"] = Attribute(double(ys));
    a["quant_y_zero_point"] = Attribute(yzp);
    for (bool u8_in : {true, false}) {
      SCOPED_TRACE(u8_in ? "u8 in, u8 out" : "f32 in, u8 out");
      OneOp q = build_op(OpKind::FusedConv, {input(u8_in ? xq : xd), constant(w), constant(b)}, a);
      Executor ex(q.g, int8_options());
      NodeTime tq = ex.profile(q.feeds)[0];
      ASSERT_EQ(tq.precision.precision, Precision::int8) << tq.precision.reason;
      Tensor gq = ex.run(q.feeds)[0];
      ASSERT_EQ(gq.dtype(), DType::u8);
      int64_t off = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        int d = int(gq.data<uint8_t>()[i]) - int(onednn::quantize_u8(want.data<float>()[i], 1.f / ys, int32_t(yzp)));
        ASSERT_LE(std::abs(d), 1) << "element " << i;
        off += d != 0;
      }
      EXPECT_LE(off, want.numel() / 100 + 1);
    }
  }
}

TEST(Int8Kernels, PrecisionNameParses) {
  EXPECT_EQ(parse_precision("int8"), Precision::int8);
  EXPECT_EQ(precision_name(Precision::int8), "int8");
}

}  // namespace
