// int8 convolutions and products, and bf16 products, made for several threads get a single-threaded twin like
// f32's (kernels/onednn/onednn_common.h, SpinAwareKernel): on a loaded machine the executor runs on one thread,
// and oneDNN would still fork the threads a primitive was made for. The twin is made at the first run on one
// thread (one more primitive), reused after, and both give the same result (int8: integer products, the same
// per-element dequantization, so bit for bit; bf16: within f32 summation of bf16 products).
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "runtime/executor.h"
#include "runtime/kernel_selection.h"
#include "int8_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::test::int8;

namespace {

using Ints = std::vector<int64_t>;

KernelOptions options_at(Precision p) {
  KernelOptions o;
  o.precision = p;
  o.lower_final_outputs = true;
  return o;
}

// An executor sets the calling thread's OpenMP count and keeps it, so an earlier test's one-thread executor would
// leave these tests on one thread (they skipped in a whole run): they ask for every core first.
bool use_every_core() {
  omp_set_num_threads(omp_get_num_procs());
  return omp_get_max_threads() >= 2;
}

// Runs `k` at 1, all, 1 OpenMP threads; returns the three outputs and the primitives each run created.
struct Runs {
  std::vector<Tensor> outs;
  std::vector<int64_t> created;
};
Runs run_at_thread_counts(PreparedKernel& k, const Node& node, const std::vector<const Tensor*>& ins, const Ints& y,
                          DType out_type) {
  Runs r;
  int threads = omp_get_max_threads();
  for (int t : {1, threads, 1}) {
    omp_set_num_threads(t);
    std::vector<Tensor> outs{Tensor::zeros(out_type, y)};
    KernelContext ctx(node, ins, &outs, nullptr);
    int64_t before = onednn::primitives_created();
    k.run(ctx);
    r.created.push_back(onednn::primitives_created() - before);
    r.outs.push_back(outs[0]);
  }
  omp_set_num_threads(threads);
  return r;
}

void expect_identical(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

// The int8 kernels' own passes between primitives (an f32 residual added, Relu'd and quantized into a u8 output;
// a u8 residual dequantized into an f32 output; dynamic quantization's row scales, bias, sum and Relu) split
// between threads above 64 Ki elements: bit-identical to the one-thread twin, which runs them serially.
TEST(ReducedPrecisionTwin, Int8PassesSplitBetweenThreadsBitIdentically) {
  if (!use_every_core()) GTEST_SKIP() << "needs two cores";
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 keeps f32 here";
  Tensor x = random_tensor({1, 40, 37, 16}, 101), w = random_tensor({48, 16, 3, 3}, 102);  // y: 71040 elements
  Tensor b = random_tensor({48}, 103), sum_f = random_tensor({1, 40, 37, 48}, 104, -2.f, 3.f);
  Tensor sum_q = Tensor::zeros(DType::u8, sum_f.shape());
  for (int64_t i = 0; i < sum_q.numel(); ++i) sum_q.data<uint8_t>()[i] = uint8_t((i * 37) % 251);
  for (bool u8_sum : {false, true}) {
    SCOPED_TRACE(u8_sum ? "u8 residual into an f32 output" : "f32 residual into a u8 output");
    AttrMap attrs{{"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))},
                  {"activation", Attribute("Relu")}, {"quant_x_scale", Attribute(2.0 / 255)},
                  {"quant_x_zero_point", Attribute(int64_t(128))}};
    if (u8_sum) {
      attrs["quant_sum_scale"] = Attribute(5.0 / 255);
      attrs["quant_sum_zero_point"] = Attribute(int64_t(102));
    } else {
      attrs["quant_y_scale"] = Attribute(0.03);
      attrs["quant_y_zero_point"] = Attribute(int64_t(0));
    }
    const Tensor& sum = u8_sum ? sum_q : sum_f;
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum)}, attrs);
    std::vector<PrepareInput> in{{DType::f32, x.shape(), nullptr, true},
                                 {DType::f32, w.shape(), &w, true},
                                 {DType::f32, b.shape(), &b, true},
                                 {sum.dtype(), sum.shape(), nullptr, true}};
    std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::int8));
    ASSERT_EQ(k->precision.precision, Precision::int8) << k->precision.reason;
    Runs r = run_at_thread_counts(*k, *one.node, {&x, &w, &b, &sum}, {1, 40, 37, 48}, u8_sum ? DType::f32 : DType::u8);
    EXPECT_EQ(r.created[0], 1) << "no one-thread twin: the serial passes did not run";
    expect_identical(r.outs[0], r.outs[1]);
  }
  {
    SCOPED_TRACE("dynamic product: rows' scales, bias, sum, Relu");
    Tensor a = random_tensor({300, 64}, 111), bw = random_tensor({64, 256}, 112), bias = random_tensor({256}, 113);
    Tensor s = random_tensor({300, 256}, 114);
    AttrMap attrs{{"quant_x_scale", Attribute(-1.0)}, {"activation", Attribute("Relu")}};
    OneOp one = build_op(OpKind::FusedMatMul, {input(a), constant(bw), constant(bias), input(s)}, attrs);
    std::vector<PrepareInput> in{{DType::f32, a.shape(), nullptr, true},
                                 {DType::f32, bw.shape(), &bw, true},
                                 {DType::f32, bias.shape(), &bias, true},
                                 {DType::f32, s.shape(), nullptr, true}};
    std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::int8));
    ASSERT_EQ(k->precision.precision, Precision::int8) << k->precision.reason;
    Runs r = run_at_thread_counts(*k, *one.node, {&a, &bw, &bias, &s}, {300, 256}, DType::f32);
    EXPECT_EQ(r.created[0], 1) << "no one-thread twin: the serial passes did not run";
    expect_identical(r.outs[0], r.outs[1]);
  }
}

