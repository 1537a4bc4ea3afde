// bf16 convolutions and matrix products (KernelOptions::precision = bf16) against the reference kernels run on
// the same inputs rounded to bf16: the kernels multiply bf16 operands exactly and accumulate in f32, so the only
// difference left is f32 summation order. Tolerance per element, derived from that: 8 sqrt(K + 1) u32 sum|x w|
// (u32 = 2^-24; sum|x w| from a reference run on |x|, |w|, |bias|, |sum|; the factor covers the activations'
// slopes and blocked summation). Each case also shows the tolerance discriminates: the same kernel's result is
// outside it against the unrounded inputs' reference, so a kernel that skipped (or truncated instead of rounding)
// the conversion fails. On a CPU without AVX512-BF16 (or oneDNN capped below it), the node must keep f32 and
// say why.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cmath>
#include <random>

#include "kernels/onednn/onednn_common.h"
#include "runtime/executor.h"
#include "support/half.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

bool machine_has_bf16() {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

Tensor random_tensor(Ints shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Tensor map(const Tensor& t, float (*f)(float)) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = f(r.data<float>()[i]);
  return r;
}
float round_bf16(float x) { return float(bf16_t(x)); }
float abs_f(float x) { return std::fabs(x); }

ExecutorOptions bf16_options() {
  ExecutorOptions o;
  o.kernels.precision = Precision::bf16;
  o.kernels.lower_final_outputs = true;  // the one node's output is the graph's
  return o;
}

struct Case {
  OpKind op;
  std::vector<OpArg> args;  // args[0] the activation, args[1] the weights (rounded); the rest (bias, sum) stay f32
  AttrMap attrs;
  int64_t k;                // products summed per output element
  bool require_bf16;        // on a bf16 machine this case must run bf16 (others may keep f32 with a reason)
  std::string what;
};

Tensor run_ref(OpKind op, const std::vector<OpArg>& args, const AttrMap& attrs) {
  OneOp one = build_op(op, args, attrs);
  return Executor(one.g, reference_kernels()).run(one.feeds)[0];
}

void check(const Case& c) {
  SCOPED_TRACE(c.what);
  OneOp one = build_op(c.op, c.args, c.attrs);
  Executor fast(one.g, bf16_options());
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  const PrecisionDecision& d = prof[0].precision;
  Tensor got = fast.run(one.feeds)[0];
  if (d.precision == Precision::fp32) {
    EXPECT_FALSE(machine_has_bf16() && c.require_bf16) << "kept f32 on a bf16 machine: " << d.reason;
    EXPECT_FALSE(d.reason.empty()) << "f32 kept without a reason";
    expect_fast_matches_reference(one, "", 1e-4, 1e-5);  // then it is the f32 kernel
    return;
  }
  EXPECT_TRUE(machine_has_bf16());
  std::string isa = prof[0].impl.substr(prof[0].impl.rfind(':') + 1);
  EXPECT_TRUE(isa.find("bf16") != std::string::npos || isa.find("amx") != std::string::npos)  // a bf16 ISA ran
      << prof[0].impl;
  EXPECT_TRUE(d.reason.empty()) << d.reason;

  std::vector<OpArg> rounded = c.args, magnitude = c.args;
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (c.args[i].kind == OpArg::Absent) continue;
    if (i < 2) rounded[i].t = map(c.args[i].t, round_bf16);
    magnitude[i].t = map(rounded[i].t, abs_f);
  }
  AttrMap plain = c.attrs;
  plain.erase("activation");
  plain.erase("activation_params");
  Tensor want = run_ref(c.op, rounded, c.attrs), mag = run_ref(c.op, magnitude, plain);
  Tensor unrounded = run_ref(c.op, c.args, c.attrs);
  ASSERT_EQ(got.shape(), want.shape());
  double worst_unrounded = 0;  // the largest |got - unrounded reference| / tolerance
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.data<float>()[i], w = want.data<float>()[i];
    double tol = 8 * std::sqrt(double(c.k) + 1) * 0x1p-24 * std::fabs(mag.data<float>()[i]) + 1e-30;
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "element " << i;
      continue;
    }
    ASSERT_LE(std::fabs(g - w), tol) << "element " << i << ": " << g << " vs " << w;
    worst_unrounded = std::max(worst_unrounded, std::fabs(g - double(unrounded.data<float>()[i])) / tol);
  }
  EXPECT_GT(worst_unrounded, 1.0) << "the tolerance does not tell bf16-rounded from f32 inputs";
}

AttrMap nhwc(Ints pads, Ints strides = {1, 1}, int64_t group = 1) {
  return {{"pads", Attribute(pads)}, {"strides", Attribute(strides)}, {"group", Attribute(group)},
          {"channels_last", Attribute(int64_t(1))}};
}

