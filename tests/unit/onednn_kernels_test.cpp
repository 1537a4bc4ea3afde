// The oneDNN kernels: what the op-test harness (tests/ops, where convolutions, pools, matrix products and the
// fused ops meet the reference with oneDNN forced on its own) does not cover -- threaded or not by whether the
// workers spin, Winograd chosen and matching, NaN and infinity through pools.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <random>

#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/workers.h"
#include "kernels/onednn/onednn_common.h"
#include "runtime/executor.h"
#include "runtime/kernel_selection.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Runs the node on the fast kernels and on the reference kernels; expects the same result and a oneDNN kernel.
void expect_matches_reference(OpKind op, const std::vector<OpArg>& args, AttrMap attrs, const std::string& what) {
  SCOPED_TRACE(what);
  expect_fast_matches_reference(build_op(op, args, std::move(attrs)), "onednn:", 1e-4, 1e-5);
}

// A convolution of 0.2-2 MFLOP (a late MobileNetV2 depthwise layer) has a threaded and a single-threaded
// primitive, the first run while the workers still spin from a parallel region, the second once they sleep: both
// match the reference.
TEST(OnednnKernels, SmallConvolutionThreadedOnlyWhileWorkersSpin) {
  Tensor x = random_tensor({1, 14, 14, 96}, 21);  // NHWC: 14 x 14 x 96 x 9 x 2 = 0.34 MFLOP
  Tensor w = random_tensor({96, 1, 3, 3}, 22), b = random_tensor({96}, 23);
  AttrMap attrs{{"group", Attribute(int64_t(96))}, {"pads", Attribute(Ints{1, 1, 1, 1})},
                {"channels_last", Attribute(int64_t(1))}, {"activation", Attribute(std::string("Clip"))},
                {"activation_params", Attribute(std::vector<double>{0, 6})}};
  OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b)}, attrs);
  std::vector<PrepareInput> in{{DType::f32, x.shape(), nullptr, true},
                               {DType::f32, w.shape(), &w, true},
                               {DType::f32, b.shape(), &b, true}};
  EXPECT_NE(dynamic_cast<onednn::SpinAwareKernel*>(prepare_kernel(*one.node, in, KernelOptions{}).get()), nullptr);
  Executor fast(one.g), ref(one.g, reference_kernels());
  Tensor want = ref.run(one.feeds)[0];
  for (bool spinning : {true, false}) {
    SCOPED_TRACE(spinning ? "workers spinning" : "workers asleep");
    if (spinning) cpu::note_parallel_end();
    else cpu::detail::last_region_end_ns.store(cpu::now_ns() - 10 * cpu::kSpinWindowNs);
    Tensor got = fast.run(one.feeds)[0];
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4 * (1 + std::fabs(want.data<float>()[i]))) << i;
  }
}

// A convolution above 2 MFLOP made for several threads runs on a single-threaded twin, made at its first run on
// one thread (the executor's count on a loaded machine, kernels/workers.h): oneDNN would fork its primitive's
// threads whatever OpenMP's count. Direct and Winograd, with a residual sum and odd sizes; both ways match the
// reference, and the threaded primitive still runs when the count is back.
TEST(OnednnKernels, LargeConvolutionRunsSingleThreadedTwinOnOneThread) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs two OpenMP threads";
  for (bool wino : {false, true}) {
    SCOPED_TRACE(wino ? "3x3 (Winograd where oneDNN has it)" : "5x3 stride 2");
    Tensor x = random_tensor({1, 23, 19, 24}, 41);  // NHWC
    Tensor w = random_tensor({40, 24, wino ? 3 : 5, 3}, 42), b = random_tensor({40}, 43);
    AttrMap attrs{{"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))},
                  {"activation", Attribute("Relu")}};
    if (!wino) attrs["strides"] = Attribute(Ints{2, 2});
    OneOp probe = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b)}, attrs);
    std::vector<int64_t> ys = probe.node->output(0)->type().shape.static_dims();
    Tensor sum = random_tensor(ys, 44);
    OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum)}, attrs);
    std::vector<PrepareInput> in{{DType::f32, x.shape(), nullptr, true},
                                 {DType::f32, w.shape(), &w, true},
                                 {DType::f32, b.shape(), &b, true},
                                 {DType::f32, sum.shape(), nullptr, true}};
    std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, KernelOptions{});
    ASSERT_NE(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
    Executor ref(one.g, reference_kernels());
    Tensor want = ref.run(one.feeds)[0];
    int threads = omp_get_max_threads();
    for (int t : {1, threads, 1}) {
      SCOPED_TRACE("run at " + std::to_string(t) + " thread(s)");
      omp_set_num_threads(t);
      std::vector<Tensor> outs{Tensor::zeros(DType::f32, ys)};
      std::vector<const Tensor*> ins{&x, &w, &b, &sum};
      KernelContext ctx(*one.node, ins, &outs, nullptr);
      k->run(ctx);
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(outs[0].data<float>()[i], want.data<float>()[i], 1e-4 * (1 + std::fabs(want.data<float>()[i])))
            << i;
    }
    omp_set_num_threads(threads);
  }
}