// 3x3 and 1x1 over 19 x 23 x 64 -> 96 channels (48 and 5.4 MFLOP), a zero point, bias + residual + Relu.
TEST(ReducedPrecisionTwin, Int8ConvolutionRunsSingleThreadedTwinOnOneThread) {
  if (!use_every_core()) GTEST_SKIP() << "needs two cores";
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 keeps f32 here";
  for (bool one_by_one : {false, true}) {
    SCOPED_TRACE(one_by_one ? "1x1" : "3x3");
    int64_t kk = one_by_one ? 1 : 3, pad = one_by_one ? 0 : 1;
    Tensor x = random_tensor({1, 19, 23, 64}, 61), w = random_tensor({96, 64, kk, kk}, 62);
    Tensor b = random_tensor({96}, 63), sum = random_tensor({1, 19, 23, 96}, 64);
    AttrMap attrs{{"pads", Attribute(Ints{pad, pad, pad, pad})}, {"channels_last", Attribute(int64_t(1))},
                  {"activation", Attribute("Relu")}, {"quant_x_scale", Attribute(2.0 / 255)},
                  {"quant_x_zero_point", Attribute(int64_t(128))}};
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum)}, attrs);
    std::vector<PrepareInput> in{{DType::f32, x.shape(), nullptr, true},
                                 {DType::f32, w.shape(), &w, true},
                                 {DType::f32, b.shape(), &b, true},
                                 {DType::f32, sum.shape(), nullptr, true}};
    std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::int8));
    ASSERT_NE(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
    EXPECT_EQ(k->precision.precision, Precision::int8) << k->precision.reason;
    Runs r = run_at_thread_counts(*k, *one.node, {&x, &w, &b, &sum}, {1, 19, 23, 96}, DType::f32);
    EXPECT_EQ(r.created, (std::vector<int64_t>{1, 0, 0})) << "the twin: made once, at the first one-thread run";
    expect_identical(r.outs[0], r.outs[1]);
    expect_identical(r.outs[2], r.outs[1]);
    // And what the executor computes (the threaded primitive): the same.
    Executor fast(one.g, int8_options());
    expect_identical(fast.run(one.feeds)[0], r.outs[1]);
  }
}

