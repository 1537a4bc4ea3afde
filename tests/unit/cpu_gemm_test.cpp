// Cuvil's f32 GEMM (src/kernels/cpu/gemm.h) against a double-precision product: row counts around the 8-row tile,
// columns around the 16-lane vector and the 48-column panel, K in one and in several blocks, transposed B, alpha,
// bias, a scaled residual (also written in place), every activation, strided rows, bit-equal results on one and
// two threads; and the MatMul, Gemm and FusedMatMul nodes that run on it against the reference kernels.
#include <gtest/gtest.h>

#include <bit>

#include <omp.h>

#include <cmath>
#include <random>

#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/workers.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Case {
  int64_t m, n, k;
  bool trans_b;
  float alpha;
  bool bias, sum, in_place;
  float sum_scale;
  nn::Activation act;
};

// Runs the case with row strides lda = k + 3 and ldc = n + 5 on `threads` threads; returns C (ldc-strided).
std::vector<float> run_gemm(const Case& c, const std::vector<float>& a, const std::vector<float>& b,
                            const std::vector<float>& bias, const std::vector<float>& sum, int threads) {
  int64_t lda = c.k + 3, ldc = c.n + 5;
  cpu::PackedB packed(b.data(), c.k, c.n, c.trans_b, c.alpha);
  std::vector<float> out(size_t(c.m * ldc), 12345.f);
  cpu::GemmEpilogue e;
  e.act = c.act;
  if (c.bias) e.bias = bias.data();
  if (c.sum) {
    if (c.in_place) {
      out = sum;
      e.sum = out.data();
    } else {
      e.sum = sum.data();
    }
    e.sum_scale = c.sum_scale;
  }
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  // As if a parallel region had just ended: the workers spin, so products of large weights but few FLOPs (batch-1
  // classifiers) take the threads too.
  if (threads > 1) cpu::note_parallel_end();
  cpu::gemm(a.data(), c.m, lda, packed, out.data(), ldc, e);
  omp_set_num_threads(saved);
  return out;
}

void check_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) +
               (c.trans_b ? " transB" : "") + " act " + std::to_string(int(c.act.kind)));
  int64_t lda = c.k + 3, ldc = c.n + 5;
  std::vector<float> a = random_floats(size_t(c.m * lda), seed), b = random_floats(size_t(c.k * c.n), seed + 1);
  std::vector<float> bias = random_floats(size_t(c.n), seed + 2), sum = random_floats(size_t(c.m * ldc), seed + 3);
  std::vector<float> one = run_gemm(c, a, b, bias, sum, 1), two = run_gemm(c, a, b, bias, sum, 2);
  ASSERT_EQ(one, two) << "the thread count changed the result";
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0, mag = 0;
      for (int64_t q = 0; q < c.k; ++q) {
        double bv = c.trans_b ? b[size_t(j * c.k + q)] : b[size_t(q * c.n + j)];
        double p = double(a[size_t(i * lda + q)]) * bv * double(c.alpha);
        acc += p;
        mag += std::fabs(p);
      }
      if (c.bias) acc += bias[size_t(j)], mag += std::fabs(bias[size_t(j)]);
      if (c.sum) acc += double(c.sum_scale) * sum[size_t(i * ldc + j)], mag += std::fabs(sum[size_t(i * ldc + j)]);
      double want = nn::apply_activation(c.act, acc);
      double got = one[size_t(i * ldc + j)];
      // f32 accumulation: a few ulp of the magnitudes summed, plus the activation's own error
      ASSERT_NEAR(got, want, 4e-7 * (mag + 1) * std::sqrt(double(c.k) + 1) + 2e-6 * std::fabs(want))
          << "at " << i << ", " << j;
    }
  // The padding between rows of C is never written (unless the residual put it there).
  if (!(c.sum && c.in_place)) {
    for (int64_t i = 0; i < c.m; ++i) EXPECT_EQ(one[size_t(i * ldc + c.n)], 12345.f) << "row " << i;
  }
}