// The same for a product above 2 MFLOP on oneDNN (a batched one: no constant B for the CPU GEMM).
TEST(OnednnKernels, LargeProductRunsSingleThreadedTwinOnOneThread) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs two OpenMP threads";
  Tensor a = random_tensor({4, 67, 101}, 51), b = random_tensor({4, 101, 53}, 52);  // 2.9 MFLOP
  OneOp one = build_op(OpKind::MatMul, {input(a), input(b)}, {});
  std::vector<PrepareInput> in{{DType::f32, a.shape(), nullptr, true}, {DType::f32, b.shape(), nullptr, true}};
  std::unique_ptr<PreparedKernel> k = prepare_kernel(*one.node, in, KernelOptions{});
  ASSERT_NE(dynamic_cast<onednn::SpinAwareKernel*>(k.get()), nullptr) << k->impl_name();
  Executor ref(one.g, reference_kernels());
  Tensor want = ref.run(one.feeds)[0];
  int threads = omp_get_max_threads();
  for (int t : {1, threads, 1}) {
    SCOPED_TRACE("run at " + std::to_string(t) + " thread(s)");
    omp_set_num_threads(t);
    std::vector<Tensor> outs{Tensor::zeros(DType::f32, {4, 67, 53})};
    std::vector<const Tensor*> ins{&a, &b};
    KernelContext ctx(*one.node, ins, &outs, nullptr);
    k->run(ctx);
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(outs[0].data<float>()[i], want.data<float>()[i], 1e-4 * (1 + std::fabs(want.data<float>()[i]))) << i;
  }
  omp_set_num_threads(threads);
}

// 3x3 stride-1 convolutions with enough channels run Winograd in a blocked layout: check it is chosen and
// matches, with the residual sum (reordered into the blocked layout first) and an activation.
TEST(OnednnKernels, WinogradConvolutionMatchesReference) {
  // oneDNN 2.6 has Winograd kernels for AVX-512 only (a CPU without it runs the direct kernels).
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), avx512 = unsigned(dnnl::cpu_isa::avx512_core);
  if ((isa & avx512) != avx512)
    GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU (no AVX-512)";
  Tensor x = random_tensor({1, 14, 12, 32}, 31);  // NHWC
  Tensor w = random_tensor({64, 32, 3, 3}, 32), b = random_tensor({64}, 33);
  Tensor sum = random_tensor({1, 14, 12, 64}, 34);
  AttrMap attrs{{"pads", Attribute(Ints{1, 1, 1, 1})}, {"channels_last", Attribute(int64_t(1))},
                {"activation", Attribute("Relu")}};
  OneOp one = build_op(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum)}, attrs);
  Executor fast(one.g);
  EXPECT_NE(fast.profile(one.feeds)[0].impl.find("wino"), std::string::npos) << fast.profile(one.feeds)[0].impl;
  expect_matches_reference(OpKind::FusedConv, {input(x), constant(w), constant(b), input(sum)}, attrs,
                           "Winograd FusedConv NHWC + sum + relu");
  ExecutorOptions direct;
  direct.kernels.winograd = false;
  Executor no_wino(one.g, direct);
  EXPECT_EQ(no_wino.profile(one.feeds)[0].impl.find("wino"), std::string::npos);
}