TEST(ReducedPrecisionTwin, Int8ProductRunsSingleThreadedTwinOnOneThread) {
  if (!use_every_core()) GTEST_SKIP() << "needs two cores";
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 keeps f32 here";
  Tensor a = random_tensor({67, 101}, 71), b = random_tensor({101, 153}, 72), bias = random_tensor({153}, 73);
  AttrMap attrs{{"quant_x_scale", Attribute(2.0 / 255)}, {"quant_x_zero_point", Attribute(int64_t(100))}};
  OneOp one = build_op(OpKind::FusedMatMul, {input(a), constant(b), constant(bias)}, attrs);
  std::vector<PrepareInput> in{{DType::f32, a.shape(), nullptr, true},
                               {DType::f32, b.shape(), &b, true},
                               {DType::f32, bias.shape(), &bias, true}};
  std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::int8));
  ASSERT_NE(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
  EXPECT_EQ(k->precision.precision, Precision::int8) << k->precision.reason;
  Runs r = run_at_thread_counts(*k, *one.node, {&a, &b, &bias}, {67, 153}, DType::f32);
  EXPECT_EQ(r.created, (std::vector<int64_t>{1, 0, 0}));
  expect_identical(r.outs[0], r.outs[1]);
  expect_identical(r.outs[2], r.outs[1]);
}

// Below 2 MFLOP int8 runs on one thread anyway: no twin.
TEST(ReducedPrecisionTwin, SmallInt8ProductHasNoTwin) {
  if (!machine_has_vnni()) GTEST_SKIP() << "no VNNI: int8 keeps f32 here";
  Tensor a = random_tensor({4, 64}, 81), b = random_tensor({64, 32}, 82);
  AttrMap attrs{{"quant_x_scale", Attribute(2.0 / 255)}, {"quant_x_zero_point", Attribute(int64_t(128))}};
  OneOp one = build_op(OpKind::FusedMatMul, {input(a), constant(b)}, attrs);
  std::vector<PrepareInput> in{{DType::f32, a.shape(), nullptr, true}, {DType::f32, b.shape(), &b, true}};
  std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::int8));
  EXPECT_EQ(k->precision.precision, Precision::int8) << k->precision.reason;
  EXPECT_EQ(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
}

TEST(ReducedPrecisionTwin, Bf16ProductRunsSingleThreadedTwinOnOneThread) {
  if (!use_every_core()) GTEST_SKIP() << "needs two cores";
  Tensor a = random_tensor({67, 101}, 91), b = random_tensor({101, 153}, 92);
  OneOp one = build_op(OpKind::FusedMatMul, {input(a), constant(b)}, {});
  std::vector<PrepareInput> in{{DType::f32, a.shape(), nullptr, true}, {DType::f32, b.shape(), &b, true}};
  std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, options_at(Precision::bf16));
  if (k->precision.precision != Precision::bf16) GTEST_SKIP() << "bf16 keeps f32 here: " << k->precision.reason;
  ASSERT_NE(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
  Runs r = run_at_thread_counts(*k, *one.node, {&a, &b}, {67, 153}, DType::f32);
  EXPECT_EQ(r.created, (std::vector<int64_t>{1, 0, 0}));
  // bf16 products with f32 sums: the split may differ between one thread and two, so within f32 summation.
  for (const Tensor& t : {r.outs[0], r.outs[2]})
    for (int64_t i = 0; i < t.numel(); ++i) {
      float g = t.data<float>()[i], want = r.outs[1].data<float>()[i];
      ASSERT_NEAR(g, want, 1e-5 * 101 * (1 + std::fabs(want))) << i;
    }
}

}  // namespace
