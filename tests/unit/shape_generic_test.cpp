// Shape-generic matrix products: one kernel per node serves every shape the node's symbolic dims allow. Each case
// runs one graph at many shapes (odd sizes, single rows, empty) against the reference kernels and checks that the
// kernel was prepared once, not per shape; with KernelOptions::shape_generic off, kernels are prepared per shape.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/gemm.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(Ints shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Shape symbolic(const std::vector<Dim>& dims) { return Shape(dims); }

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4 * (1 + std::fabs(want.data<float>()[i])))
        << what << " at " << i;
}

// A product with a constant B runs Cuvil's GEMM where the CPU has AVX-512, oneDNN's shape-generic gemm elsewhere.
std::string linear_impl() { return cpu::gemm_supported() ? "cpu:gemm:avx512" : "onednn:gemm:jit"; }

// Runs `one` at each set of feeds on a fast and a reference executor; expects equal results, the generic kernel
// `impl`, and a single preparation of it.
void expect_generic(OneOp& one, const std::vector<std::vector<Tensor>>& feeds_per_shape,
                    const std::string& impl = "onednn:gemm:jit") {
  Executor fast(one.g), ref(one.g, reference_kernels());
  for (const auto& feeds : feeds_per_shape) {
    std::string what = "shape " + feeds[0].type_str();
    expect_close(fast.run(feeds)[0], ref.run(feeds)[0], what);
    bool empty = false;
    for (const Tensor& t : feeds) empty |= t.numel() == 0;
    if (!empty) {
      EXPECT_EQ(fast.profile(feeds)[0].impl, impl) << what;
    }
  }
  EXPECT_EQ(fast.stats().kernels_prepared, 1);
  EXPECT_EQ(fast.stats().plans_built, int64_t(feeds_per_shape.size()));
}

TEST(ShapeGeneric, LinearWithBiasResidualAndActivation) {
  // FusedMatMul(x[b, s, 19], W[19, 23], bias, residual) + GELU: the rows b*s vary.
  Dim b = Dim::symbol("b"), s = Dim::symbol("s");
  Tensor w = random_tensor({19, 23}, 1), bias = random_tensor({23}, 2);
  OneOp one = build_op(OpKind::FusedMatMul,
                       {symbolic_input(random_tensor({2, 3, 19}, 3), symbolic({b, s, Dim(19)})), constant(w),
                        constant(bias), symbolic_input(random_tensor({2, 3, 23}, 4), symbolic({b, s, Dim(23)}))},
                       {{"activation", Attribute("Gelu")}, {"alpha", Attribute(0.5)}});
  std::vector<std::vector<Tensor>> feeds;
  uint32_t seed = 10;
  for (Ints bs : std::vector<Ints>{{1, 1}, {2, 3}, {1, 7}, {3, 64}, {5, 33}, {1, 200}, {0, 4}, {2, 0}})
    feeds.push_back({random_tensor({bs[0], bs[1], 19}, seed++), random_tensor({bs[0], bs[1], 23}, seed++)});
  expect_generic(one, feeds, linear_impl());
}

TEST(ShapeGeneric, GemmWithTransposedConstantB) {
  // ONNX's Linear: Gemm(A[n, 16], B[24, 16]^T, C[24]) with a dynamic batch.
  Dim n = Dim::symbol("n");
  OneOp one = build_op(OpKind::Gemm,
                       {symbolic_input(random_tensor({4, 16}, 1), symbolic({n, Dim(16)})),
                        constant(random_tensor({24, 16}, 2)), constant(random_tensor({24}, 3))},
                       {{"transB", Attribute(int64_t(1))}, {"beta", Attribute(0.75)}});
  std::vector<std::vector<Tensor>> feeds;
  for (int64_t rows : {1, 2, 5, 17, 128, 301}) feeds.push_back({random_tensor({rows, 16}, uint32_t(rows))});
  expect_generic(one, feeds, linear_impl());
}

TEST(ShapeGeneric, BatchedProductsWithEveryDimVarying) {
  // Attention: scores = alpha * Q K^T, then probabilities V; heads, sequence and width vary.
  Dim h = Dim::symbol("h"), s = Dim::symbol("s"), d = Dim::symbol("d");
  OneOp scores = build_op(OpKind::FusedMatMul,
                          {symbolic_input(random_tensor({2, 5, 8}, 1), symbolic({h, s, d})),
                           symbolic_input(random_tensor({2, 5, 8}, 2), symbolic({h, s, d}))},
                          {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.125)}});
  OneOp context = build_op(OpKind::MatMul, {symbolic_input(random_tensor({2, 5, 5}, 4), symbolic({h, s, s})),
                                            symbolic_input(random_tensor({2, 5, 8}, 5), symbolic({h, s, d}))});
  std::vector<std::vector<Tensor>> score_feeds, context_feeds;
  uint32_t seed = 20;
  for (Ints hsd : std::vector<Ints>{{1, 1, 1}, {4, 7, 64}, {12, 64, 64}, {3, 33, 17}, {2, 0, 8}}) {
    Tensor q = random_tensor({hsd[0], hsd[1], hsd[2]}, seed++), k = random_tensor({hsd[0], hsd[1], hsd[2]}, seed++);
    score_feeds.push_back({q, k});
    context_feeds.push_back({random_tensor({hsd[0], hsd[1], hsd[1]}, seed++), q});
  }
  expect_generic(scores, score_feeds);
  expect_generic(context, context_feeds);
}