TEST(Bf16Kernels, ConvolutionsMatchBf16RoundedReference) {
  std::vector<Case> cases;
  {  // 3x3, odd sizes, bias + residual + Relu (ResNet's block end)
    AttrMap a = nhwc({1, 1, 1, 1});
    a["activation"] = Attribute("Relu");
    cases.push_back({OpKind::FusedConv,
                     {input(random_tensor({2, 9, 11, 6}, 1)), constant(random_tensor({10, 6, 3, 3}, 2)),
                      constant(random_tensor({10}, 3)), input(random_tensor({2, 9, 11, 10}, 4))},
                     a, 6 * 9, true, "3x3 NHWC + bias + sum + relu"});
  }
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 7, 7, 16}, 5)), constant(random_tensor({33, 16, 1, 1}, 6)),
                    constant(random_tensor({33}, 7))},
                   nhwc({0, 0, 0, 0}), 16, true, "1x1 NHWC, 33 outputs"});
  {
    AttrMap a = nhwc({1, 0, 2, 1}, {2, 2});
    a["activation"] = Attribute("Gelu");
    cases.push_back({OpKind::FusedConv,
                     {input(random_tensor({1, 15, 13, 24}, 8)), constant(random_tensor({40, 24, 3, 3}, 9)),
                      constant(random_tensor({40}, 10))},
                     a, 24 * 9, true, "3x3 stride 2, asymmetric pads, Gelu"});
  }
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 32, 32, 64}, 11)), constant(random_tensor({128, 64, 3, 3}, 12))},
                   nhwc({1, 1, 1, 1}), 64 * 9, true, "3x3 64 -> 128 (a Winograd shape in f32)"});
  cases.push_back({OpKind::FusedConv,
                   {input(random_tensor({1, 15, 15, 32}, 13)), constant(random_tensor({32, 1, 3, 3}, 14)),
                    constant(random_tensor({32}, 15))},
                   nhwc({1, 1, 1, 1}, {2, 2}, 32), 9, false, "depthwise 3x3 stride 2"});
  cases.push_back({OpKind::Conv,
                   {input(random_tensor({1, 3, 17, 13}, 16)), constant(random_tensor({5, 3, 3, 3}, 17)),
                    constant(random_tensor({5}, 18))},
                   {{"pads", Attribute(Ints{1, 1, 1, 1})}}, 27, false, "NCHW Conv, 3 input channels"});
  for (const Case& c : cases) check(c);
}