TEST(CpuGemm, MatchesDoublePrecisionProduct) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512";
  uint32_t seed = 1;
  for (int64_t m : {1, 7, 8, 9, 23, 40})
    for (int64_t n : {1, 15, 16, 47, 48, 49, 100})
      check_case({m, n, 37, false, 1.f, false, false, false, 1.f, {}}, seed++);
  // K across the 1024 blocks (the first starts from bias + residual, the last applies the activation)
  for (int64_t k : {1, 2, 1024, 1025, 2100})
    check_case({17, 50, k, (k % 2) != 0, 0.5f, true, true, false, 0.25f, {nn::Act::Relu}}, seed++);
  // One row runs k in fours over separate accumulators: K around multiples of four and across the K blocks
  for (int64_t k : {1, 3, 4, 5, 63, 1024, 1027, 2101})
    check_case({1, 97, k, (k % 2) != 0, 0.5f, true, k > 4, false, 0.5f, {nn::Act::Clip, 0.f, 6.f}}, seed++);
  // Rows across the row blocks (A's rows x K block is at most 2 MB, 499 rows of a K block of 1050 floats)
  check_case({530, 20, 2100, true, 1.f, true, true, false, 0.5f, {nn::Act::Relu}}, seed++);
  // A residual written in place, over several K blocks
  check_case({33, 70, 2100, false, 1.f, true, true, true, 1.f, {}}, seed++);
  check_case({33, 70, 20, true, 2.f, false, true, true, -1.f, {}}, seed++);
  // Every activation
  using A = nn::Act;
  for (nn::Activation act : {nn::Activation{A::Relu}, nn::Activation{A::LeakyRelu, 0.1f}, nn::Activation{A::Clip, 0.f, 6.f},
                             nn::Activation{A::Sigmoid}, nn::Activation{A::Tanh}, nn::Activation{A::HardSigmoid, 0.2f, 0.5f},
                             nn::Activation{A::HardSwish}, nn::Activation{A::Gelu}, nn::Activation{A::GeluTanh},
                             nn::Activation{A::Elu, 1.5f}})
    check_case({19, 61, 45, false, 1.f, true, false, false, 1.f, act}, seed++);
  // Enough work for threads: split by panels (many columns) and by rows (few columns)
  check_case({64, 960, 300, false, 1.f, true, false, false, 1.f, {A::Gelu}}, seed++);
  check_case({500, 40, 300, true, 1.f, false, true, false, 1.f, {}}, seed++);
  // Few FLOPs but weights of 1 MB and more, on the spinning workers: a batch-1 classifier, and three rows
  check_case({1, 1000, 1280, false, 1.f, true, false, false, 1.f, {}}, seed++);
  check_case({3, 700, 400, true, 1.f, true, true, false, 1.f, {A::Relu}}, seed++);
}

// Relu and Clip run in the tile's registers, GELU through the unary loop per tile: bit for bit what the unary
// loops give on the plain product, over residuals holding NaN, infinities, huge, tiny and signed-zero values (so
// the activation sees them too).
TEST(CpuGemm, ActivationsEqualTheUnaryLoops) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512";
  using A = nn::Act;
  const float specials[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 1e-40f, -0.f, 0.f, 3.9f, -3.9f, 0.99f, -1.01f};
  for (nn::Activation act : {nn::Activation{A::Gelu}, nn::Activation{A::Relu}, nn::Activation{A::Clip, -0.5f, 2.f}}) {
    Case c{21, 100, 70, false, 1.f, true, true, false, 1.f, act};
    int64_t lda = c.k + 3, ldc = c.n + 5;
    std::vector<float> a = random_floats(size_t(c.m * lda), 7), b = random_floats(size_t(c.k * c.n), 8);
    std::vector<float> bias = random_floats(size_t(c.n), 9), sum = random_floats(size_t(c.m * ldc), 10);
    for (size_t i = 0; i < sum.size(); i += 5) sum[i] = specials[(i / 5) % std::size(specials)];
    std::vector<float> got = run_gemm(c, a, b, bias, sum, 2);
    Case plain = c;
    plain.act = {};
    std::vector<float> want = run_gemm(plain, a, b, bias, sum, 2);
    for (int64_t i = 0; i < c.m; ++i) cpu::activate_inplace(want.data() + i * ldc, c.n, act);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        float g = got[size_t(i * ldc + j)], w = want[size_t(i * ldc + j)];
        std::string at = std::to_string(int(act.kind)) + " at " + std::to_string(i) + ", " + std::to_string(j);
        if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << at;
        else EXPECT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(w)) << at << ": " << g << " vs " << w;
      }
  }
}