TEST(ShapeGeneric, OffPreparesPerShapeAndStaticShapesStaySpecialized) {
  Dim n = Dim::symbol("n");
  Tensor w = random_tensor({16, 24}, 2);
  OneOp dynamic = build_op(OpKind::MatMul, {symbolic_input(random_tensor({4, 16}, 1), symbolic({n, Dim(16)})),
                                            constant(w)});
  ExecutorOptions off;
  off.kernels.shape_generic = false;
  Executor per_shape(dynamic.g, off), ref(dynamic.g, reference_kernels());
  for (int64_t rows : {3, 9, 40}) {
    std::vector<Tensor> feeds{random_tensor({rows, 16}, uint32_t(rows))};
    expect_close(per_shape.run(feeds)[0], ref.run(feeds)[0], "rows " + std::to_string(rows));
    // Without AVX-512 oneDNN's per-shape products are gemm:jit too: the kernel count below tells them apart.
    if (cpu::gemm_supported()) EXPECT_NE(per_shape.profile(feeds)[0].impl, "onednn:gemm:jit");
    EXPECT_EQ(per_shape.profile(feeds)[0].impl == "cpu:gemm:avx512", cpu::gemm_supported() && rows >= 16);
  }
  EXPECT_EQ(per_shape.stats().kernels_prepared, 3);

  OneOp fixed = build_op(OpKind::MatMul, {input(random_tensor({4, 16}, 1)), constant(w)});
  Executor e(fixed.g);
  e.run(fixed.feeds);
  if (cpu::gemm_supported()) EXPECT_NE(e.profile(fixed.feeds)[0].impl, "onednn:gemm:jit");
  EXPECT_EQ(e.stats().kernels_prepared, 1);
}

TEST(ShapeGeneric, BatchedWithResidualKeepsPerShapeKernels) {
  // oneDNN has only its slow reference implementation for alpha (a linear post-op) followed by a residual sum
  // on run-time dims: refused, the node gets a kernel per shape.
  Dim h = Dim::symbol("h"), s = Dim::symbol("s"), d = Dim::symbol("d");
  OneOp one = build_op(OpKind::FusedMatMul,
                       {symbolic_input(random_tensor({2, 5, 8}, 1), symbolic({h, s, d})),
                        symbolic_input(random_tensor({2, 5, 8}, 2), symbolic({h, s, d})), absent(),
                        symbolic_input(random_tensor({2, 5, 5}, 3), symbolic({h, s, s}))},
                       {{"transB", Attribute(int64_t(1))}, {"alpha", Attribute(0.125)}});
  Executor fast(one.g), ref(one.g, reference_kernels());
  for (Ints hs : std::vector<Ints>{{2, 5}, {3, 9}}) {
    std::vector<Tensor> feeds{random_tensor({hs[0], hs[1], 8}, 4), random_tensor({hs[0], hs[1], 8}, 5),
                              random_tensor({hs[0], hs[1], hs[1]}, 6)};
    expect_close(fast.run(feeds)[0], ref.run(feeds)[0], "shape " + feeds[0].type_str());
    std::string impl = fast.profile(feeds)[0].impl;
    // Per shape oneDNN has a JIT kernel for it with AVX-512 (brgemm); without, its reference is all it has.
    if (cpu::gemm_supported()) EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
  }
  EXPECT_EQ(fast.stats().kernels_prepared, 2);
}

TEST(ShapeGeneric, MismatchedBatchDimsAreNotGeneric) {
  // Broadcast batch dims (b vs 1) are resolved per shape: such a node keeps per-shape kernels.
  Dim b = Dim::symbol("b"), m = Dim::symbol("m");
  OneOp one = build_op(OpKind::MatMul, {symbolic_input(random_tensor({3, 4, 6}, 1), symbolic({b, m, Dim(6)})),
                                        symbolic_input(random_tensor({1, 6, 5}, 2), symbolic({Dim(1), Dim(6), Dim(5)}))});
  Executor fast(one.g), ref(one.g, reference_kernels());
  for (int64_t rows : {1, 4, 9}) {
    std::vector<Tensor> feeds{random_tensor({3, rows, 6}, uint32_t(rows)), random_tensor({1, 6, 5}, 7)};
    expect_close(fast.run(feeds)[0], ref.run(feeds)[0], "rows " + std::to_string(rows));
    if (cpu::gemm_supported()) EXPECT_NE(fast.profile(feeds)[0].impl, "onednn:gemm:jit");
  }
  EXPECT_EQ(fast.stats().kernels_prepared, 3);  // one per shape: no shape-generic kernel
}

}  // namespace