// Winograd convolutions keep their blocked activations in the thread's buffers (thread_buffer), shared by every
// such kernel on the thread, unless the blocked layout pads channels (20 here: memory of its own, zeroed padding).
// Chained convolutions of different sizes, and another executor's in between, leave stale contents behind: each
// run must still match the reference, and repeat its bits.
TEST(OnednnKernels, WinogradSharedBlockedBuffersAcrossKernels) {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), avx512 = unsigned(dnnl::cpu_isa::avx512_core);
  if ((isa & avx512) != avx512)
    GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU (no AVX-512)";
  auto chain = [](std::vector<int64_t> channels, int64_t hw, uint32_t seed) {
    auto g = std::make_shared<Graph>();
    Value* v = g->add_input("x", TensorType{DType::f32, Shape::of({1, channels[0], hw, hw + 3})});
    for (size_t i = 1; i < channels.size(); ++i) {
      Value* w = g->add_constant("w" + std::to_string(i), random_tensor({channels[i], channels[i - 1], 3, 3}, seed + i));
      Value* b = g->add_constant("b" + std::to_string(i), random_tensor({channels[i]}, seed + 50 + i));
      v = g->add_node(OpKind::Conv, {v, w, b}, {"c" + std::to_string(i)}, {{"pads", Attribute(Ints{1, 1, 1, 1})}})
              ->output(0);
      v = g->add_node(OpKind::Relu, {v}, {"r" + std::to_string(i)})->output(0);
    }
    g->add_output(v);
    infer_shapes(*g);
    verify(*g);
    return g;
  };
  auto a = chain({32, 64, 20, 48, 64}, 14, 1), b = chain({64, 64, 64}, 20, 100);
  Tensor xa = random_tensor({1, 32, 14, 17}, 7), xb = random_tensor({1, 64, 20, 23}, 8);
  ExecutorOptions one;
  one.threads = 1;
  Executor ea(a, one), eb(b, one);
  int wino = 0;
  for (const NodeTime& t : ea.profile({xa})) wino += t.impl.find("wino") != std::string::npos;
  EXPECT_GE(wino, 2);
  std::vector<float> first_a = values<float>(ea.run({xa})[0]);
  std::vector<float> first_b = values<float>(eb.run({xb})[0]);
  EXPECT_EQ(values<float>(ea.run({xa})[0]), first_a);
  EXPECT_EQ(values<float>(eb.run({xb})[0]), first_b);
  expect_values(tensor(first_a, ea.run({xa})[0].shape()), as_f64(run_graph(a, {xa})[0]), 1e-3);
  expect_values(tensor(first_b, eb.run({xb})[0].shape()), as_f64(run_graph(b, {xb})[0]), 1e-3);
}

// oneDNN's max pool keeps the other operand of an ordered compare, so a NaN in a window vanished (one NaN pixel
// into ResNet-18 gave finite logits). Every pool must give the reference's NaN and infinities, wherever they sit.
TEST(OnednnKernels, PoolsPropagateNanAndInfinity) {
  AttrMap mp{{"kernel_shape", Attribute(Ints{3, 3})}, {"strides", Attribute(Ints{2, 2})},
             {"pads", Attribute(Ints{1, 1, 1, 1})}};
  AttrMap mp_nhwc = mp;
  mp_nhwc["channels_last"] = Attribute(int64_t(1));
  AttrMap ap{{"kernel_shape", Attribute(Ints{2, 3})}};
  struct Case {
    OpKind op;
    AttrMap attrs;
    const char* what;
  };
  std::vector<Case> cases = {{OpKind::MaxPool, mp, "MaxPool"},
                             {OpKind::MaxPool, mp_nhwc, "MaxPool NHWC"},
                             {OpKind::GlobalMaxPool, {}, "GlobalMaxPool"},
                             {OpKind::AveragePool, ap, "AveragePool"},
                             {OpKind::GlobalAveragePool, {}, "GlobalAveragePool"}};
  for (const Case& c : cases) {
    for (int64_t at : {int64_t(0), int64_t(77), int64_t(2 * 5 * 13 * 11 - 1)}) {
      for (float special : {std::nanf(""), INFINITY, -INFINITY}) {
        SCOPED_TRACE(std::string(c.what) + " special value at " + std::to_string(at) + ": " + std::to_string(special));
        Tensor x = random_tensor({2, 5, 13, 11}, 23);
        x.data<float>()[at] = special;
        OneOp one = build_op(c.op, {input(x)}, c.attrs);
        Executor fast(one.g), ref(one.g, reference_kernels());
        ASSERT_EQ(fast.profile(one.feeds)[0].impl.rfind("onednn:", 0), 0u);
        Tensor got = fast.run(one.feeds)[0], want = ref.run(one.feeds)[0];
        int64_t specials = 0;
        for (int64_t i = 0; i < want.numel(); ++i) {
          float g = got.data<float>()[i], w = want.data<float>()[i];
          if (std::isnan(w)) {
            ASSERT_TRUE(std::isnan(g)) << "element " << i << ": got " << g << ", expected NaN";
          } else if (std::isinf(w)) {
            ASSERT_EQ(g, w) << "element " << i;
          } else {
            ASSERT_NEAR(g, w, 1e-5 * (1 + std::fabs(w))) << "element " << i;
            continue;
          }
          ++specials;
        }
        // The special value reached the output, unless a max pool's window holds something larger (-Inf).
        if (!(special < 0 && (c.op == OpKind::MaxPool || c.op == OpKind::GlobalMaxPool))) EXPECT_GT(specials, 0);
      }
    }
  }
}

}  // namespace