TEST(CpuGemm, SpecialValuesPropagate) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512";
  // A NaN or an infinity in A reaches exactly the outputs of its row; in B, exactly those of its column.
  int64_t m = 20, n = 50, k = 30;
  std::vector<float> a = random_floats(size_t(m * (k + 3)), 5), b = random_floats(size_t(k * n), 6);
  a[size_t(3 * (k + 3) + 7)] = std::numeric_limits<float>::quiet_NaN();
  b[size_t(11 * n + 40)] = std::numeric_limits<float>::infinity();
  Case c{m, n, k, false, 1.f, false, false, false, 1.f, {}};
  std::vector<float> out = run_gemm(c, a, b, {}, {}, 2);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float v = out[size_t(i * (n + 5) + j)];
      if (i == 3) EXPECT_TRUE(std::isnan(v)) << i << "," << j;
      else if (j == 40) EXPECT_TRUE(std::isinf(v) || std::isnan(v)) << i << "," << j;
      else EXPECT_TRUE(std::isfinite(v)) << i << "," << j;
    }
}

Tensor random_tensor(Ints shape, uint32_t seed) {
  std::vector<float> v = random_floats(size_t(shape_numel(shape)), seed);
  return tensor(v, std::move(shape));
}

void expect_gemm_matches_reference(OpKind op, const std::vector<OpArg>& args, AttrMap attrs, const std::string& what) {
  SCOPED_TRACE(what);
  expect_fast_matches_reference(build_op(op, args, std::move(attrs)), cpu::gemm_supported() ? "cpu:gemm" : "onednn:",
                                1e-4, 1e-5);
}

TEST(CpuGemm, MatrixProductNodesMatchReference) {
  expect_gemm_matches_reference(OpKind::MatMul,
                                {input(random_tensor({3, 7, 33}, 1)), constant(random_tensor({33, 50}, 2))}, {},
                                "MatMul batched x constant");
  expect_gemm_matches_reference(OpKind::MatMul,
                                {input(random_tensor({16, 5}, 3)), constant(random_tensor({1, 5, 3}, 4))}, {},
                                "MatMul x constant with a leading 1");
  expect_gemm_matches_reference(OpKind::Gemm,
                                {input(random_tensor({20, 11}, 5)), constant(random_tensor({13, 11}, 6)),
                                 constant(random_tensor({13}, 7))},
                                {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.5)}, {"beta", Attribute(0.75)}},
                                "Gemm transB alpha beta bias");
  expect_gemm_matches_reference(OpKind::Gemm,
                                {input(random_tensor({18, 6}, 8)), constant(random_tensor({6, 3}, 9)),
                                 input(random_tensor({18, 3}, 10))},
                                {{"beta", Attribute(0.25)}}, "Gemm C full, beta");
  expect_gemm_matches_reference(OpKind::FusedMatMul,
                                {input(random_tensor({2, 9, 64}, 11)), constant(random_tensor({100, 64}, 12)),
                                 input(random_tensor({100}, 13)), input(random_tensor({2, 9, 100}, 14))},
                                {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.125)},
                                 {"activation", Attribute("Gelu")}},
                                "FusedMatMul transB alpha runtime bias sum gelu");
  // One row (a batch-1 classifier) runs here too
  expect_gemm_matches_reference(OpKind::Gemm,
                                {input(random_tensor({1, 130}, 15)), constant(random_tensor({70, 130}, 16)),
                                 constant(random_tensor({70}, 17))},
                                {{"transB", Attribute(int64_t(1))}}, "Gemm one row transB bias");
}