// Grouped (depthwise) convolutions run bf16 where their activations arrive bf16 (a link, runtime/bf16_links.h) or
// leave bf16 (`bf16_y`): against the reference on the same bf16 values and rounded weights; an f32 output within
// check()'s tolerance, a bf16 output within one bf16 step of the reference (rounded once).
TEST(Bf16Kernels, GroupedConvolutionsOnBf16Activations) {
  struct G {
    Ints x;  // NHWC
    int64_t group, m;
    Ints pads, strides;
    std::string what;
  };
  std::vector<G> cases{
      {{1, 13, 11, 19}, 19, 19, {1, 1, 1, 1}, {1, 1}, "depthwise 3x3, 19 channels"},
      {{1, 15, 14, 32}, 32, 32, {1, 0, 1, 1}, {2, 2}, "depthwise 3x3 stride 2, asymmetric pads"},
      {{2, 7, 9, 12}, 12, 24, {1, 1, 1, 1}, {1, 1}, "channel multiplier 2"},
      {{1, 9, 9, 12}, 4, 8, {0, 0, 0, 0}, {1, 1}, "4 groups of 3 -> 2 channels"},
  };
  uint32_t seed = 70;
  for (const G& c : cases) {
    SCOPED_TRACE(c.what);
    int64_t cin = c.x[3] / c.group;
    Tensor xf = map(random_tensor(c.x, seed++), round_bf16);  // the bf16 activation's values
    Tensor xb = Tensor::zeros(DType::bf16, c.x);
    for (int64_t i = 0; i < xf.numel(); ++i) static_cast<bf16_t*>(xb.raw())[i] = bf16_t(xf.data<float>()[i]);
    Tensor w = random_tensor({c.m, cin, 3, 3}, seed++), b = random_tensor({c.m}, seed++);
    AttrMap a = nhwc(c.pads, c.strides, c.group);
    a["activation"] = Attribute("Relu");
    Tensor want = run_ref(OpKind::FusedConv, {input(xf), constant(map(w, round_bf16)), constant(b)}, a);
    AttrMap plain = a;
    plain.erase("activation");
    Tensor mag = run_ref(OpKind::FusedConv, {input(map(xf, abs_f)), constant(map(map(w, round_bf16), abs_f)),
                                             constant(map(b, abs_f))}, plain);
    Tensor unrounded = run_ref(OpKind::FusedConv, {input(xf), constant(w), constant(b)}, a);
    double k = double(cin * 9);
    for (bool bf16_out : {false, true}) {
      SCOPED_TRACE(bf16_out ? "bf16 out" : "f32 out");
      AttrMap attrs = a;
      if (bf16_out) attrs["bf16_y"] = Attribute(int64_t(1));
      for (bool bf16_in : {true, false}) {
        if (!bf16_in && !bf16_out) continue;  // nothing linked: kept f32 (KeepsF32WithReasons)
        SCOPED_TRACE(bf16_in ? "bf16 in" : "f32 in");
        OneOp one = build_op(OpKind::FusedConv, {input(bf16_in ? xb : xf), constant(w), constant(b)}, attrs);
        Executor fast(one.g, bf16_options());
        NodeTime t = fast.profile(one.feeds)[0];
        if (!machine_has_bf16()) {
          EXPECT_EQ(t.precision.precision, Precision::fp32);
          continue;
        }
        bool depthwise = c.group == c.x[3] && c.m == c.group;  // others may keep f32 (converted around it)
        if (!depthwise && t.precision.precision == Precision::fp32) {
          EXPECT_FALSE(t.precision.reason.empty());
          continue;
        }
        ASSERT_EQ(t.precision.precision, Precision::bf16) << t.precision.reason << " (" << t.impl << ")";
        Tensor got = fast.run(one.feeds)[0];
        ASSERT_EQ(got.dtype(), bf16_out ? DType::bf16 : DType::f32);
        double worst_unrounded = 0;
        for (int64_t i = 0; i < want.numel(); ++i) {
          double g = bf16_out ? double(float(static_cast<const bf16_t*>(got.raw())[i])) : got.data<float>()[i];
          double wv = want.data<float>()[i];
          double tol = 8 * std::sqrt(k + 1) * 0x1p-24 * std::fabs(mag.data<float>()[i]) + 1e-30;
          if (bf16_out) tol += std::ldexp(std::fabs(wv) + tol, -8);  // one rounding to bf16 (half a step: 2^-9)
          ASSERT_LE(std::fabs(g - wv), tol) << "element " << i << ": " << g << " vs " << wv;
          worst_unrounded = std::max(worst_unrounded, std::fabs(g - double(unrounded.data<float>()[i])) / tol);
        }
        if (!bf16_out) EXPECT_GT(worst_unrounded, 1.0) << "the tolerance does not tell rounded from f32 weights";
      }
    }
  }
}

TEST(Bf16Kernels, MatrixProductsMatchBf16RoundedReference) {
  std::vector<Case> cases;
  cases.push_back({OpKind::MatMul, {input(random_tensor({37, 53}, 21)), constant(random_tensor({53, 29}, 22))}, {},
                   53, true, "MatMul 37x53 * 53x29"});
  cases.push_back({OpKind::MatMul, {input(random_tensor({1, 768}, 23)), constant(random_tensor({768, 64}, 24))},
                   {}, 768, true, "MatMul, one row"});
  {
    AttrMap a{{"activation", Attribute("Gelu")}};
    cases.push_back({OpKind::FusedMatMul,
                     {input(random_tensor({2, 19, 64}, 25)), constant(random_tensor({64, 48}, 26)),
                      constant(random_tensor({48}, 27)), input(random_tensor({2, 19, 48}, 28))},
                     a, 64, true, "FusedMatMul batched A + bias + residual + Gelu"});
  }
  cases.push_back({OpKind::Gemm,
                   {input(random_tensor({17, 33}, 29)), constant(random_tensor({21, 33}, 30)),
                    constant(random_tensor({1, 21}, 31))},
                   {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.5)}}, 33, true,
                   "Gemm transB, alpha 0.5, row bias"});
  for (const Case& c : cases) check(c);
}