// A squeeze-excitation block's layers after its global pool: convolutions over one pixel, as one-row products.
TEST(CpuGemm, OnePixelConvolutionsRunAsProducts) {
  using Floats = std::vector<double>;
  expect_gemm_matches_reference(OpKind::FusedConv,
                                {input(random_tensor({1, 37, 1, 1}, 21)), constant(random_tensor({19, 37, 1, 1}, 22)),
                                 constant(random_tensor({19}, 23))},
                                {{"activation", Attribute(std::string("HardSigmoid"))},
                                 {"activation_params", Attribute(Floats{0.2, 0.5})}},
                                "one pixel, bias, HardSigmoid");
  expect_gemm_matches_reference(OpKind::FusedConv,
                                {input(random_tensor({1, 1, 1, 70}, 24)), constant(random_tensor({33, 70, 1, 1}, 25)),
                                 constant(random_tensor({33}, 26)), input(random_tensor({1, 1, 1, 33}, 27))},
                                {{"channels_last", Attribute(int64_t(1))}, {"activation", Attribute(std::string("Relu"))}},
                                "one pixel, channels last, residual, Relu");
  expect_gemm_matches_reference(OpKind::FusedConv,
                                {input(random_tensor({1, 5, 1}, 28)), constant(random_tensor({3, 5, 1}, 29))}, {},
                                "one pixel, 1-D, no bias");
  // Padding makes the output larger than a pixel; a batch of two is two rows (oneDNN's)
  OneOp padded = build_op(OpKind::FusedConv,
                          {input(random_tensor({1, 8, 1, 1}, 30)), constant(random_tensor({4, 8, 1, 1}, 31))},
                          {{"pads", Attribute(Ints{1, 1, 1, 1})}});
  OneOp batch2 = build_op(OpKind::FusedConv,
                          {input(random_tensor({2, 8, 1, 1}, 32)), constant(random_tensor({4, 8, 1, 1}, 33))});
  for (OneOp* one : {&padded, &batch2}) expect_fast_matches_reference(*one, "onednn:", 1e-4, 1e-5);
}

TEST(CpuGemm, FewRowsAndOtherProductsStayWithOneDnn) {
  OneOp few = build_op(OpKind::MatMul, {input(random_tensor({15, 8}, 1)), constant(random_tensor({8, 4}, 2))});
  OneOp batched_b = build_op(OpKind::MatMul, {input(random_tensor({2, 16, 8}, 3)), constant(random_tensor({2, 8, 4}, 4))});
  OneOp variable_b = build_op(OpKind::MatMul, {input(random_tensor({32, 8}, 5)), input(random_tensor({8, 4}, 6))});
  for (OneOp* one : {&few, &batched_b, &variable_b}) expect_fast_matches_reference(*one, "onednn:", 1e-4, 1e-5);
  ExecutorOptions off;
  off.kernels.cpu_gemm = false;
  OneOp tall = build_op(OpKind::MatMul, {input(random_tensor({64, 8}, 7)), constant(random_tensor({8, 4}, 8))});
  Executor e(tall.g, off);
  EXPECT_EQ(e.profile(tall.feeds)[0].impl.rfind("onednn:", 0), 0u);
}

// On Intel cores products of 192 rows and more go to oneDNN's brgemm (faster there, matmul.cpp); elsewhere, and
// below 192 rows, they stay on the CPU GEMM. Both match the reference.
TEST(CpuGemm, TallProductsTakeOneDnnOnIntelCores) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "no AVX-512";
  bool intel = __builtin_cpu_is("intel");
  OneOp below = build_op(OpKind::MatMul, {input(random_tensor({191, 24}, 1)), constant(random_tensor({24, 50}, 2))});
  OneOp tall = build_op(OpKind::MatMul, {input(random_tensor({2, 96, 24}, 3)), constant(random_tensor({24, 50}, 4))});
  expect_fast_matches_reference(below, "cpu:gemm", 1e-4, 1e-5);
  expect_fast_matches_reference(tall, intel ? "onednn:" : "cpu:gemm", 1e-4, 1e-5);
}

}  // namespace