// Edge values: ties of the f32 -> bf16 rounding (1 + 2^-8 rounds to 1, 1 + 3 * 2^-8 to 1 + 2^-6: to even), zeros,
// magnitudes from 1e-20 to 1e20, and a NaN that must reach only its own row.
TEST(Bf16Kernels, RoundsToNearestEvenAndKeepsSpecialValues) {
  Tensor a = Tensor::zeros(DType::f32, {5, 16}), b = Tensor::zeros(DType::f32, {16, 3});
  for (int64_t k = 0; k < 16; ++k) {
    a.data<float>()[0 * 16 + k] = 1.f + 0x1p-8f;
    a.data<float>()[1 * 16 + k] = 1.f + 3 * 0x1p-8f;
    a.data<float>()[2 * 16 + k] = 0.f;
    a.data<float>()[3 * 16 + k] = (k % 2 ? 1e20f : 1e-20f) * (k % 3 ? 1 : -1);
    a.data<float>()[4 * 16 + k] = k == 5 ? NAN : 1.f;
    for (int64_t j = 0; j < 3; ++j) b.data<float>()[k * 3 + j] = j == 0 ? 1.f : j == 1 ? -0.5f : 1e-10f;
  }
  OneOp one = build_op(OpKind::MatMul, {input(a), constant(b)});
  Executor fast(one.g, bf16_options());
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  if (prof[0].precision.precision != Precision::bf16) GTEST_SKIP() << "no bf16 here: " << prof[0].precision.reason;
  Tensor y = fast.run(one.feeds)[0];
  auto at = [&](int64_t i, int64_t j) { return y.data<float>()[i * 3 + j]; };
  EXPECT_EQ(at(0, 0), 16.f);              // sixteen ties rounded down to 1.0
  EXPECT_EQ(at(1, 0), 16.f * (1 + 0x1p-6f));  // and up to the even neighbour
  EXPECT_EQ(at(1, 1), -8.f * (1 + 0x1p-6f));
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(at(2, j), 0.f);
  float want = 0;
  for (int64_t k = 0; k < 16; ++k) want += float(bf16_t(a.data<float>()[3 * 16 + k]));
  EXPECT_NEAR(at(3, 0), want, 1e14);  // 1e20-sized terms, the tiny ones lost
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(at(4, j)));
}

// Decisions: a non-constant B and a product that writes the graph's output keep f32, each with its reason;
// fp32 (the default) lowers nothing and gives no reasons.
TEST(Bf16Kernels, KeepsF32WithReasons) {
  Tensor a = random_tensor({32, 64}, 41), b = random_tensor({64, 32}, 42);
  {
    OneOp one = build_op(OpKind::MatMul, {input(a), input(b)});
    NodeTime t = Executor(one.g, bf16_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "B not constant");
  }
  {
    OneOp one = build_op(OpKind::MatMul, {input(a), constant(b)});
    ExecutorOptions o;
    o.kernels.precision = Precision::bf16;
    NodeTime t = Executor(one.g, o).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "final output stays f32");
    NodeTime plain = Executor(one.g).profile(one.feeds)[0];
    EXPECT_EQ(plain.precision.precision, Precision::fp32);
    EXPECT_EQ(plain.precision.reason, "");
    EXPECT_EQ(plain.impl.find('['), std::string::npos) << plain.impl;
  }
  {  // depthwise: memory-bound, kept f32 whatever the machine
    Tensor x = random_tensor({1, 15, 15, 32}, 43), w = random_tensor({32, 1, 3, 3}, 44);
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w)}, nhwc({1, 1, 1, 1}, {1, 1}, 32));
    NodeTime t = Executor(one.g, bf16_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason.rfind("grouped convolution", 0), 0u) << t.precision.reason;
  }
  {
    OneOp one = build_op(OpKind::Softmax, {input(a)});
    NodeTime t = Executor(one.g, bf16_options()).profile(one.feeds)[0];
    EXPECT_EQ(t.precision.precision, Precision::fp32);
    EXPECT_EQ(t.precision.reason, "numerically sensitive: f32");
  }
}

// The ISA in oneDNN's kernel name decides: bf16 instructions (or AMX) only, not bf16 emulated on AVX-512.
TEST(Bf16Kernels, DispatchCheckReadsTheIsa) {
  std::string why;
  EXPECT_TRUE(onednn::bf16_dispatch_is_fast("brg:avx512_core_bf16", &why));
  EXPECT_TRUE(onednn::bf16_dispatch_is_fast("jit_1x1:avx512_core_bf16", &why));
  EXPECT_TRUE(onednn::bf16_dispatch_is_fast("brgconv:avx512_core_amx", &why));
  EXPECT_TRUE(why.empty());
  for (const char* slow : {"jit_bf16:avx512_core", "gemm:jit", "ref:any", "brg:avx2"}) {
    why.clear();
    EXPECT_FALSE(onednn::bf16_dispatch_is_fast(slow, &why)) << slow;
    EXPECT_EQ(why, std::string("bf16 would run onednn:") + slow + ", slower than f32 on this machine");
  }
}

TEST(Bf16Kernels, PrecisionNamesParse) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_CUVIL_ERROR(parse_precision("fp16"), "unknown precision 'fp16' (the precisions are fp32, bf16, int8)");
  EXPECT_CUVIL_ERROR(parse_precision(""), "unknown precision");
}

}  // namespace
