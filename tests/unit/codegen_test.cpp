// Generated kernels (src/codegen): what the op-test harness (tests/ops, where every generated op meets the
// reference on random inputs with special values, odd sizes, broadcasting patterns and dtypes) does not cover --
// ops in fused chains, random chains under random schedules (which must agree bit for bit with each other and
// with the reference within tolerance), the math functions' error bounds over wide input sweeps, f64, narrow and
// 16-bit types, strided operands, shape-generic reuse, the disk cache's handling of corrupt entries, the lowering's
// stages and refusals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include <unistd.h>

#include "codegen/llvm/jit.h"
#include "codegen/lower.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/prepared_kernel.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;
using namespace cuvil::codegen;

namespace {

using Ints = std::vector<int64_t>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor random_tensor(DType dt, const Ints& shape, uint32_t seed, bool specials = true, float lo = -3, float hi = 3) {
  std::mt19937 rng(seed);
  int64_t n = shape_numel(shape);
  Tensor t = Tensor::zeros(dt, shape);
  static const float kSpecial[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e30f, -1e30f, 88.8f, -104.5f, 1e-30f};
  std::uniform_real_distribution<float> d(lo, hi);
  std::uniform_int_distribution<int> di(-5, 5);
  for (int64_t i = 0; i < n; ++i) {
    switch (dt) {
      case DType::f32:
        t.data<float>()[i] = specials && i % 7 == 3 ? kSpecial[(i / 7) % std::size(kSpecial)] : d(rng);
        break;
      case DType::i32: t.data<int32_t>()[i] = di(rng); break;
      case DType::i64: t.data<int64_t>()[i] = di(rng); break;
      case DType::boolean: t.data<bool>()[i] = di(rng) > 0; break;
      case DType::f16:
        t.data<f16_t>()[i] = f16_t(specials && i % 7 == 3 ? kSpecial[(i / 7) % std::size(kSpecial)] : d(rng));
        break;
      case DType::bf16:
        t.data<bf16_t>()[i] = bf16_t(specials && i % 7 == 3 ? kSpecial[(i / 7) % std::size(kSpecial)] : d(rng));
        break;
      // Narrow integers over their whole range (sums and products wrap), small values every third element.
      case DType::i8: t.data<int8_t>()[i] = int8_t(i % 3 ? rng() : uint32_t(di(rng))); break;
      case DType::u8: t.data<uint8_t>()[i] = uint8_t(i % 3 ? rng() : uint32_t(di(rng) + 5)); break;
      case DType::i16: t.data<int16_t>()[i] = int16_t(i % 3 ? rng() : uint32_t(di(rng))); break;
      case DType::u16: t.data<uint16_t>()[i] = uint16_t(i % 3 ? rng() : uint32_t(di(rng) + 5)); break;
      case DType::u32: t.data<uint32_t>()[i] = i % 3 ? uint32_t(rng()) : uint32_t(di(rng) + 5); break;
      case DType::u64:  // every bit, the top one included, in use; small values every third element
        t.data<uint64_t>()[i] = i % 3 ? uint64_t(rng()) << 32 | rng() : uint64_t(di(rng) + 5);
        break;
      case DType::f64: {  // all 53 bits in use, and magnitudes f32 cannot hold
        static const double kWide[] = {1e300, -1e-300, 4e-320, 3.0000000000000004};
        double v = double(d(rng)) * (1 + std::ldexp(double(rng() % 65536), -40));
        if (specials && i % 7 == 3) v = kSpecial[(i / 7) % std::size(kSpecial)];
        if (specials && i % 11 == 5) v = kWide[(i / 11) % std::size(kWide)];
        t.data<double>()[i] = v;
        break;
      }
      default: ADD_FAILURE() << "dtype";
    }
  }
  return t;
}

// Elements equal (NaN matching NaN, same infinities), within `tol` relative-or-absolute otherwise.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= tol * (1 + std::fabs(w));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " = " << g << ", reference " << w;
    }
  }
}

// Shape arithmetic: every output an integer tensor of at most 8 elements, which fuse-elementwise leaves alone
// (shape inference follows such values symbolically).
bool is_shape_arithmetic(const Graph& g) {
  for (const Value* v : g.outputs())
    if (!is_integer(v->dtype()) || !v->shape().is_static() || shape_numel(v->shape().static_dims()) > 8) return false;
  return true;
}

// Runs graph `g` (inferred) after fuse-elementwise on the fast kernels, and before it on the reference kernels.
// Expects that a FusedKernel formed and that its kernel is generated code (for shape arithmetic: that nothing
// was fused).
void check_fused_graph(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& feeds, double tol,
                       const std::string& what, int want_kernels = -1) {
  std::vector<Tensor> want = Executor(g, reference_kernels()).run(feeds);
  bool shape_arithmetic = is_shape_arithmetic(*g);
  // g is fused in place: the reference results are already taken.
  const std::shared_ptr<Graph>& fused = g;
  PassContext ctx;
  ctx.verify_each = true;
  run_pass(*create_pass("fuse-elementwise"), *fused, ctx);
  int kernels = 0;
  for (auto& n : fused->nodes()) kernels += n->op() == OpKind::FusedKernel;
  if (shape_arithmetic) {
    EXPECT_EQ(kernels, 0) << what << ": shape arithmetic was fused";
    std::vector<Tensor> got = Executor(fused, ExecutorOptions{}).run(feeds);
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], tol, what + " output " + std::to_string(i));
    return;
  }
  ASSERT_GT(kernels, 0) << what << ": nothing was fused";
  for (auto& n : fused->nodes())
    if (n->op() == OpKind::FusedKernel) {
      std::vector<Ints> shapes;
      for (const Value* v : n->inputs()) {
        size_t gi = size_t(std::find(fused->inputs().begin(), fused->inputs().end(), v) - fused->inputs().begin());
        shapes.push_back(gi < feeds.size() ? feeds[gi].shape() : v->shape().static_dims());
      }
      std::string why;
      EXPECT_TRUE(lower_body(*AttrReader(*n).g("body"), shapes, &why)) << what << ": " << why;
    }
  if (want_kernels >= 0) {
    EXPECT_EQ(kernels, want_kernels) << what;
  }
  Executor ex(fused, ExecutorOptions{});
  std::vector<NodeTime> prof = ex.profile(feeds);
  for (const NodeTime& t : prof) {
    if (t.node->op() == OpKind::FusedKernel) {
      EXPECT_EQ(t.impl.rfind("jit:", 0), 0u) << what << ": ran " << t.impl;
    }
  }
  std::vector<Tensor> got = ex.run(feeds);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], tol, what + " output " + std::to_string(i));
}

void check_op(OpKind op, const std::vector<OpArg>& args, AttrMap attrs, double tol, const std::string& what) {
  OneOp one = build_op(op, args, attrs);
  check_fused_graph(one.g, one.feeds, tol, what + " " + std::string(op_name(op)), 1);
}

// Runs one `op` node (reading `feeds`, its outputs named `outs`) through the -O1 pipeline on the fast kernels,
// against the reference kernels on the node as it is: every node left must be a generated kernel (which runs as
// jit code) or one `allowed` accepts.
void check_optimized(OpKind op, const std::vector<Tensor>& feeds, const AttrMap& attrs,
                     const std::vector<std::string>& outs, double tol, const std::string& what,
                     const std::function<bool(const Node&)>& allowed) {
  auto build = [&]() {
    auto g = std::make_shared<Graph>();
    std::vector<Value*> ins;
    for (size_t i = 0; i < feeds.size(); ++i)
      ins.push_back(g->add_input("in" + std::to_string(i), {feeds[i].dtype(), Shape::of(feeds[i].shape())}));
    Node* n = g->add_node(op, ins, outs, attrs);
    for (Value* v : n->outputs()) g->add_output(v);
    infer_shapes(*g);
    return g;
  };
  std::vector<Tensor> want = Executor(build(), reference_kernels()).run(feeds);
  auto g = build();
  PassContext ctx;
  ctx.verify_each = true;
  optimize(*g, 1, ctx);
  int kernels = 0;
  for (auto& n : g->nodes()) {
    kernels += n->op() == OpKind::FusedKernel;
    EXPECT_TRUE(n->op() == OpKind::FusedKernel || allowed(*n)) << what << ": " << op_name(n->op()) << " left out";
  }
  EXPECT_GT(kernels, 0) << what;
  Executor ex(g, ExecutorOptions{});
  for (const NodeTime& t : ex.profile(feeds))
    if (t.node->op() == OpKind::FusedKernel) {
      EXPECT_EQ(t.impl.rfind("jit:", 0), 0u) << what << ": ran " << t.impl;
    }
  std::vector<Tensor> got = ex.run(feeds);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], tol, what + " output " + std::to_string(i));
}

// Integer results of at most 8 elements: shape arithmetic, which fusion leaves to the op-by-op kernels.
bool small_integer_result(const Node& n) {
  const Value* v = n.output(0);
  return is_integer(v->dtype()) && v->shape().is_static() && shape_numel(v->shape().static_dims()) <= 8;
}

// Fuses `one` into a generated kernel and runs it on inputs the kernel checks before running (a zero divisor, a
// target that is no class, ...): the body runs op by op, and the reference's error names the node and says
// `message`.
void expect_reported(OneOp& one, const std::string& message, const std::string& what) {
  PassContext ctx;
  run_pass(*create_pass("fuse-elementwise"), *one.g, ctx);
  ASSERT_EQ(one.g->nodes().front()->op(), OpKind::FusedKernel) << what;
  try {
    Executor(one.g, ExecutorOptions{}).run(one.feeds);
    ADD_FAILURE() << what << " was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node_under_test"), std::string::npos) << e.what();
  }
}

// Integer results of a few elements are shape arithmetic: left to the op-by-op kernels; larger ones generate.
TEST(Codegen, ShapeArithmeticIsNotFused) {
  Tensor dims = Tensor::from_vector<int64_t>({2, 3, 5}, {3}), four = Tensor::scalar<int64_t>(4);
  OneOp small = build_op(OpKind::Mul, {input(dims), constant(four)});
  check_fused_graph(small.g, small.feeds, 0, "i64[3] * 4");
  EXPECT_EQ(small.g->nodes().front()->op(), OpKind::Mul);
  OneOp large = build_op(OpKind::Mul, {input(random_tensor(DType::i64, {9}, 1)), constant(four)});
  check_fused_graph(large.g, large.feeds, 0, "i64[9] * 4", 1);
}

struct Broadcast {
  Ints a, b;
};
const Broadcast kPatterns[] = {
    {{37}, {37}},                   // same shape, odd size
    {{3, 5, 7}, {3, 5, 7}},         // same shape, rank 3
    {{2, 3, 4, 5}, {3, 1, 1}},      // per-channel
    {{4, 33}, {33}},                // row broadcast (inner contiguous)
    {{4, 1}, {1, 5}},               // outer product: both broadcast somewhere
    {{6, 17}, {6, 1}},              // inner broadcast of one operand
    {{2, 3, 4}, {}},                // scalar
    {{}, {}},                       // scalars only
    {{1000}, {1000}},               // several vectors plus a tail
    {{0, 3}, {3}},                  // empty
};

// Dropout in inference (no training_mode, a constant false one, or a ratio of 0) is the identity, with a mask of
// trues; training with a ratio above 0 is random and stays with the reference kernel, which reports it.
TEST(Codegen, InferenceDropout) {
  Tensor x = random_tensor(DType::f32, {5, 33}, 1);
  check_op(OpKind::Dropout, {input(x)}, {}, 0, "no training_mode");
  OneOp masked = build_op(OpKind::Dropout, {input(x), constant(Tensor::scalar<float>(0.3f)),
                                            constant(Tensor::scalar<bool>(false))}, {}, 2);
  check_fused_graph(masked.g, masked.feeds, 0, "with its mask", 1);
  OneOp zero = build_op(OpKind::Dropout, {input(x), constant(Tensor::scalar<float>(0.0f)),
                                          constant(Tensor::scalar<bool>(true))}, {}, 2);
  check_fused_graph(zero.g, zero.feeds, 0, "training with ratio 0", 1);
  std::string why;
  OneOp random = build_op(OpKind::Dropout, {input(x), constant(Tensor::scalar<float>(0.3f)),
                                            constant(Tensor::scalar<bool>(true))});
  EXPECT_FALSE(can_generate(*random.node, &why));
  EXPECT_NE(why.find("random"), std::string::npos) << why;
}

TEST(Codegen, RowReductions) {
  uint32_t seed = 300;
  for (Ints shape : {Ints{1}, Ints{5}, Ints{3, 31}, Ints{2, 3, 64}, Ints{4, 1000}, Ints{2, 1}, Ints{7, 33}}) {
    Tensor x = random_tensor(DType::f32, shape, seed++, false);
    check_op(OpKind::Softmax, {input(x)}, {}, 1e-6, "Softmax " + Shape::of(shape).str());
    check_op(OpKind::LogSoftmax, {input(x)}, {}, 1e-6, "LogSoftmax");
    int64_t last = shape.back();
    Tensor scale = random_tensor(DType::f32, {last}, seed++, false), bias = random_tensor(DType::f32, {last}, seed++, false);
    check_op(OpKind::LayerNormalization, {input(x), input(scale), input(bias)}, {{"epsilon", 1e-5}}, 2e-5, "LayerNorm");
    check_op(OpKind::LayerNormalization, {input(x), constant(scale), absent()}, {}, 2e-5, "LayerNorm no bias");
    // With the Mean and InvStdDev outputs (one value per row), over the last axis and, where there is one, two.
    for (int64_t axis : {int64_t(-1), int64_t(shape.size() > 1 ? -2 : -1)}) {
      Tensor sc = random_tensor(DType::f32, {axis == -1 ? last : shape[shape.size() - 2] * last}, 7000 + seed, false);
      if (axis == -2) sc = Tensor::from_vector<float>(std::vector<float>(sc.data<float>(), sc.data<float>() + sc.numel()),
                                                      {shape[shape.size() - 2], last});
      OneOp three = build_op(OpKind::LayerNormalization, {input(x), input(sc)}, {{"axis", axis}}, 3);
      check_fused_graph(three.g, three.feeds, 2e-5, "LayerNorm with Mean and InvStdDev, axis " + std::to_string(axis), 1);
    }
    Tensor near_one = random_tensor(DType::f32, shape, seed++, false, 0.5f, 1.5f);  // positive sums
    for (int64_t keep : {0, 1}) {
      for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceL1,
                        OpKind::ReduceL2, OpKind::ReduceSumSquare, OpKind::ReduceLogSumExp})
        check_op(op, {input(x), constant(vec<int64_t>({-1}))}, {{"keepdims", keep}}, 2e-6, "Reduce");
      check_op(OpKind::ReduceLogSum, {input(near_one), constant(vec<int64_t>({-1}))}, {{"keepdims", keep}}, 1e-6, "Reduce");
      for (OpKind op : {OpKind::ReduceProd, OpKind::ReduceL1, OpKind::ReduceSumSquare})
        for (DType dt : {DType::i32, DType::i64})
          check_op(op, {input(random_tensor(dt, shape, seed++)), constant(vec<int64_t>({-1}))}, {{"keepdims", keep}}, 0,
                   "integer Reduce");
      check_op(OpKind::ReduceSum, {input(random_tensor(DType::i64, shape, seed++)), constant(vec<int64_t>({-1}))},
               {{"keepdims", keep}}, 0, "ReduceSum i64");
      check_op(OpKind::ReduceMax, {input(random_tensor(DType::i32, shape, seed++)), constant(vec<int64_t>({-1}))},
               {{"keepdims", keep}}, 0, "ReduceMax i32");
    }
  }
  // Trailing blocks of more than one axis; NaN and infinities inside rows.
  Tensor x = random_tensor(DType::f32, {3, 4, 5}, 9, true);
  check_op(OpKind::ReduceMax, {input(x), constant(vec<int64_t>({1, 2}))}, {}, 0, "ReduceMax 2 axes specials");
  check_op(OpKind::ReduceSum, {input(x), absent()}, {}, 1e-6, "ReduceSum all axes");
  check_op(OpKind::LayerNormalization, {input(random_tensor(DType::f32, {3, 4, 5}, 10, false)),
                                        input(random_tensor(DType::f32, {4, 5}, 11, false))},
           {{"axis", int64_t(1)}}, 2e-5, "LayerNorm over 2 axes");
  check_op(OpKind::Softmax, {input(x)}, {}, 1e-6, "Softmax specials");
  // Axes of size 1 among the reduced ones reduce nothing: mean over (0, 2, 3) at batch 1 is the block [2, 3] (a row
  // kernel), over (0, 1) of [1, C, S] the block [1] with S after it (a columns kernel); with and without keepdims.
  Tensor nchw = random_tensor(DType::f32, {1, 5, 6, 7}, 13, false), ncs = random_tensor(DType::f32, {1, 6, 35}, 14, false);
  for (int64_t keep : {0, 1}) {
    for (OpKind op : {OpKind::ReduceMean, OpKind::ReduceSum, OpKind::ReduceMax})
      check_op(op, {input(nchw), constant(vec<int64_t>({0, 2, 3}))}, {{"keepdims", keep}}, 1e-6,
               "axes (0, 2, 3) at batch 1");
    check_op(OpKind::ReduceMean, {input(ncs), constant(vec<int64_t>({0, 1}))}, {{"keepdims", keep}}, 1e-6,
             "axes (0, 1) at batch 1");
  }
  // A float max/min keeps whether it saw a NaN beside the running extremum: one NaN anywhere in a row (the vector
  // loop's first or last block, the masked tail) makes the row's result NaN, rows of -inf or +inf stay so, and one
  // +inf among numbers is the maximum.
  for (int64_t cols : {int64_t(33), int64_t(64), int64_t(100), int64_t(1000)}) {
    int64_t rows = 9;
    Tensor y = random_tensor(DType::f32, {rows, cols}, 12, false);
    float* p = y.data<float>();
    for (int64_t r = 0; r < 6; ++r) p[r * cols + (r == 0 ? 0 : r == 1 ? cols - 1 : (r * 37) % cols)] = kNaN;
    for (int64_t c = 0; c < cols; ++c) p[6 * cols + c] = -kInf, p[7 * cols + c] = kInf;
    p[8 * cols + 5] = kInf;  // Softmax: inf - inf is NaN there, the rest -inf
    for (OpKind op : {OpKind::ReduceMax, OpKind::ReduceMin})
      check_op(op, {input(y), constant(vec<int64_t>({-1}))}, {}, 0, "one NaN a row, " + std::to_string(cols));
    check_op(OpKind::Softmax, {input(y)}, {}, 1e-6, "Softmax one NaN a row, " + std::to_string(cols));
  }
  for (OpKind op : {OpKind::ReduceLogSumExp, OpKind::ReduceL2, OpKind::ReduceL1, OpKind::ReduceSumSquare})
    check_op(op, {input(x), constant(vec<int64_t>({2}))}, {}, 1e-6, "specials");
  // Sums and squares beyond f32 whose f64 results are not: L2 and LogSum scale by the largest magnitude.
  Tensor big = Tensor::zeros(DType::f32, {3, 4});
  const float bv[] = {3e38f, 3e38f, -1e38f, 1, 1e30f, 1e30f, 1e-40f, 0, 1e-40f, 2e-40f, 0, 1e-45f};
  std::copy(std::begin(bv), std::end(bv), big.data<float>());
  for (OpKind op : {OpKind::ReduceL2, OpKind::ReduceLogSum})
    check_op(op, {input(big), constant(vec<int64_t>({1}))}, {}, 1e-6, "beyond f32");
}

// f64 tensors compute in f64 for the ops whose lowering is arithmetic, and call the C library for exp, log, tanh,
// erf, sin, cos, tan, atan, pow, expm1 and the hyperbolic and inverse trigonometric functions; f32 products
// accumulate in f64 as the reference's do.
TEST(Codegen, DoublePrecision) {
  uint32_t seed = 900;
  for (Ints shape : {Ints{37}, Ints{3, 5, 7}, Ints{1031}}) {
    for (OpKind op : {OpKind::Abs, OpKind::Neg, OpKind::Relu, OpKind::Sign, OpKind::Floor, OpKind::Ceil, OpKind::Round,
                      OpKind::Sqrt, OpKind::Reciprocal, OpKind::Softsign, OpKind::HardSwish, OpKind::IsNaN})
      check_op(op, {input(random_tensor(DType::f64, shape, seed++))}, {}, 0, "f64 " + Shape::of(shape).str());
    check_op(OpKind::LeakyRelu, {input(random_tensor(DType::f64, shape, seed++))}, {{"alpha", 0.1}}, 0, "f64");
    check_op(OpKind::HardSigmoid, {input(random_tensor(DType::f64, shape, seed++))}, {{"alpha", 0.3}, {"beta", 0.4}},
             0, "f64");
  }
  for (const Broadcast& p : kPatterns)
    for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min, OpKind::Less,
                      OpKind::GreaterOrEqual, OpKind::Equal})
      check_op(op, {input(random_tensor(DType::f64, p.a, seed++)), input(random_tensor(DType::f64, p.b, seed++))}, {},
               0, "f64 " + Shape::of(p.a).str() + " " + Shape::of(p.b).str());
  check_op(OpKind::Where,
           {input(random_tensor(DType::boolean, {4, 33}, seed++)), input(random_tensor(DType::f64, {33}, seed++)),
            input(random_tensor(DType::f64, {4, 33}, seed++))},
           {}, 0, "f64 Where");
  check_op(OpKind::Clip, {input(random_tensor(DType::f64, {99}, seed++)), constant(Tensor::scalar<double>(-0.5)),
                          constant(Tensor::scalar<double>(0.7))}, {}, 0, "f64 Clip");
  // Casts both ways between f64 and f32 (rounding to nearest, overflowing to infinity), the integers and bool.
  for (DType other : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    for (bool to_f64 : {false, true}) {
      DType from = to_f64 ? other : DType::f64, to = to_f64 ? DType::f64 : other;
      check_op(OpKind::Cast, {input(random_tensor(from, {77}, seed++, true, -1e10f, 1e10f))},
               {{"to", int64_t(dtype_onnx_id(to))}}, 0,
               std::string("Cast ") + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)));
    }
  }
  for (Ints shape : {Ints{5}, Ints{3, 31}, Ints{4, 1000}, Ints{7, 33}}) {
    Tensor x = random_tensor(DType::f64, shape, seed++, false);
    for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceL1,
                      OpKind::ReduceL2, OpKind::ReduceSumSquare, OpKind::ReduceProd})
      check_op(op, {input(x), constant(vec<int64_t>({-1}))}, {}, 1e-13, "f64 Reduce " + Shape::of(shape).str());
    check_op(OpKind::ArgMax, {input(x)}, {{"axis", int64_t(-1)}}, 0, "f64 ArgMax");
    int64_t last = shape.back();
    check_op(OpKind::LayerNormalization,
             {input(x), input(random_tensor(DType::f64, {last}, seed++, false)),
              input(random_tensor(DType::f64, {last}, seed++, false))},
             {{"epsilon", 1e-5}}, 1e-12, "f64 LayerNorm");
    // f32 products: in f64 like the reference, rounded once at the end.
    Tensor f = random_tensor(DType::f32, shape, seed++, false, 0.5f, 1.5f);
    check_op(OpKind::ReduceProd, {input(f), constant(vec<int64_t>({-1}))}, {}, 1e-7, "f32 ReduceProd");
  }
  // An f32 product that overflows and underflows midway (in any order) but not in f64; specials.
  Tensor wide = Tensor::zeros(DType::f32, {3, 6});
  const float wv[] = {1e30f, 1e30f, 1e-30f, 1e-30f, 3, 0.5f, 1e-40f, 1e38f, 1e38f, 1e-38f, 2, 1, kNaN, 1, 2, 3, kInf, 0};
  std::copy(std::begin(wv), std::end(wv), wide.data<float>());
  check_op(OpKind::ReduceProd, {input(wide), constant(vec<int64_t>({1}))}, {}, 1e-7, "f32 ReduceProd beyond f32");
  // f64 math calls the C library, as the reference does: equal bits, specials and the edges of each domain
  // included (overflow, log of 0 and negatives, pow's special cases). f64 -> 16-bit floats is not generated (it
  // would round twice), with a reason.
  Tensor d = random_tensor(DType::f64, {3, 67}, seed++, true);
  const double ds[] = {0.0, -0.0, 1e-310, -1e-310, 710.0, -746.0, 1e300, -1e300, 0.5, -0.5, 1.0, -1.0, 30.0};
  for (size_t i = 0; i < std::size(ds); ++i) d.data<double>()[i * 13] = ds[i];
  for (OpKind op : {OpKind::Exp, OpKind::Log, OpKind::Tanh, OpKind::Erf, OpKind::Sin, OpKind::Cos, OpKind::Tan,
                    OpKind::Atan})
    check_op(op, {input(d)}, {}, 0, "f64 math");
  Tensor e = random_tensor(DType::f64, {3, 67}, seed++, true);
  check_op(OpKind::Pow, {input(d), input(e)}, {}, 0, "f64 Pow tensors");
  for (double p : {0.1, 3.0, -2.5, 0.5})
    check_op(OpKind::Pow, {input(d), constant(Tensor::scalar<double>(p))}, {}, 0, "f64 Pow " + std::to_string(p));
  check_op(OpKind::Pow, {input(d), input(random_tensor(DType::f32, {67}, seed++))}, {}, 0, "f64 Pow f32 exponent");
  check_op(OpKind::Pow, {input(random_tensor(DType::f32, {3, 67}, seed++)), input(e)}, {}, 0, "f32 Pow f64 exponent");
  // Composites of those without f32 cut-offs, within a few f64 ulps of the reference's formulas.
  for (OpKind op : {OpKind::Sigmoid, OpKind::Softplus, OpKind::Gelu, OpKind::Softmax, OpKind::LogSoftmax})
    check_op(op, {input(d)}, {}, 1e-14, "f64 composite");
  check_op(OpKind::Gelu, {input(d)}, {{"approximate", std::string("tanh")}}, 1e-14, "f64 composite");
  Tensor pos = random_tensor(DType::f64, {3, 67}, seed++, false, 0.0f, 5.0f);
  for (OpKind op : {OpKind::ReduceLogSum, OpKind::ReduceLogSumExp})
    check_op(op, {input(pos), constant(vec<int64_t>({-1}))}, {}, 1e-14, "f64 composite reduction");
  // expm1 (Elu, Celu) and the hyperbolic and inverse trigonometric functions call the C library too.
  for (OpKind op : {OpKind::Sinh, OpKind::Cosh, OpKind::Asin, OpKind::Acos, OpKind::Asinh, OpKind::Acosh,
                    OpKind::Atanh})
    check_op(op, {input(d)}, {}, 0, "f64 library function");
  check_op(OpKind::Elu, {input(d)}, {{"alpha", 1.5}}, 0, "f64 Elu");
  check_op(OpKind::Celu, {input(d)}, {{"alpha", 0.7}}, 0, "f64 Celu");
  check_op(OpKind::Selu, {input(d)}, {}, 1e-14, "f64 Selu");
  // f64 -> f16/bf16 through f32, as the reference converts (the same two roundings; bf16 truncates): equal bits,
  // halfway cases, overflow and values below f32's range included.
  Tensor h = random_tensor(DType::f64, {3, 67}, seed++, true);
  const double hs[] = {1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048, 65520.0, 65519.99, 1e300, 1e-300, -5.960464477539063e-08,
                       1.0 + 1.0 / 256 + 1e-12};
  for (size_t i = 0; i < std::size(hs); ++i) h.data<double>()[i * 7 + 1] = hs[i];
  for (DType to : {DType::f16, DType::bf16})
    check_op(OpKind::Cast, {input(h)}, {{"to", int64_t(dtype_onnx_id(to))}}, 0, "Cast f64->" + std::string(dtype_name(to)));
  // round_bf16 (opset 19+): to nearest even, from f64 (through f32) and f32.
  check_op(OpKind::Cast, {input(h)}, {{"to", int64_t(16)}, {"round_bf16", int64_t(1)}}, 0, "Cast f64->bf16 rounding");
  check_op(OpKind::Cast, {input(random_tensor(DType::f32, {3, 67}, seed++))}, {{"to", int64_t(16)}, {"round_bf16", int64_t(1)}},
           0, "Cast f32->bf16 rounding");
  check_op(OpKind::Pow, {input(random_tensor(DType::f16, {3, 67}, seed++)), input(e)}, {}, 0, "f16 Pow f64 exponent");
}

// A narrow-integer tensor holding `values` (each within the type).
Tensor narrow_tensor(DType dt, const Ints& shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::zeros(dt, shape);
  visit_dtype(dt, [&]<class T>() {
    if constexpr (std::is_integral_v<T>)
      for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = T(values[i]);
    else
      ADD_FAILURE() << "dtype";
  });
  return t;
}

// i8, u8, i16, u16 (computed in i32) and u32 (in i64) keep the values the reference stores: every result wraps
// into its type. Arithmetic over the whole ranges, comparisons, casts to and from every generated dtype,
// division by constants, reductions, BitShift; and the image preprocessing chain u8 -> f32 as one kernel.
TEST(Codegen, NarrowIntegers) {
  uint32_t seed = 1000;
  const DType narrow[] = {DType::i8, DType::u8, DType::i16, DType::u16, DType::u32};
  for (DType dt : narrow) {
    std::string name(dtype_name(dt));
    for (const Broadcast& p : {kPatterns[0], kPatterns[2], kPatterns[4], kPatterns[6], kPatterns[8]})
      for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min, OpKind::Less,
                        OpKind::GreaterOrEqual, OpKind::Equal})
        check_op(op, {input(random_tensor(dt, p.a, seed++)), input(random_tensor(dt, p.b, seed++))}, {}, 0,
                 name + " " + Shape::of(p.a).str() + " " + Shape::of(p.b).str());
    for (OpKind op : {OpKind::Abs, OpKind::Neg, OpKind::Relu, OpKind::Sign})
      if (is_signed(dt) || op == OpKind::Abs || op == OpKind::Sign)  // Neg and Relu take signed types
        check_op(op, {input(random_tensor(dt, {99}, seed++))}, {}, 0, name);
    for (DType other : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean, DType::i8, DType::u8,
                        DType::i16, DType::u16, DType::u32}) {
      if (other == dt) continue;
      // Floats beyond the narrow range saturate to i64 and wrap, as the reference's Cast.
      check_op(OpKind::Cast, {input(random_tensor(other, {77}, seed++, true, -1e5f, 1e5f))},
               {{"to", int64_t(dtype_onnx_id(dt))}}, 0,
               "Cast " + std::string(dtype_name(other)) + "->" + name);
      check_op(OpKind::Cast, {input(random_tensor(dt, {77}, seed++))}, {{"to", int64_t(dtype_onnx_id(other))}}, 0,
               "Cast " + name + "->" + std::string(dtype_name(other)));
    }
    for (int64_t d : {3, 7, 100}) {
      Tensor c = narrow_tensor(dt, {}, {d});
      for (OpKind op : {OpKind::Div, OpKind::Mod})
        check_op(op, {input(random_tensor(dt, {203}, seed++)), constant(c)}, {}, 0, name + " by " + std::to_string(d));
    }
    // (The arithmetic reductions take u32 and wider; the extremes 8- and 32-bit types too.)
    bool extremes = dt != DType::i16 && dt != DType::u16;
    for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd, OpKind::ReduceL1,
                      OpKind::ReduceSumSquare})
      if (dt == DType::u32 || (extremes && (op == OpKind::ReduceMax || op == OpKind::ReduceMin)))
        check_op(op, {input(random_tensor(dt, {5, 67}, seed++)), constant(vec<int64_t>({-1}))}, {}, 0, name + " Reduce");
    check_op(OpKind::ArgMax, {input(random_tensor(dt, {5, 67}, seed++))}, {{"axis", int64_t(-1)}}, 0, name);
  }
  // Wrapped results feeding further ops in the same kernel: (a + b) < c picks, (a * b) / 7 and (a - b) max c.
  for (DType dt : narrow) {
    auto g = std::make_shared<Graph>();
    Shape sh({Dim(203)});
    Value* a = g->add_input("a", {dt, sh});
    Value* b = g->add_input("b", {dt, sh});
    Value* c = g->add_input("c", {dt, sh});
    Value* sum = g->add_node(OpKind::Add, {a, b}, {"sum"})->output(0);
    Value* lt = g->add_node(OpKind::Less, {sum, c}, {"lt"})->output(0);
    Value* prod = g->add_node(OpKind::Mul, {a, b}, {"prod"})->output(0);
    Value* q = g->add_node(OpKind::Div, {prod, g->add_constant("seven", narrow_tensor(dt, {}, {7}))}, {"q"})->output(0);
    Value* diff = g->add_node(OpKind::Sub, {a, b}, {"diff"})->output(0);
    Value* mx = g->add_node(OpKind::Max, {diff, c}, {"mx"})->output(0);
    g->add_output(g->add_node(OpKind::Where, {lt, q, mx}, {"y"})->output(0));
    infer_shapes(*g);
    verify(*g);
    check_fused_graph(g, {random_tensor(dt, {203}, seed++), random_tensor(dt, {203}, seed++), random_tensor(dt, {203}, seed++)},
                      0, "chain " + std::string(dtype_name(dt)));
  }
  // BitShift (unsigned types): shift amounts within and beyond the width.
  for (DType dt : {DType::u8, DType::u16, DType::u32}) {
    std::vector<int64_t> n(40);
    std::iota(n.begin(), n.end(), int64_t(0));
    Tensor amount = narrow_tensor(dt, {40}, n);
    for (const char* dir : {"LEFT", "RIGHT"})
      check_op(OpKind::BitShift, {input(random_tensor(dt, {3, 40}, seed++)), input(amount)},
               {{"direction", std::string(dir)}}, 0, std::string("BitShift ") + dir + " " + std::string(dtype_name(dt)));
  }
  // u8 image -> f32, scaled and normalized per channel: one kernel.
  {
    auto g = std::make_shared<Graph>();
    Value* img = g->add_input("img", {DType::u8, Shape({Dim(1), Dim(3), Dim(8), Dim(9)})});
    Value* f = g->add_node(OpKind::Cast, {img}, {"f"}, {{"to", int64_t(dtype_onnx_id(DType::f32))}})->output(0);
    Value* sc = g->add_node(OpKind::Div, {f, g->add_constant("k", Tensor::scalar<float>(255.0f))}, {"s"})->output(0);
    Value* m = g->add_node(OpKind::Sub, {sc, g->add_constant("mean", random_tensor(DType::f32, {3, 1, 1}, 5, false))},
                           {"m"})->output(0);
    Value* y = g->add_node(OpKind::Div, {m, g->add_constant("sd", random_tensor(DType::f32, {3, 1, 1}, 6, false, 0.2f, 0.3f))},
                           {"y"})->output(0);
    g->add_output(y);
    infer_shapes(*g);
    verify(*g);
    check_fused_graph(g, {random_tensor(DType::u8, {1, 3, 8, 9}, seed++)}, 0, "preprocess", 1);
  }
}

// u64 computes as unsigned 64-bit integers: arithmetic wrapping, comparisons, extremes and division ordered as
// unsigned over the whole range, casts to and from every generated dtype (floats from 2^63 up, beyond 2^64,
// negative, NaN), reductions, ArgMax, BitShift; constants up to 2^64 that a double holds exactly, and the refusal
// of one it does not.
TEST(Codegen, UnsignedSixtyFourBit) {
  uint32_t seed = 1400;
  const DType u = DType::u64;
  for (const Broadcast& p : {kPatterns[0], kPatterns[2], kPatterns[4], kPatterns[6], kPatterns[8]})
    for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min, OpKind::Less,
                      OpKind::LessOrEqual, OpKind::Greater, OpKind::GreaterOrEqual, OpKind::Equal})
      check_op(op, {input(random_tensor(u, p.a, seed++)), input(random_tensor(u, p.b, seed++))}, {}, 0,
               "u64 " + Shape::of(p.a).str() + " " + Shape::of(p.b).str());
  for (OpKind op : {OpKind::Abs, OpKind::Sign})
    check_op(op, {input(random_tensor(u, {99}, seed++))}, {}, 0, "u64");
  check_op(OpKind::Clip, {input(random_tensor(u, {99}, seed++)), constant(narrow_tensor(u, {}, {3})),
                          constant(Tensor::scalar<uint64_t>(uint64_t(1) << 63))}, {}, 0, "u64 Clip to [3, 2^63]");
  Tensor floats = Tensor::from_vector<float>({1e19f, 9.3e18f, 1.8e19f, 2e19f, -1.0f, -1e19f, kNaN, kInf, -kInf, 0.5f,
                                              9.2233720e18f, 12345.0f, -3.5f},
                                             {13});
  check_op(OpKind::Cast, {input(floats)}, {{"to", int64_t(dtype_onnx_id(u))}}, 0, "Cast f32->u64 specials");
  for (DType other : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean, DType::i8, DType::u8,
                      DType::i16, DType::u16, DType::u32, DType::f16}) {
    check_op(OpKind::Cast, {input(random_tensor(other, {77}, seed++, true, -1e5f, 1e5f))},
             {{"to", int64_t(dtype_onnx_id(u))}}, 0, "Cast " + std::string(dtype_name(other)) + "->u64");
    if (other != DType::f16)  // (u64 -> f16 rounds through f32, as every integer does)
      check_op(OpKind::Cast, {input(random_tensor(u, {77}, seed++))}, {{"to", int64_t(dtype_onnx_id(other))}}, 0,
               "Cast u64->" + std::string(dtype_name(other)));
  }
  // Division by constants (one beyond 2^63) and by a tensor (zeros run the reference, which reports them).
  for (uint64_t d : {uint64_t(3), uint64_t(7), uint64_t(1) << 63 | 4096})
    for (OpKind op : {OpKind::Div, OpKind::Mod})
      check_op(op, {input(random_tensor(u, {203}, seed++)), constant(Tensor::scalar<uint64_t>(d))}, {}, 0,
               "u64 by " + std::to_string(d));
  Tensor divisor = random_tensor(u, {203}, seed++);
  for (int64_t i = 0; i < divisor.numel(); ++i) divisor.data<uint64_t>()[i] |= 1;  // no zeros
  for (OpKind op : {OpKind::Div, OpKind::Mod})
    check_op(op, {input(random_tensor(u, {203}, seed++)), input(divisor)}, {}, 0, "u64 by a tensor");
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceProd, OpKind::ReduceL1,
                    OpKind::ReduceSumSquare}) {
    check_op(op, {input(random_tensor(u, {5, 67}, seed++)), constant(vec<int64_t>({-1}))}, {}, 0, "u64 rows");
    check_op(op, {input(random_tensor(u, {5, 67, 3}, seed++)), constant(vec<int64_t>({1}))}, {}, 0, "u64 columns");
  }
  for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
    check_op(op, {input(random_tensor(u, {5, 67}, seed++))}, {{"axis", int64_t(-1)}}, 0, "u64");
  std::vector<int64_t> n(70);
  std::iota(n.begin(), n.end(), int64_t(0));
  for (const char* dir : {"LEFT", "RIGHT"})
    check_op(OpKind::BitShift, {input(random_tensor(u, {3, 70}, seed++)), input(narrow_tensor(u, {70}, n))},
             {{"direction", std::string(dir)}}, 0, std::string("BitShift u64 ") + dir);
  // 2^64 - 2048 is a double; 2^53 + 1 is not: that Add stays with the reference kernel, with a reason.
  check_op(OpKind::Add, {input(random_tensor(u, {33}, seed++)), constant(Tensor::scalar<uint64_t>(~uint64_t(0) - 2047))},
           {}, 0, "u64 + (2^64 - 2048)");
  OneOp odd = build_op(OpKind::Add, {input(random_tensor(u, {33}, seed++)),
                                     constant(Tensor::scalar<uint64_t>((uint64_t(1) << 53) + 1))});
  PassContext ctx;
  run_pass(*create_pass("fuse-elementwise"), *odd.g, ctx);
  for (auto& node : odd.g->nodes()) {
    if (node->op() != OpKind::FusedKernel) continue;
    std::string why;
    EXPECT_FALSE(lower_body(*AttrReader(*node).g("body"), {{33}}, &why));
    EXPECT_NE(why.find("scalar the kernel can hold"), std::string::npos) << why;
  }
  Executor ex(odd.g, ExecutorOptions{});
  expect_close(ex.run(odd.feeds)[0], Executor(build_op(OpKind::Add, {input(odd.feeds[0]),
                                      constant(Tensor::scalar<uint64_t>((uint64_t(1) << 53) + 1))}).g,
                                      reference_kernels()).run(odd.feeds)[0], 0, "u64 + (2^53 + 1)");
}

// Integer Div and Mod (both sign conventions) by constant scalars, the type's extremes included: a zero divisor
// stays with the reference kernel, which reports it; x / -1 wraps at the minimum and x % -1 is 0, as there.
TEST(Codegen, IntegerDivisionByConstants) {
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor x = random_tensor(dt, {203}, 5);
    int64_t lo = dt == DType::i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    int64_t hi = dt == DType::i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
    const int64_t edge[] = {lo, hi, lo + 1, hi - 1, 0, -1, 1, -7, 7, 1000001, -999999};
    auto set = [&](Tensor& t, int64_t i, int64_t v) {
      if (dt == DType::i32) t.data<int32_t>()[i] = int32_t(v);
      else t.data<int64_t>()[i] = v;
    };
    for (size_t i = 0; i < std::size(edge); ++i) set(x, int64_t(i) * 17, edge[i]);
    for (int64_t d : {1, -1, 2, -2, 7, -3, 1000, -65536}) {
      Tensor c = Tensor::zeros(dt, {});
      set(c, 0, d);
      std::string what = std::string(dtype_name(dt)) + " by " + std::to_string(d);
      check_op(OpKind::Div, {input(x), constant(c)}, {}, 0, what);
      for (int64_t fmod : {0, 1}) check_op(OpKind::Mod, {input(x), constant(c)}, {{"fmod", fmod}}, 0, what);
    }
  }
  OneOp by_zero = build_op(OpKind::Div, {input(random_tensor(DType::i32, {5}, 1)), constant(Tensor::zeros(DType::i32, {}))});
  EXPECT_FALSE(can_generate(*by_zero.node));
}

// Integers divided by tensors: every sign pairing, the type's minimum by -1 (wraps; remainder 0), broadcast
// divisors, narrow types computed wider, Python's % (fmod=0) and C's (fmod=1). A zero anywhere in the divisor runs
// the body op by op, so the reference reports it with the node's name; a divisor computed inside the kernel is
// not lowered (the body runs op by op).
TEST(Codegen, IntegerDivisionByTensors) {
  uint32_t seed = 70;
  auto set = [](Tensor& t, int64_t i, int64_t v) {
    visit_dtype(t.dtype(), [&]<class T>() {
      if constexpr (std::is_integral_v<T>) t.data<T>()[i] = T(v);
    });
  };
  auto nonzero = [&](DType dt, const Ints& shape) {
    Tensor t = random_tensor(dt, shape, seed++);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.get_i64(i) == 0) set(t, i, (i % 2) ? 3 : -1);
    return t;
  };
  for (DType dt : {DType::i32, DType::i64, DType::i8, DType::u8, DType::i16, DType::u16, DType::u32}) {
    std::string name(dtype_name(dt));
    Tensor x = random_tensor(dt, {4, 67}, seed++);
    if (dt == DType::i32 || dt == DType::i64) {  // big dividends and the minimum, by -1 among others
      int64_t lo = dt == DType::i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
      for (int64_t i = 0; i < x.numel(); i += 5) set(x, i, i % 10 ? 1000003 * (i - 130) : lo);
    }
    for (const Ints& ys : {Ints{4, 67}, Ints{67}, Ints{4, 1}}) {
      Tensor y = nonzero(dt, ys);
      check_op(OpKind::Div, {input(x), input(y)}, {}, 0, name + " / " + Shape::of(ys).str());
      for (int64_t fmod : {0, 1})
        check_op(OpKind::Mod, {input(x), input(y)}, {{"fmod", fmod}}, 0, name + " % " + Shape::of(ys).str());
    }
  }
  // A zero divisor: the reference's error, naming the node.
  OneOp zero = build_op(OpKind::Div, {input(random_tensor(DType::i64, {2, 300}, seed++)),
                                      input(Tensor::zeros(DType::i64, {300}))});
  expect_reported(zero, "integer division by zero", "a zero divisor");
  // A divisor computed in the kernel is not lowered, so the fusion pass leaves the division out of its
  // divisor's group: a / |b| + 1 is two kernels, |b| and (a / that) + 1.
  auto g = std::make_shared<Graph>("computed_divisor");
  Value* a = g->add_input("a", TensorType{DType::i32, Shape::of({300})});
  Value* b = g->add_input("b", TensorType{DType::i32, Shape::of({300})});
  Value* b1 = g->add_node(OpKind::Abs, {b}, {"b1"})->output(0);
  Value* q = g->add_node(OpKind::Div, {a, b1}, {"q"})->output(0);
  g->add_output(g->add_node(OpKind::Add, {q, g->add_constant("one", Tensor::scalar<int32_t>(1))}, {"y"})->output(0));
  infer_shapes(*g);
  std::string why;
  EXPECT_FALSE(lower_body(*g, {{300}, {300}}, &why));
  EXPECT_NE(why.find("computed in the kernel"), std::string::npos) << why;
  check_fused_graph(g, {random_tensor(DType::i32, {300}, seed++), nonzero(DType::i32, {300})}, 0,
                    "division by a computed divisor", 2);
}

// An integer base raised to an integer exponent tensor: by squaring over every bit of the exponent's type,
// wrapping as the reference's. Bases 0, +-1, +-2 and ones whose powers overflow; exponents of every integer
// dtype from 0 up to their type's largest, broadcast either way. A signed exponent tensor is checked before the
// kernel runs: a negative one runs the body op by op (0, +-1 as the reference), and 0 to a negative power is the
// reference's error, naming the node. Negative constant exponents generate, their bases checked for zeros.
TEST(Codegen, IntegerPowerOfIntegerTensors) {
  Ints bases;
  for (int64_t i = 0; i < 37; ++i) bases.push_back(i < 5 ? i - 2 : (i - 20) * 977 + i % 3);
  std::vector<int64_t> exps{0, 1, 2, 3, 5, 7, 13, 31, 32, 33, 62, 63, 64, 65, 100, 127, 255, 1000, 65535,
                            int64_t(1) << 31, (int64_t(1) << 40) + 3, std::numeric_limits<int64_t>::max()};
  for (DType bt : {DType::i32, DType::i64}) {
    Tensor base = narrow_tensor(bt, {37, 1}, bases);
    for (DType et : {DType::i32, DType::i64, DType::u8, DType::i8, DType::u16, DType::u32, DType::u64}) {
      std::vector<int64_t> ev;
      for (int64_t e : exps) {  // within the type, at least 0
        visit_dtype(et, [&]<class T>() {
          if constexpr (std::is_integral_v<T>) {
            if (uint64_t(e) <= uint64_t(std::numeric_limits<T>::max())) ev.push_back(e);
          }
        });
      }
      Tensor ex = narrow_tensor(et, {1, int64_t(ev.size())}, ev);
      std::string what = std::string(dtype_name(bt)) + " ^ " + std::string(dtype_name(et)) + " tensor";
      check_op(OpKind::Pow, {input(base), input(ex)}, {}, 0, what);
      check_op(OpKind::Pow, {input(narrow_tensor(bt, {1}, {3})), input(ex)}, {}, 0, what + ", base 3 broadcast");
    }
    // Negative exponents: the body runs op by op; bases 0 (an error), +-1 and others (0).
    Tensor neg = narrow_tensor(DType::i64, {1, 4}, {-1, -2, 5, -63});
    Tensor nonzero = narrow_tensor(bt, {5, 1}, {-2, -1, 1, 2, 977});
    check_op(OpKind::Pow, {input(nonzero), input(neg)}, {}, 0, std::string(dtype_name(bt)) + " ^ negative");
    // A negative constant exponent generates (1, +-1 or 0); the base is checked for zeros.
    for (int64_t e : {int64_t(-1), int64_t(-2), int64_t(-63), std::numeric_limits<int64_t>::min()})
      check_op(OpKind::Pow, {input(nonzero), constant(Tensor::scalar<int64_t>(e))}, {}, 0,
               std::string(dtype_name(bt)) + " ^ " + std::to_string(e));
    OneOp zero_base = build_op(OpKind::Pow, {input(narrow_tensor(bt, {12}, {1, 2, 3, 4, 5, 0})),
                                             constant(Tensor::scalar<int64_t>(-3))});
    expect_reported(zero_base, "negative integer power", "0 to the constant -3");
    OneOp zero = build_op(OpKind::Pow, {input(narrow_tensor(bt, {3, 1}, {1, 0, 2})), input(neg)});
    expect_reported(zero, "negative integer power", "0 to a negative power");
  }
}

// Float Mod (fmod=1) is C's fmod, called per lane: exact, the reference's bits. Dividends far larger than the
// divisor (quotients beyond 2^24 and 2^53), tiny and denormal ones, signed zeros, infinities and NaN on either
// side, a zero divisor (NaN), and broadcast divisors; f16 and bf16 compute in f32, f64 calls fmod.
TEST(Codegen, FloatMod) {
  uint32_t seed = 40;
  Tensor x = random_tensor(DType::f32, {4, 33}, seed++, true, -1e3f, 1e3f);
  Tensor y = random_tensor(DType::f32, {4, 33}, seed++, true, -10.f, 10.f);
  const float xs[] = {1e30f, -1e30f, 3e9f, 1e-40f, -0.0f, 0.0f, kInf, -kInf, kNaN, 7.5f, -7.5f, 1.0f, 5.0f};
  const float ys[] = {3.3f, 0.7f, -1e-3f, 3e-39f, 2.0f, -2.0f, 1.0f, 2.0f, 1.0f, kInf, -kInf, 0.0f, kNaN};
  for (size_t i = 0; i < std::size(xs); ++i) x.data<float>()[i * 7] = xs[i], y.data<float>()[i * 7] = ys[i];
  check_op(OpKind::Mod, {input(x), input(y)}, {{"fmod", int64_t(1)}}, 0, "f32 tensors");
  check_op(OpKind::Mod, {input(x), input(random_tensor(DType::f32, {33}, seed++))}, {{"fmod", int64_t(1)}}, 0,
           "f32 row divisor");
  check_op(OpKind::Mod, {input(x), constant(Tensor::scalar<float>(0.37f))}, {{"fmod", int64_t(1)}}, 0, "f32 by 0.37");
  for (DType dt : {DType::f16, DType::bf16, DType::f64})
    check_op(OpKind::Mod, {input(random_tensor(dt, {3, 37}, seed++)), input(random_tensor(dt, {3, 37}, seed++))},
             {{"fmod", int64_t(1)}}, 0, std::string(dtype_name(dt)));
  // fmod=0 on floats (numpy's mod, opset 28 tests) runs on the reference kernel: RefElementwise.ModSignsAndFmod.
}

// ArgMax/ArgMin (rows and columns, first or last of ties, NaN winning) and Hardmax: positions found through
// interleaved partials must be the sequential scan's. Small integers and repeated floats make ties common.
TEST(Codegen, ArgReductions) {
  uint32_t seed = 1300;
  for (Ints shape : {Ints{1}, Ints{7}, Ints{3, 33}, Ints{2, 70}, Ints{4, 5, 6}, Ints{2, 1000}, Ints{3, 17, 9}}) {
    for (int64_t axis : {int64_t(-1), int64_t(0), int64_t(1)}) {
      if (axis >= int64_t(shape.size())) continue;
      std::string what = Shape::of(shape).str() + " axis " + std::to_string(axis);
      Tensor f = random_tensor(DType::f32, shape, seed++, true);
      for (int64_t i = 0; i < f.numel(); i += 5) f.data<float>()[i] = 1.0f;  // ties
      for (const Tensor& x : {f, random_tensor(DType::i64, shape, seed++), random_tensor(DType::i32, shape, seed++),
                              random_tensor(DType::bf16, shape, seed++)})
        for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin})
          for (int64_t keep : {0, 1})
            for (int64_t last : {0, 1})
              check_op(op, {input(x)}, {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}}, 0,
                       what + " " + std::string(dtype_name(x.dtype())) + (last ? " last" : " first"));
      check_op(OpKind::Hardmax, {input(f)}, {{"axis", axis}}, 0, "Hardmax " + what);
    }
  }
}

// f16 and bf16 tensors load as f32 and store rounded to nearest even, each op's result rounded as the reference
// stores it (Cast to bf16 truncates): exact ops match bit for bit, the rest within a 16-bit float's rounding.
TEST(Codegen, HalfPrecisionStorage) {
  uint32_t seed = 900;
  for (DType dt : {DType::bf16, DType::f16}) {
    std::string name(dtype_name(dt));
    double ulp = dt == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;  // one unit in the last place, relative
    for (Ints shape : {Ints{37}, Ints{3, 5, 7}, Ints{1031}}) {
      Tensor x = random_tensor(dt, shape, seed++), y = random_tensor(dt, {shape.back()}, seed++);
      for (OpKind op : {OpKind::Add, OpKind::Mul, OpKind::Max, OpKind::Sub})
        check_op(op, {input(x), input(y)}, {}, 0, name + " binary");
      for (OpKind op : {OpKind::Relu, OpKind::Neg, OpKind::Abs, OpKind::Floor})
        check_op(op, {input(x)}, {}, 0, name + " exact unary");
      for (OpKind op : {OpKind::Exp, OpKind::Tanh, OpKind::Sigmoid, OpKind::Gelu, OpKind::Sin, OpKind::Sqrt, OpKind::Erf})
        check_op(op, {input(x)}, {}, ulp, name + " unary");
      check_op(OpKind::Less, {input(x), input(y)}, {}, 0, name + " compare");
      check_op(OpKind::Where, {input(random_tensor(DType::boolean, shape, seed++)), input(x), input(y)}, {}, 0, name + " Where");
      Tensor xs = random_tensor(dt, shape, seed++, false);
      check_op(OpKind::Softmax, {input(xs)}, {}, ulp, name + " Softmax");
      check_op(OpKind::LayerNormalization, {input(xs), input(random_tensor(dt, {shape.back()}, seed++, false))},
               {{"epsilon", 1e-5}}, 2 * ulp, name + " LayerNorm");
      check_op(OpKind::ReduceMax, {input(x), constant(vec<int64_t>({-1}))}, {}, 0, name + " ReduceMax");
      check_op(OpKind::ReduceSum, {input(xs), constant(vec<int64_t>({-1}))}, {}, 2 * ulp, name + " ReduceSum");
    }
    // Casts between every storage dtype, values beyond f16's range and between bf16's steps included.
    for (DType from : {DType::f32, DType::f16, DType::bf16, DType::i64, DType::boolean})
      for (DType to : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::boolean}) {
        if (from != dt && to != dt) continue;
        Tensor x = from == DType::f32 ? random_tensor(from, {97}, seed++, true, -1e5f, 1e5f) : random_tensor(from, {97}, seed++);
        check_op(OpKind::Cast, {input(x)}, {{"to", int64_t(dtype_onnx_id(to))}}, 0,
                 std::string("Cast ") + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)));
      }
  }
  // An f32 chain through a bf16 Cast into bf16 arithmetic: every intermediate result rounds as the reference
  // stores it, so exact ops agree bit for bit.
  Tensor x = random_tensor(DType::f32, {4, 33}, 3, false);
  auto g = std::make_shared<Graph>();
  Value* gx = g->add_input("x", {DType::f32, Shape({Dim(4), Dim(33)})});
  Value* e = g->add_node(OpKind::Mul, {gx, g->add_constant("k", Tensor::scalar<float>(1.37f))}, {"e"})->output(0);
  Node* c = g->add_node(OpKind::Cast, {e}, {"c"});
  c->attrs()["to"] = int64_t(dtype_onnx_id(DType::bf16));
  Value* m = g->add_node(OpKind::Mul, {c->output(0), c->output(0)}, {"m"})->output(0);
  g->add_output(g->add_node(OpKind::Add, {m, c->output(0)}, {"a"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {x}, 0, "f32 -> bf16 chain", 1);
}

// InstanceNormalization (GroupNorm as PyTorch exports it) and inference BatchNormalization: their [C] parameters
// are read along the channel dim, as views.
TEST(Codegen, ChannelNormalizations) {
  uint32_t seed = 1100;
  for (Ints shape : {Ints{2, 3, 7}, Ints{1, 32, 8, 8}, Ints{2, 5, 3, 4, 3}, Ints{1, 1, 33}, Ints{3, 4, 1}}) {
    int64_t c = shape[1];
    Tensor x = random_tensor(DType::f32, shape, seed++, false);
    Tensor scale = random_tensor(DType::f32, {c}, seed++, false), bias = random_tensor(DType::f32, {c}, seed++, false);
    std::string what = Shape::of(shape).str();
    check_op(OpKind::InstanceNormalization, {input(x), input(scale), input(bias)}, {{"epsilon", 1e-5}}, 2e-5,
             "InstanceNorm " + what);
    check_op(OpKind::InstanceNormalization, {input(x), constant(scale), constant(scale)}, {}, 2e-5,
             "InstanceNorm, one tensor as scale and B " + what);
    Tensor mean = random_tensor(DType::f32, {c}, seed++, false), var = random_tensor(DType::f32, {c}, seed++, false, 0.1f, 2);
    check_op(OpKind::BatchNormalization, {input(x), constant(scale), constant(bias), constant(mean), constant(var)},
             {{"epsilon", 1e-3}}, 1e-5, "BatchNorm " + what);
    check_op(OpKind::BatchNormalization,
             {input(random_tensor(DType::bf16, shape, seed++)), input(scale), input(bias), input(mean), input(var)}, {},
             1.0 / 128, "BatchNorm bf16 " + what);
  }
  // MeanVarianceNormalization: the default axes [0, 2, 3] at batch 1 (a block once the size-1 axis goes), [2, 3],
  // [1] (columns).
  for (auto [shape, axes] : {std::pair{Ints{1, 3, 5, 7}, Ints{0, 2, 3}}, std::pair{Ints{2, 3, 5, 7}, Ints{2, 3}},
                             std::pair{Ints{2, 6, 9}, Ints{1}}, std::pair{Ints{2, 3, 4, 4}, Ints{-1, -2}}}) {
    Tensor x = random_tensor(DType::f32, shape, seed++, false);
    check_op(OpKind::MeanVarianceNormalization, {input(x)}, {{"axes", axes}}, 2e-5,
             "MVN " + Shape::of(shape).str() + " axes " + Shape::of(axes).str());
  }
  // [0, 2, 3] at batch 2 is not one block: one kernel cannot compute it (split-reductions writes it out).
  OneOp mvn = build_op(OpKind::MeanVarianceNormalization, {input(random_tensor(DType::f32, {2, 3, 4, 4}, 1))});
  EXPECT_FALSE(can_generate(*mvn.node)) << "axes [0, 2, 3] at batch 2";

  // GroupNorm as exported: Reshape to [N, G, -1], InstanceNorm over it, Reshape back, then the affine: two kernels.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim(1), Dim(8), Dim(5), Dim(5)})});
  Value* r = g->add_node(OpKind::Reshape, {x, g->add_constant("s", vec<int64_t>({1, 4, -1}))}, {"r"})->output(0);
  Value* in = g->add_node(OpKind::InstanceNormalization,
                          {r, g->add_constant("one", Tensor::from_vector<float>({1, 1, 1, 1}, {4})),
                           g->add_constant("zero", Tensor::zeros(DType::f32, {4}))}, {"in"})->output(0);
  Value* back = g->add_node(OpKind::Reshape, {in, g->add_constant("s2", vec<int64_t>({1, 8, 5, 5}))}, {"back"})->output(0);
  Value* w = g->add_constant("w", random_tensor(DType::f32, {8, 1, 1}, 4, false));
  g->add_output(g->add_node(OpKind::Mul, {back, w}, {"y"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {1, 8, 5, 5}, 5, false)}, 2e-5, "GroupNorm", 2);
}

// CumSum generates as a scan: along the innermost dim a row kernel adds within each vector (log2 W shifted adds,
// in f64 for floats as the reference) and carries the sum from vector to vector; along another dim a columns
// kernel walks each lane down its column in the reference's order (the same bits, specials included). Row scans
// associate differently, which matters only where huge terms cancel (1e30 - 1e30): their data holds NaN and
// infinities but no such terms. Every direction and exclusivity, odd sizes, dtypes (integers wrap as the
// reference's), and fused producers and consumers.
TEST(Codegen, CumSumScans) {
  uint32_t seed = 1500;
  struct Case {
    Ints shape;
    int64_t axis;
    double tol;  // columns: the reference's order exactly
  };
  for (const Case& c : {Case{{3, 37}, 1, 1e-6}, Case{{2, 1000}, -1, 1e-6}, Case{{5, 16}, 1, 1e-6}, Case{{4, 17}, 1, 1e-6},
                        Case{{7, 1}, 1, 0}, Case{{37}, 0, 1e-6}, Case{{3, 37, 5}, 1, 0}, Case{{40, 19}, 0, 0},
                        Case{{2, 3, 4, 33}, 1, 0}}) {
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1}) {
        std::string what = Shape::of(c.shape).str() + " axis " + std::to_string(c.axis) +
                           (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
        AttrMap attrs{{"exclusive", exclusive}, {"reverse", reverse}};
        bool rows = c.tol > 0;
        Tensor f = random_tensor(DType::f32, c.shape, seed++, !rows);
        if (rows)
          for (int64_t i = 5; i < f.numel(); i += 29) f.data<float>()[i] = i % 3 == 0 ? kNaN : i % 3 == 1 ? kInf : -kInf;
        check_op(OpKind::CumSum, {input(f), constant(vec<int64_t>({c.axis}))}, attrs, c.tol, "f32 " + what);
        check_op(OpKind::CumSum,
                 {input(random_tensor(DType::f64, c.shape, seed++, !rows)), constant(Tensor::scalar<int64_t>(c.axis))},
                 attrs, c.tol > 0 ? 1e-13 : 0, "f64 " + what);
        for (DType dt : {DType::i32, DType::i64, DType::u64, DType::u32})
          check_op(OpKind::CumSum, {input(random_tensor(dt, c.shape, seed++)), constant(vec<int64_t>({c.axis}))},
                   attrs, 0, std::string(dtype_name(dt)) + " " + what);
      }
  }
  check_op(OpKind::CumSum, {input(random_tensor(DType::f16, {3, 50}, seed++)), constant(vec<int64_t>({1}))}, {},
           1.0 / 1024, "f16");
  // x * 2 -> CumSum -> Relu: one kernel; x * x -> CumSum, a second (groups grow from producers to consumers).
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim(4), Dim(45)})});
  Value* ax = g->add_constant("axis", Tensor::scalar<int64_t>(1));
  Value* m = g->add_node(OpKind::Mul, {x, g->add_constant("two", Tensor::scalar<float>(2))}, {"m"})->output(0);
  Value* cs = g->add_node(OpKind::CumSum, {m, ax}, {"cs"})->output(0);
  g->add_output(g->add_node(OpKind::Relu, {cs}, {"y"})->output(0));
  Value* sq = g->add_node(OpKind::Mul, {x, x}, {"sq"})->output(0);
  g->add_output(g->add_node(OpKind::CumSum, {sq, ax}, {"cs2"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {4, 45}, seed++, false)}, 1e-6, "Mul-CumSum-Relu", 2);
  // The schedule never changes a row scan's bits (f64, where any other association shows).
  for (int64_t reverse : {0, 1}) {
    OneOp one = build_op(OpKind::CumSum, {input(random_tensor(DType::f64, {3, 101}, seed++, false)),
                                          constant(vec<int64_t>({1}))}, {{"reverse", reverse}});
    PassContext ctx;
    run_pass(*create_pass("fuse-elementwise"), *one.g, ctx);
    std::string why;
    auto lk = lower_body(*AttrReader(*one.g->nodes()[0]).g("body"), {{3, 101}}, &why);
    ASSERT_TRUE(lk) << why;
    std::vector<double> first;
    for (const Schedule& s : {Schedule{16, 1, 1}, Schedule{4, 2, 1}, Schedule{32, 1, 1}, Schedule{8, 3, 1}}) {
      std::vector<double> y(303);
      void* ptrs[] = {const_cast<void*>(one.feeds[0].raw()), y.data()};
      jit_kernel(lk->kernel, s)(lk->dims.data(), lk->strides.data(), ptrs, 0, 3);
      if (first.empty()) first = y;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint64_t>(y[i]), std::bit_cast<uint64_t>(first[i])) << s.str() << " element " << i;
    }
  }
  // A CumSum and a Softmax over the same axis, or CumSums in both directions, do not share a kernel.
  auto h = std::make_shared<Graph>();
  Value* hx = h->add_input("x", {DType::f32, Shape({Dim(4), Dim(45)})});
  Value* hax = h->add_constant("axis", Tensor::scalar<int64_t>(1));
  Value* fwd = h->add_node(OpKind::CumSum, {hx, hax}, {"fwd"})->output(0);
  Value* sm = h->add_node(OpKind::Softmax, {fwd}, {"sm"}, {{"axis", int64_t(1)}})->output(0);
  Value* rev = h->add_node(OpKind::CumSum, {sm, hax}, {"rev"}, {{"reverse", int64_t(1)}})->output(0);
  h->add_output(rev);
  infer_shapes(*h);
  check_fused_graph(h, {random_tensor(DType::f32, {4, 45}, seed++, false)}, 1e-6, "CumSum, Softmax, reverse CumSum", 3);
}

// LRN generates: each output reads the channels of its window through loads shifted along the channels (0 past
// either end), as a columns kernel over NCHW or a row kernel over [N, C]; odd and even window sizes, a window
// wider than the channels, one channel (element-wise), 16-bit floats and f64 (the C library's pow: within f64
// rounding of the reference). Its producer stays out of its kernel (the window reads memory); a consumer joins.
TEST(Codegen, LocalResponseNormalization) {
  uint32_t seed = 1600;
  for (Ints shape : {Ints{1, 7, 5, 5}, Ints{2, 13}, Ints{1, 96, 13, 13}, Ints{2, 3, 4}, Ints{1, 1, 9}})
    for (int64_t size : {1, 2, 3, 5, 9}) {
      std::string what = Shape::of(shape).str() + " size " + std::to_string(size);
      AttrMap attrs{{"size", size}, {"alpha", 2e-4}, {"beta", 0.75}, {"bias", 1.5}};
      check_op(OpKind::LRN, {input(random_tensor(DType::f32, shape, seed++, false, -20, 20))}, attrs, 2e-6, "f32 " + what);
      check_op(OpKind::LRN, {input(random_tensor(DType::f64, shape, seed++, false))}, attrs, 1e-14, "f64 " + what);
    }
  AttrMap big{{"size", int64_t(5)}, {"alpha", 0.5}, {"beta", 0.6}, {"bias", 2.0}};
  check_op(OpKind::LRN, {input(random_tensor(DType::f32, {2, 11, 3, 7}, seed++))}, big, 2e-6, "specials");
  check_op(OpKind::LRN, {input(random_tensor(DType::f16, {1, 6, 5, 5}, seed++))}, big, 1.0 / 1024, "f16");
  check_op(OpKind::LRN, {input(random_tensor(DType::bf16, {1, 6, 5, 5}, seed++))}, big, 1.0 / 128, "bf16");
  // Relu -> LRN -> Mul: the Relu is its own kernel, the Mul joins the LRN's.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim(1), Dim(8), Dim(6), Dim(6)})});
  Value* r = g->add_node(OpKind::Relu, {x}, {"r"})->output(0);
  Value* n = g->add_node(OpKind::LRN, {r}, {"n"}, {{"size", int64_t(3)}})->output(0);
  g->add_output(g->add_node(OpKind::Mul, {n, g->add_constant("k", Tensor::scalar<float>(3))}, {"y"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {1, 8, 6, 6}, seed++)}, 2e-6, "Relu-LRN-Mul", 2);
}

// TopK generates for K up to kMaxGeneratedTopK: a columns kernel in which each lane keeps its column's K best
// (value, position) pairs in registers, an element entering by a network of selects. The same values and
// positions as the reference's partial sort: largest and smallest, NaN (first among the largest, last among the
// smallest), ties (the earlier position first), K of 1 and of the whole axis, every axis, dtypes.
TEST(Codegen, TopKGenerates) {
  // (TopK alone, over shapes, K, both directions and every dtype family: tests/ops/cases_reduction.cpp.)
  uint32_t seed = 1700;
  // An element-wise producer joins; a consumer of the results does not (they hold K values per row).
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim(5), Dim(30)})});
  Value* e = g->add_node(OpKind::Exp, {x}, {"e"})->output(0);
  Node* t = g->add_node(OpKind::TopK, {e, g->add_constant("k", vec<int64_t>({4}))}, {"v", "i"}, {{"axis", int64_t(1)}});
  g->add_output(g->add_node(OpKind::Neg, {t->output(0)}, {"y"})->output(0));
  g->add_output(t->output(1));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {5, 30}, seed++)}, 1e-6, "Exp-TopK-Neg", 2);
  std::string why;
  OneOp big = build_op(OpKind::TopK, {input(random_tensor(DType::f32, {2, 40}, 1)),
                                      constant(vec<int64_t>({kMaxGeneratedTopK + 1}))}, {}, 2);
  EXPECT_FALSE(can_generate(*big.node, &why));
  EXPECT_NE(why.find("K is not"), std::string::npos) << why;
}

// Targets of a classification loss over `classes` classes: random classes, every fifth the ignored index when
// there is one.
Tensor loss_targets(DType dt, const Ints& shape, int64_t classes, std::optional<int64_t> ignore, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::zeros(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = ignore && i % 5 == 2 ? *ignore : int64_t(rng() % uint32_t(classes));
    if (dt == DType::i32) t.data<int32_t>()[i] = int32_t(v);
    else t.data<int64_t>()[i] = v;
  }
  return t;
}

// The target shape of a loss over input `shape` ([N, C, d1, ...]): [N, d1, ...].
Ints target_shape(Ints shape) {
  shape.erase(shape.begin() + 1);
  return shape;
}

// NegativeLogLikelihoodLoss per element (reduction 'none') generates: a pick of each row's target class (a row or
// a columns kernel), times its class weight, 0 where the target is ignore_index (a class or none). The reference's
// bits: the pick is exact, the product rounds once. Inputs with NaN and infinities, every float dtype, i32 and
// i64 targets, one class, and a target that is no class: the reference's error, naming the node.
TEST(Codegen, NegativeLogLikelihoodLossPerElement) {
  uint32_t seed = 1800;
  for (Ints shape : {Ints{5, 7}, Ints{3, 6, 4}, Ints{2, 5, 3, 4}, Ints{4, 1}, Ints{3, 200}, Ints{2, 33, 17}}) {
    int64_t c = shape[1];
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
      for (int variant = 0; variant < 4; ++variant) {
        bool weighted = variant & 1;
        std::optional<int64_t> ignore;
        if (variant >= 2) ignore = variant == 2 ? std::min<int64_t>(2, c - 1) : int64_t(-100);
        DType tt = (variant + int(shape.size())) % 2 ? DType::i32 : DType::i64;
        std::string what = std::string(dtype_name(dt)) + " " + Shape::of(shape).str() +
                           (weighted ? " weighted" : "") + (ignore ? " ignore " + std::to_string(*ignore) : "");
        AttrMap attrs{{"reduction", std::string("none")}};
        if (ignore) attrs["ignore_index"] = *ignore;
        std::vector<OpArg> args{input(random_tensor(dt, shape, seed++)),
                                input(loss_targets(tt, target_shape(shape), c, ignore, seed++))};
        if (weighted) args.push_back(input(random_tensor(dt, {c}, seed++)));
        check_op(OpKind::NegativeLogLikelihoodLoss, args, attrs, dt == DType::bf16 ? 1.0 / 128 : 0, what);
      }
  }
  // A target that is no class (nor the ignored index): the kernel does not run; the reference reports it.
  for (int64_t bad : {int64_t(6), int64_t(-1)}) {
    Tensor t = loss_targets(DType::i64, {4, 3}, 6, std::nullopt, 3);
    t.data<int64_t>()[7] = bad;
    OneOp one = build_op(OpKind::NegativeLogLikelihoodLoss,
                         {input(random_tensor(DType::f32, {4, 6, 3}, 4)), input(t)}, {{"reduction", std::string("none")}});
    expect_reported(one, "out of range", "target " + std::to_string(bad));
  }
  // A sum over the losses is a second reduction, which decompose-ops writes out.
  std::string why;
  OneOp mean = build_op(OpKind::NegativeLogLikelihoodLoss, {input(random_tensor(DType::f32, {4, 6}, 5)),
                                                            input(loss_targets(DType::i64, {4}, 6, std::nullopt, 6))});
  EXPECT_FALSE(can_generate(*mean.node, &why));
  EXPECT_NE(why.find("decompose-ops"), std::string::npos) << why;
}

// The losses through the optimizing pipeline: decompose-ops writes SoftmaxCrossEntropyLoss and the sums and
// means as LogSoftmax, the loss per element and reductions, which fuse into generated kernels (only a weighted
// mean's Gather of the weights is left to its own kernel). Against the reference kernels on the original graph:
// every reduction, weights, ignore_index, the log_prob output, f32, f64 and f16 (computed in f32), rows and
// columns kernels, sizes that run on both threads.
TEST(Codegen, ClassificationLossesGenerate) {
  uint32_t seed = 1900;
  struct Case {
    Ints shape;
    DType dt;
  };
  for (const Case& cs : {Case{{6, 10}, DType::f32}, Case{{3, 7, 5}, DType::f32}, Case{{64, 1000}, DType::f32},
                         Case{{2, 21, 48, 48}, DType::f32}, Case{{5, 9, 4}, DType::f64}, Case{{6, 10, 3}, DType::f16}}) {
    int64_t c = cs.shape[1];
    for (OpKind op : {OpKind::SoftmaxCrossEntropyLoss, OpKind::NegativeLogLikelihoodLoss})
      for (const char* red : {"none", "sum", "mean"})
        for (int variant = 0; variant < 4; ++variant) {
          bool weighted = variant & 1;
          std::optional<int64_t> ignore;
          if (variant >= 2) ignore = variant == 2 ? int64_t(1) : int64_t(-100);
          bool log_prob = op == OpKind::SoftmaxCrossEntropyLoss && variant % 2 == 0;
          std::string what = std::string(op_name(op)) + " " + red + " " + std::string(dtype_name(cs.dt)) + " " +
                             Shape::of(cs.shape).str() + (weighted ? " weighted" : "") +
                             (ignore ? " ignore " + std::to_string(*ignore) : "") + (log_prob ? " log_prob" : "");
          SCOPED_TRACE(what);
          // Scores in [-3, 3], log-probabilities in [-6, 0] (NegativeLogLikelihoodLoss does not need them
          // normalized), weights in [0.5, 2]: positive losses, whose sums do not cancel. No specials: the sums mix
          // every element.
          bool nll = op == OpKind::NegativeLogLikelihoodLoss;
          std::vector<Tensor> feeds{random_tensor(cs.dt, cs.shape, seed++, false, nll ? -6 : -3, nll ? 0 : 3),
                                    loss_targets(DType::i64, target_shape(cs.shape), c, ignore, seed++)};
          if (weighted) feeds.push_back(random_tensor(cs.dt, {c}, seed++, false, 0.5f, 2.0f));
          AttrMap attrs{{"reduction", std::string(red)}};
          if (ignore) attrs["ignore_index"] = *ignore;
          std::vector<std::string> outs{"loss"};
          if (log_prob) outs.push_back("log_prob");
          double tol = cs.dt == DType::f64 ? 1e-13 : cs.dt == DType::f16 ? 1.0 / 1024 : 2e-6;
          // (Left out: the Gather of the weights, and the choice of the class to gather where the target is
          // ignored at batch 6, shape arithmetic.)
          check_optimized(op, feeds, attrs, outs, tol, what,
                          [](const Node& n) { return n.op() == OpKind::Gather || small_integer_result(n); });
        }
  }
  // Targets that are no class: the error names the loss and what is wrong, whichever kernel meets them first.
  for (int64_t bad : {int64_t(10), int64_t(-1), int64_t(-11)}) {
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", {DType::f32, Shape::of({4, 10})});
    Value* t = g->add_input("t", {DType::i64, Shape::of({4})});
    Value* w = g->add_input("w", {DType::f32, Shape::of({10})});
    g->add_output(g->add_node(OpKind::SoftmaxCrossEntropyLoss, {x, t, w}, {"loss"})->output(0));
    infer_shapes(*g);
    optimize(*g, 1);
    Tensor tt = loss_targets(DType::i64, {4}, 10, std::nullopt, 7);
    tt.data<int64_t>()[2] = bad;
    try {
      Executor(g, ExecutorOptions{}).run({random_tensor(DType::f32, {4, 10}, 8), tt, random_tensor(DType::f32, {10}, 9)});
      ADD_FAILURE() << "target " << bad << " was not reported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("loss_"), std::string::npos) << e.what();
    }
  }
}

// BatchNormalization in training mode through the optimizing pipeline: decompose-ops writes out its batch
// statistics, split-reductions splits their means over (0, 2, 3), and everything but the [C] parameters'
// reshapes runs in generated kernels. Y and the running statistics against the reference's: batch 1 (one block),
// batch 3 (split), [N, C], f16, with and without the running statistics.
TEST(Codegen, TrainingBatchNormalizationGenerates) {
  uint32_t seed = 2000;
  for (Ints shape : {Ints{3, 16, 33, 17}, Ints{1, 8, 10, 10}, Ints{64, 10}, Ints{2, 5, 7}})
    for (DType dt : {DType::f32, DType::f16})
      for (size_t outs : {size_t(1), size_t(3)}) {
        std::string what = "BatchNormalization training " + std::string(dtype_name(dt)) + " " +
                           Shape::of(shape).str() + " outputs " + std::to_string(outs);
        SCOPED_TRACE(what);
        int64_t c = shape[1];
        std::vector<Tensor> feeds{random_tensor(dt, shape, seed++, false, -2, 5),
                                  random_tensor(DType::f32, {c}, seed++, false, 0.5f, 2.0f),
                                  random_tensor(DType::f32, {c}, seed++, false),
                                  random_tensor(DType::f32, {c}, seed++, false),
                                  random_tensor(DType::f32, {c}, seed++, false, 0.5f, 2.0f)};
        std::vector<std::string> names{"y", "running_mean", "running_var"};
        names.resize(outs);
        AttrMap attrs{{"training_mode", int64_t(1)}, {"momentum", 0.7}, {"epsilon", 1e-3}};
        check_optimized(OpKind::BatchNormalization, feeds, attrs, names, dt == DType::f16 ? 1.0 / 1024 : 2e-5, what,
                        [](const Node& n) {  // the [C] parameters' and statistics' reshapes
                          return n.op() == OpKind::Unsqueeze || n.op() == OpKind::Reshape;
                        });
      }
}

// QuantizeLinear and DequantizeLinear generate, with the reference's bits: x / scale as the reference divides
// (f32 for f32 and f16, f64 for f64 and i32), rounded half to even (NaN to 0), plus the zero point, saturated;
// (x - zero point) * scale. Scales per tensor (an immediate, a rank-0 input) and per axis (views along axis 0, 1
// or the last), zero points u8 and i8 or absent, a zero scale, specials; and the QDQ pattern Dequantize -> Relu
// -> Quantize as one kernel.
TEST(Codegen, QuantizeDequantizeGenerate) {
  uint32_t seed = 2100;
  Ints shape{4, 7, 33};
  for (int64_t axis : {int64_t(0), int64_t(1), int64_t(-1)}) {
    int64_t c = shape[size_t(axis < 0 ? axis + 3 : axis)];
    Tensor scale = random_tensor(DType::f32, {c}, seed++, false, 0.01f, 0.5f);
    scale.data<float>()[0] = 0;  // x / 0: infinities saturate, 0 / 0 quantizes to the zero point
    for (DType q : {DType::u8, DType::i8}) {
      Tensor zp = random_tensor(q, {c}, seed++);
      std::string what = std::string(dtype_name(q)) + " axis " + std::to_string(axis);
      for (DType xt : {DType::f32, DType::f16, DType::f64, DType::i32}) {
        Tensor x = random_tensor(xt, shape, seed++, true, -40, 40);
        check_op(OpKind::QuantizeLinear, {input(x), input(scale), input(zp)}, {{"axis", axis}}, 0,
                 std::string(dtype_name(xt)) + " per axis " + what);
      }
      check_op(OpKind::DequantizeLinear, {input(random_tensor(q, shape, seed++)), input(scale), input(zp)},
               {{"axis", axis}}, 0, "per axis " + what);
    }
  }
  for (DType q : {DType::u8, DType::i8}) {
    Tensor x = random_tensor(DType::f32, shape, seed++, true, -40, 40);
    Tensor zp = q == DType::u8 ? Tensor::scalar<uint8_t>(128) : Tensor::scalar<int8_t>(-3);
    std::string name(dtype_name(q));
    check_op(OpKind::QuantizeLinear, {input(x), constant(Tensor::scalar<float>(0.25f)), constant(zp)}, {}, 0,
             name + " per tensor, constants");
    check_op(OpKind::QuantizeLinear, {input(x), input(Tensor::scalar<float>(0.1f)), input(zp)}, {}, 0,
             name + " per tensor, inputs");
    check_op(OpKind::DequantizeLinear, {input(random_tensor(q, shape, seed++)), input(Tensor::scalar<float>(0.1f)),
                                        input(zp)}, {}, 0, name + " dequantize per tensor");
  }
  // A constant scale divides as a multiply by its reciprocal plus one FMA correction (codegen/llvm/values.cpp):
  // the integers must be the divide's at every rounding boundary, quotients k + 0.5 and their float neighbours,
  // and at the extremes (tiny, huge, infinite, NaN).
  for (float sc : {0.75942468f, 0.047153853f, 0.1f, 1.f / 3, 7.f, 3e-5f}) {
    std::vector<float> xs;
    for (int k = -140; k <= 140; ++k) {
      float half = (float(k) + 0.5f) * sc, whole = float(k) * sc;
      for (float v : {half, std::nextafter(half, INFINITY), std::nextafter(half, -INFINITY), whole,
                      std::nextafter(whole, INFINITY), std::nextafter(whole, -INFINITY)})
        xs.push_back(v);
    }
    for (float v : {0.f, -0.f, 1e-30f, -1e-30f, 1e-40f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN}) xs.push_back(v);
    Tensor x = Tensor::zeros(DType::f32, {int64_t(xs.size())});
    std::copy(xs.begin(), xs.end(), x.data<float>());
    for (DType q : {DType::u8, DType::i8}) {
      Tensor zp = q == DType::u8 ? Tensor::scalar<uint8_t>(128) : Tensor::scalar<int8_t>(0);
      check_op(OpKind::QuantizeLinear, {input(x), constant(Tensor::scalar<float>(sc)), constant(zp)}, {}, 0,
               std::string(dtype_name(q)) + " rounding boundaries, scale " + std::to_string(sc));
    }
  }
  check_op(OpKind::QuantizeLinear, {input(random_tensor(DType::f32, shape, seed++)), constant(Tensor::scalar<float>(0.5f))},
           {}, 0, "no zero point (u8)");
  check_op(OpKind::DequantizeLinear, {input(random_tensor(DType::i32, shape, seed++)), constant(Tensor::scalar<float>(3e-5f))},
           {}, 0, "i32 dequantize");
  // Dequantize -> Relu -> Quantize: one kernel, u8 in and out.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::u8, Shape::of({16, 64})});
  Value* s = g->add_constant("s", Tensor::scalar<float>(0.05f));
  Value* z = g->add_constant("z", Tensor::scalar<uint8_t>(100));
  Value* d = g->add_node(OpKind::DequantizeLinear, {x, s, z}, {"d"})->output(0);
  Value* r = g->add_node(OpKind::Relu, {d}, {"r"})->output(0);
  g->add_output(g->add_node(OpKind::QuantizeLinear, {r, g->add_constant("s2", Tensor::scalar<float>(0.02f)), z}, {"y"})
                    ->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::u8, {16, 64}, seed++)}, 0, "QDQ", 1);
}

// Quantize -> Dequantize in f32 (a QDQ model's activations between float ops): the saturated integer's round trip
// through i32 becomes one f32 subtraction of the zero point (codegen/llvm/values.cpp, float_round_trips); the
// results must keep the reference's bits at every rounding boundary, at both ends of the range, for NaN and
// infinities, with zero points at 0, inside and at the ends, u8 and i8, and after a second QDQ step.
TEST(Codegen, QuantizeDequantizeRoundTripKeepsBits) {
  std::vector<float> xs;
  const float sc = 0.047153853f;
  for (int k = -300; k <= 300; ++k) {
    float half = (float(k) + 0.5f) * sc;
    for (float v : {half, std::nextafter(half, INFINITY), std::nextafter(half, -INFINITY), float(k) * sc})
      xs.push_back(v);
  }
  for (float v : {0.f, -0.f, -0.3f * sc, 1e-30f, -1e-30f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN}) xs.push_back(v);
  Tensor x = Tensor::zeros(DType::f32, {int64_t(xs.size())});
  std::copy(xs.begin(), xs.end(), x.data<float>());
  for (DType q : {DType::u8, DType::i8})
    for (int zp : q == DType::u8 ? std::vector<int>{0, 128, 255} : std::vector<int>{0, -3, 127}) {
      auto g = std::make_shared<Graph>();
      Value* in = g->add_input("x", {DType::f32, Shape::of({x.numel()})});
      Value* z = g->add_constant("z", q == DType::u8 ? Tensor::scalar<uint8_t>(uint8_t(zp)) : Tensor::scalar<int8_t>(int8_t(zp)));
      Value* s1 = g->add_constant("s1", Tensor::scalar<float>(sc));
      Value* s2 = g->add_constant("s2", Tensor::scalar<float>(0.02f));
      Value* v = g->add_node(OpKind::QuantizeLinear, {in, s1, z}, {"q1"})->output(0);
      v = g->add_node(OpKind::DequantizeLinear, {v, s1, z}, {"d1"})->output(0);
      v = g->add_node(OpKind::Mul, {v, g->add_constant("k", Tensor::scalar<float>(-1.5f))}, {"m"})->output(0);
      v = g->add_node(OpKind::QuantizeLinear, {v, s2, z}, {"q2"})->output(0);
      g->add_output(g->add_node(OpKind::DequantizeLinear, {v, s2, z}, {"d2"})->output(0));
      infer_shapes(*g);
      std::string what = std::string(dtype_name(q)) + " zero point " + std::to_string(zp);
      std::vector<Tensor> want = Executor(g, reference_kernels()).run({x});
      PassContext ctx;
      run_pass(*create_pass("fuse-elementwise"), *g, ctx);
      int kernels = 0;
      for (auto& n : g->nodes()) kernels += n->op() == OpKind::FusedKernel;
      EXPECT_EQ(kernels, 1) << what;
      Tensor got = Executor(g, ExecutorOptions{}).run({x})[0];
      ASSERT_EQ(got.numel(), want[0].numel()) << what;
      for (int64_t i = 0; i < got.numel(); ++i) {
        uint32_t gb, wb;
        std::memcpy(&gb, got.data<float>() + i, 4);
        std::memcpy(&wb, want[0].data<float>() + i, 4);
        if (gb != wb) {
          ADD_FAILURE() << what << ": element " << i << " (x = " << xs[size_t(i)] << ") = " << got.data<float>()[i]
                        << ", reference " << want[0].data<float>()[i];
          break;
        }
      }
    }
}

// Expand is the broadcast of the iteration space: alone a generated copy, and fused into its consumers without a
// copy. Shapes whose 1s keep the input's dims, a rank-raising shape, integers and bools.
TEST(Codegen, ExpandGenerates) {
  uint32_t seed = 2300;
  check_op(OpKind::Expand, {input(random_tensor(DType::f32, {3, 1, 5}, seed++)), constant(vec<int64_t>({2, 3, 4, 5}))},
           {}, 0, "f32 [3, 1, 5] to [2, 3, 4, 5]");
  check_op(OpKind::Expand, {input(random_tensor(DType::f32, {3, 1, 5}, seed++)), constant(vec<int64_t>({1, 6, 1}))},
           {}, 0, "f32 [3, 1, 5] by [1, 6, 1]");
  check_op(OpKind::Expand, {input(random_tensor(DType::i64, {1, 40}, seed++)), constant(vec<int64_t>({7, 1}))}, {}, 0,
           "i64");
  check_op(OpKind::Expand, {input(random_tensor(DType::boolean, {5, 1}, seed++)), constant(vec<int64_t>({5, 9}))}, {},
           0, "bool");
  // A mask expanded and added: one kernel.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape::of({2, 4, 16, 16})});
  Value* m = g->add_input("m", {DType::f32, Shape::of({2, 1, 1, 16})});
  Value* e = g->add_node(OpKind::Expand, {m, g->add_constant("shape", vec<int64_t>({2, 4, 16, 16}))}, {"e"})->output(0);
  g->add_output(g->add_node(OpKind::Add, {x, e}, {"y"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {2, 4, 16, 16}, seed++), random_tensor(DType::f32, {2, 1, 1, 16}, seed++)},
                    0, "Expand-Add", 1);
}

// Reductions over axes that stay scattered once those of size 1 are set aside: split-reductions makes them chains of
// one-block reductions, each generated (every node after fusion is a generated kernel), matching the reference's
// one pass; keepdims both ways, 16-bit floats, f32 products that overflow f32 midway, integers, specials, and
// MeanVarianceNormalization over its default axes at batch 3.
TEST(Codegen, ScatteredReductionsGenerateAsChains) {
  uint32_t seed = 1300;
  auto check = [&](OpKind op, const std::vector<OpArg>& args, AttrMap attrs, double tol, const std::string& what) {
    OneOp ref = build_op(op, args, attrs);
    std::vector<Tensor> want = Executor(ref.g, reference_kernels()).run(ref.feeds);
    OneOp one = build_op(op, args, attrs);
    PassContext ctx;
    ctx.verify_each = true;
    EXPECT_TRUE(run_pass(*create_pass("split-reductions"), *one.g, ctx)) << what;
    run_pass(*create_pass("fuse-elementwise"), *one.g, ctx);
    run_pass(*create_pass("dead-code-elimination"), *one.g, ctx);
    for (auto& n : one.g->nodes()) EXPECT_EQ(n->op(), OpKind::FusedKernel) << what << ": " << n->describe();
    Executor ex(one.g, ExecutorOptions{});
    for (const NodeTime& t : ex.profile(one.feeds)) EXPECT_EQ(t.impl.rfind("jit:", 0), 0u) << what << ": ran " << t.impl;
    std::vector<Tensor> got = ex.run(one.feeds);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], tol, what);
  };
  for (auto [shape, axes] : {std::pair{Ints{3, 5, 7}, Ints{0, 2}}, std::pair{Ints{4, 3, 33, 2}, Ints{1, 3}},
                             std::pair{Ints{2, 3, 4, 5}, Ints{0, 2, 3}}, std::pair{Ints{5, 1, 6, 7}, Ints{-4, -1}},
                             std::pair{Ints{2, 3, 2, 3, 2}, Ints{0, 2, 4}}}) {
    std::string where = Shape::of(shape).str() + " axes " + Shape::of(axes).str();
    Tensor x = random_tensor(DType::f32, shape, seed++, true);
    Tensor pos = random_tensor(DType::f32, shape, seed++, false, 0.5f, 2.0f);
    for (int64_t keep : {0, 1}) {
      for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceL1,
                        OpKind::ReduceL2, OpKind::ReduceSumSquare, OpKind::ReduceLogSumExp})
        check(op, {input(x), constant(vec<int64_t>(axes))}, {{"keepdims", keep}}, 2e-6,
              std::string(op_name(op)) + " " + where);
      for (OpKind op : {OpKind::ReduceProd, OpKind::ReduceLogSum})
        check(op, {input(pos), constant(vec<int64_t>(axes))}, {{"keepdims", keep}}, 2e-6,
              std::string(op_name(op)) + " " + where);
    }
    check(OpKind::ReduceSum, {input(random_tensor(DType::f16, shape, seed++)), constant(vec<int64_t>(axes))}, {},
          1.0 / 1024, "f16 ReduceSum " + where);
    check(OpKind::ReduceMean, {input(random_tensor(DType::f64, shape, seed++, false)), constant(vec<int64_t>(axes))},
          {}, 1e-13, "f64 ReduceMean " + where);
  }
  // Integers wrap alike in any order (results of more than 8 elements: fewer are shape arithmetic, left alone).
  for (auto [shape, axes] : {std::pair{Ints{3, 11, 7}, Ints{0, 2}}, std::pair{Ints{2, 9, 5, 4}, Ints{1, 3}}}) {
    std::string where = Shape::of(shape).str() + " axes " + Shape::of(axes).str();
    Tensor ints = random_tensor(DType::i32, shape, seed++);
    for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceProd})
      check(op, {input(ints), constant(vec<int64_t>(axes))}, {}, 0, "i32 " + std::string(op_name(op)) + " " + where);
    check(OpKind::ReduceSum, {input(random_tensor(DType::u32, shape, seed++)), constant(vec<int64_t>(axes))}, {}, 0,
          "u32 ReduceSum " + where);
  }
  // An f32 product whose partial products leave f32's range: the links carry f64, as the one-node kernel does.
  Tensor wide = Tensor::zeros(DType::f32, {2, 3, 2});
  const float wv[] = {1e30f, 1e-30f, 1e30f, 2, 1e-30f, 3, 1e-30f, 1e30f, 5, 1e30f, 7, 1e-30f};
  std::copy(std::begin(wv), std::end(wv), wide.data<float>());
  check(OpKind::ReduceProd, {input(wide), constant(vec<int64_t>({0, 2}))}, {}, 1e-7, "f32 ReduceProd beyond f32");
  for (Ints shape : {Ints{3, 4, 5, 6}, Ints{2, 16, 7, 7}})
    check(OpKind::MeanVarianceNormalization, {input(random_tensor(DType::f32, shape, seed++, false))}, {}, 2e-5,
          "MVN " + Shape::of(shape).str());
  check(OpKind::MeanVarianceNormalization, {input(random_tensor(DType::bf16, {3, 4, 5, 6}, seed++))}, {}, 1.0 / 128,
        "bf16 MVN");
}

// Reductions over a block of dims with more dims after it run as columns kernels: Softmax over the channels of
// NCHW, Reduce* over middle and leading axes, odd sizes (tails of every vector width), specials.
TEST(Codegen, ColumnReductions) {
  uint32_t seed = 500;
  struct Case {
    Ints shape;
    int64_t axis;
  };
  for (const Case& c : {Case{{2, 5, 3, 7}, 1}, Case{{3, 37}, 0}, Case{{4, 1, 19}, 1}, Case{{2, 33, 17}, 1},
                        Case{{1, 21, 40, 40}, 1}, Case{{6, 2, 1}, 1}, Case{{5, 3, 2}, -2}}) {
    std::string what = Shape::of(c.shape).str() + " axis " + std::to_string(c.axis);
    Tensor x = random_tensor(DType::f32, c.shape, seed++, false);
    check_op(OpKind::Softmax, {input(x)}, {{"axis", c.axis}}, 1e-6, "Softmax " + what);
    check_op(OpKind::LogSoftmax, {input(x)}, {{"axis", c.axis}}, 1e-6, "LogSoftmax " + what);
    for (int64_t keep : {0, 1}) {
      for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ReduceL2,
                        OpKind::ReduceLogSumExp})
        check_op(op, {input(x), constant(vec<int64_t>({c.axis}))}, {{"keepdims", keep}}, 2e-6, "Reduce " + what);
      check_op(OpKind::ReduceSum, {input(random_tensor(DType::i64, c.shape, seed++)), constant(vec<int64_t>({c.axis}))},
               {{"keepdims", keep}}, 0, "ReduceSum i64 " + what);
    }
  }
  // Two middle axes, leading axes, and NaN/inf inside columns.
  Tensor x = random_tensor(DType::f32, {3, 4, 5, 6}, 9, true);
  check_op(OpKind::ReduceMax, {input(x), constant(vec<int64_t>({1, 2}))}, {}, 0, "ReduceMax axes 1, 2 specials");
  check_op(OpKind::ReduceSum, {input(x), constant(vec<int64_t>({0, 1}))}, {{"keepdims", int64_t(0)}}, 1e-6, "leading");
  check_op(OpKind::Softmax, {input(x)}, {{"axis", int64_t(1)}}, 1e-6, "Softmax specials");
}

// ConvNeXt's channels-first LayerNorm as PyTorch writes it (mean and variance over dim 1 of NCHW, then a
// per-channel affine): one columns kernel, the [C, 1, 1] weights varying down the columns.
TEST(Codegen, ChannelsFirstLayerNorm) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim::symbol("N"), Dim(24), Dim::symbol("H"), Dim::symbol("W")})});
  Value* w = g->add_input("w", {DType::f32, Shape({Dim(24), Dim(1), Dim(1)})});
  Value* b = g->add_input("b", {DType::f32, Shape({Dim(24), Dim(1), Dim(1)})});
  Value* axes = g->add_constant("axes", vec<int64_t>({1}));
  Value* u = g->add_node(OpKind::ReduceMean, {x, axes}, {"u"})->output(0);
  Value* d = g->add_node(OpKind::Sub, {x, u}, {"d"})->output(0);
  Value* d2 = g->add_node(OpKind::Pow, {d, g->add_constant("two", Tensor::scalar<float>(2))}, {"d2"})->output(0);
  Value* var = g->add_node(OpKind::ReduceMean, {d2, axes}, {"var"})->output(0);
  Value* sd = g->add_node(OpKind::Sqrt, {g->add_node(OpKind::Add, {var, g->add_constant("eps", Tensor::scalar<float>(1e-6f))},
                                                      {"ve"})->output(0)}, {"sd"})->output(0);
  Value* y = g->add_node(OpKind::Div, {d, sd}, {"n"})->output(0);
  y = g->add_node(OpKind::Add, {g->add_node(OpKind::Mul, {w, y}, {"s"})->output(0), b}, {"y"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  verify(*g);
  for (Ints shape : {Ints{1, 24, 7, 7}, Ints{2, 24, 5, 13}}) {
    check_fused_graph(g, {random_tensor(DType::f32, shape, 1, false), random_tensor(DType::f32, {24, 1, 1}, 2, false),
                          random_tensor(DType::f32, {24, 1, 1}, 3, false)},
                      2e-5, "channels-first LayerNorm " + Shape::of(shape).str(), 1);
  }
  const Graph& body = *AttrReader(*g->nodes()[0]).g("body");
  auto lk = lower_body(body, {{2, 24, 5, 13}, {24, 1, 1}, {24, 1, 1}}, nullptr);
  ASSERT_TRUE(lk);
  EXPECT_TRUE(lk->kernel.columns);
  EXPECT_EQ(lk->dims, (Ints{2, 24, 65}));
}

// A squeeze-excitation block on channels-last data (timm's x.mean((2, 3)) kept NHWC): SiLU as an output and its
// mean and max over H and W, one columns kernel that walks down the columns once (the reductions' inputs and
// the element-level output computed together), a per-channel scale varying along the lanes; odd channel counts
// (vector tails) and specials. A Softmax down the columns (its sum reads x - max) keeps two walks: ColumnReductions.
TEST(Codegen, ColumnReductionsBesideElementOutputs) {
  for (Ints shape : {Ints{1, 7, 9, 37}, Ints{2, 5, 5, 16}, Ints{1, 3, 1, 130}}) {
    auto g = std::make_shared<Graph>();
    Dim c(shape[3]);
    Value* x = g->add_input("x", {DType::f32, Shape({Dim(shape[0]), Dim(shape[1]), Dim(shape[2]), c})});
    Value* w = g->add_input("w", {DType::f32, Shape({c})});
    Value* sig = g->add_node(OpKind::Sigmoid, {x}, {"sig"})->output(0);
    Value* silu = g->add_node(OpKind::Mul, {x, sig}, {"silu"})->output(0);
    Value* y = g->add_node(OpKind::Mul, {silu, w}, {"y"})->output(0);
    Value* axes = g->add_constant("axes", vec<int64_t>({1, 2}));
    Value* mean = g->add_node(OpKind::ReduceMean, {y, axes}, {"mean"})->output(0);
    Value* max = g->add_node(OpKind::ReduceMax, {silu, axes}, {"max"}, {{"keepdims", int64_t(0)}})->output(0);
    g->add_output(y);
    g->add_output(mean);
    g->add_output(max);
    infer_shapes(*g);
    verify(*g);
    std::string what = "SiLU beside its mean and max " + Shape::of(shape).str();
    check_fused_graph(g, {random_tensor(DType::f32, shape, 7, true), random_tensor(DType::f32, {shape[3]}, 8, false)},
                      1e-6, what, 1);
    const Graph& body = *AttrReader(*g->nodes()[0]).g("body");
    auto lk = lower_body(body, {shape, {shape[3]}}, nullptr);
    ASSERT_TRUE(lk) << what;
    EXPECT_TRUE(lk->kernel.columns) << what;
  }
}

// Runs `body` as the one FusedKernel of a graph, generated and on the reference kernels (the body's nodes op by
// op), and compares: for bodies fuse-elementwise would not form.
void check_body(const std::shared_ptr<Graph>& body, const std::vector<Tensor>& feeds, double tol, const std::string& what) {
  auto g = std::make_shared<Graph>();
  std::vector<Value*> ins;
  for (size_t i = 0; i < feeds.size(); ++i) ins.push_back(g->add_input("in" + std::to_string(i), body->inputs()[i]->type()));
  std::vector<std::string> names;
  for (size_t i = 0; i < body->outputs().size(); ++i) names.push_back("out" + std::to_string(i));
  AttrMap attrs;
  attrs["body"] = Attribute(GraphPtr(body));
  body->set_parent(g.get());
  Node* n = g->add_node(OpKind::FusedKernel, ins, names, attrs);
  for (Value* v : n->outputs()) g->add_output(v);
  infer_shapes(*g);
  std::vector<Tensor> want = Executor(g, reference_kernels()).run(feeds);
  Executor ex(g, ExecutorOptions{});
  for (const NodeTime& t : ex.profile(feeds)) EXPECT_EQ(t.impl.rfind("jit:", 0), 0u) << what << ": ran " << t.impl;
  std::vector<Tensor> got = ex.run(feeds);
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], tol, what + " output " + std::to_string(i));
}

// Transposes of kernel inputs are strided reads inside the consumer's kernel: the permuted copy is never written.
// fuse-elementwise folds those that keep the innermost dim (contiguous reads); kernels with any other permutation
// (gathers) are checked through hand-made bodies.
TEST(Codegen, TransposeFoldsIntoConsumers) {
  struct Case {
    Ints shape;
    Ints perm;  // empty: reverse
  };
  uint32_t seed = 700;
  for (const Case& c : {Case{{5, 7}, {1, 0}}, Case{{2, 3, 4, 5}, {0, 2, 1, 3}}, Case{{2, 6, 5, 7}, {0, 2, 3, 1}},
                        Case{{3, 4, 17}, {}}, Case{{1, 33, 1, 9}, {3, 1, 0, 2}}, Case{{2, 1, 40}, {2, 0, 1}}}) {
    Ints out(c.shape.size());
    Ints perm = c.perm;
    if (perm.empty())
      for (int64_t d = int64_t(c.shape.size()); d-- > 0;) perm.push_back(d);
    for (size_t d = 0; d < perm.size(); ++d) out[d] = c.shape[size_t(perm[d])];
    std::string what = Shape::of(c.shape).str() + " perm " + Shape::of(perm).str();
    for (DType dt : {DType::f32, DType::i64}) {
      // Transpose(x) + y, y full or broadcast along the first or last dim
      Ints bcast = out;
      bcast[0] = 1;
      for (Ints ys : {out, bcast, Ints{out.back()}}) {
        auto g = std::make_shared<Graph>();
        Value* x = g->add_input("x", {dt, Shape::of(c.shape)});
        Value* y = g->add_input("y", {dt, Shape::of(ys)});
        Node* t = g->add_node(OpKind::Transpose, {x}, {"t"});
        if (!c.perm.empty()) t->attrs()["perm"] = c.perm;
        g->add_output(g->add_node(OpKind::Add, {t->output(0), y}, {"z"})->output(0));
        infer_shapes(*g);
        std::vector<Tensor> feeds{random_tensor(dt, c.shape, seed++), random_tensor(dt, ys, seed++)};
        if (perm.back() != int64_t(perm.size()) - 1) {
          check_body(g, feeds, 0, "Transpose+Add body " + what);
          continue;
        }
        check_fused_graph(g, feeds, 0, "Transpose+Add " + what, 1);
        EXPECT_EQ(g->nodes().size(), 1u) << what << ": the Transpose joined the kernel";
      }
    }
    // The transposed value also leaves the kernel, and a reduction reads it: Softmax along the new last axis.
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", {DType::f32, Shape::of(c.shape)});
    Node* t = g->add_node(OpKind::Transpose, {x}, {"t"});
    if (!c.perm.empty()) t->attrs()["perm"] = c.perm;
    g->add_output(t->output(0));
    g->add_output(g->add_node(OpKind::Softmax, {t->output(0)}, {"s"})->output(0));
    infer_shapes(*g);
    std::vector<Tensor> feeds{random_tensor(DType::f32, c.shape, seed++, false)};
    if (perm.back() != int64_t(perm.size()) - 1) check_body(g, feeds, 1e-6, "Transpose+Softmax body " + what);
    else check_fused_graph(g, feeds, 1e-6, "Transpose+Softmax " + what, 1);
  }
  // x + x^T reads one buffer two ways (a body); a lone Transpose, or one moving the innermost dim, stays.
  auto body = std::make_shared<Graph>("xxt");
  Value* bx = body->add_input("x", {DType::f32, Shape({Dim(9), Dim(9)})});
  body->add_output(body->add_node(OpKind::Add, {bx, body->add_node(OpKind::Transpose, {bx}, {"t"})->output(0)}, {"z"})->output(0));
  infer_shapes(*body);
  check_body(body, {random_tensor(DType::f32, {9, 9}, 1)}, 0, "x + x^T");
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim(2), Dim(9), Dim(9)})});
  Node* keep = g->add_node(OpKind::Transpose, {x}, {"keep"});
  keep->attrs()["perm"] = Ints{1, 0, 2};
  g->add_output(g->add_node(OpKind::Relu, {keep->output(0)}, {"r"})->output(0));
  g->add_output(g->add_node(OpKind::Relu, {g->add_node(OpKind::Transpose, {x}, {"moves"})->output(0)}, {"r2"})->output(0));
  g->add_output(g->add_node(OpKind::Transpose, {x}, {"lone"})->output(0));
  infer_shapes(*g);
  check_fused_graph(g, {random_tensor(DType::f32, {2, 9, 9}, 1)}, 0, "kept, moved and lone Transposes", 2);
  int transposes = 0;
  for (auto& n : g->nodes()) transposes += n->op() == OpKind::Transpose;
  EXPECT_EQ(transposes, 2) << "the lone Transpose and the one moving the innermost dim stay";
}

// A fused chain: Add(x, mask) -> Softmax -> Mul(.., s) and LayerNorm(x + r) with Gelu after: one kernel each.
TEST(Codegen, FusedChainsAndSymbolicShapes) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim::symbol("B"), Dim(4), Dim::symbol("S")})});
  Value* m = g->add_input("mask", {DType::f32, Shape({Dim::symbol("B"), Dim(1), Dim::symbol("S")})});
  Value* s = g->add_constant("s", Tensor::scalar<float>(0.125f));
  Value* a = g->add_node(OpKind::Add, {x, m}, {"a"})->output(0);
  Value* p = g->add_node(OpKind::Softmax, {a}, {"p"}, {{"axis", int64_t(-1)}})->output(0);
  Value* q = g->add_node(OpKind::Mul, {p, s}, {"q"})->output(0);
  Value* r = g->add_node(OpKind::Relu, {x}, {"r"})->output(0);  // a second reader of x; its own group? joins
  g->add_output(q);
  g->add_output(r);
  infer_shapes(*g);
  verify(*g);
  for (Ints shape : {Ints{1, 4, 7}, Ints{3, 4, 64}, Ints{2, 4, 300}, Ints{8, 4, 1}}) {
    Ints ms = shape;
    ms[1] = 1;
    check_fused_graph(g, {random_tensor(DType::f32, shape, 1, false), random_tensor(DType::f32, ms, 2, false)}, 1e-6,
                      "attention-like " + Shape::of(shape).str());
  }
}

// Lowering is shape-generic: the same body at other sizes (same broadcast pattern) gives the same kernel.
TEST(Codegen, KernelsAreShapeGeneric) {
  OneOp one = build_op(OpKind::Add, {input(random_tensor(DType::f32, {2, 3, 8}, 1)), input(random_tensor(DType::f32, {8}, 2))});
  PassContext ctx;
  run_pass(*create_pass("fuse-elementwise"), *one.g, ctx);
  const Graph& body = *AttrReader(*one.g->nodes()[0]).g("body");
  auto k1 = lower_body(body, {{2, 3, 8}, {8}}, nullptr);
  auto k2 = lower_body(body, {{5, 7, 100}, {100}}, nullptr);
  ASSERT_TRUE(k1 && k2);
  EXPECT_EQ(k1->kernel.hash(), k2->kernel.hash());
  EXPECT_EQ(k1->kernel.rank, 2);  // [6, 8]: the outer dims merged
  EXPECT_EQ(k2->dims, (Ints{35, 100}));
  auto k3 = lower_body(body, {{2, 3, 8}, {1}}, nullptr);  // another broadcast pattern: another kernel
  ASSERT_TRUE(k3);
  EXPECT_NE(k1->kernel.hash(), k3->kernel.hash());
}

// ---- random chains under random schedules

struct RandomBody {
  std::shared_ptr<Graph> g;
  std::vector<Tensor> feeds;
};

// reduction: 0 none, 1 over the last axis (a row kernel), 2 over the first (a columns kernel); 3 and 4: a CumSum
// over the last or the first axis (its inputs hold no huge values: a row scan associates differently from the
// reference, which matters only where huge terms cancel).
RandomBody random_chain(std::mt19937& rng, int reduction) {
  RandomBody rb{std::make_shared<Graph>(), {}};
  Graph& g = *rb.g;
  std::uniform_int_distribution<int> pick(0, 1000);
  Ints full = {int64_t(1 + pick(rng) % 4), int64_t(1 + pick(rng) % 70)};
  std::vector<Value*> pool;
  auto add_input = [&](Ints shape) {
    Value* v = g.add_input("in" + std::to_string(rb.feeds.size()), {DType::f32, Shape::of(shape)});
    rb.feeds.push_back(random_tensor(DType::f32, shape, uint32_t(pick(rng)), pick(rng) % 2 == 0 && reduction < 3));
    return v;
  };
  pool.push_back(add_input(full));
  int n = 2 + pick(rng) % 8;
  const OpKind unary[] = {OpKind::Exp, OpKind::Tanh, OpKind::Relu, OpKind::Neg, OpKind::Abs, OpKind::Sigmoid,
                          OpKind::Erf, OpKind::Sqrt, OpKind::Log, OpKind::Gelu};
  const OpKind binary[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Max, OpKind::Min};
  Value* last = pool[0];
  for (int i = 0; i < n; ++i) {
    std::string name = "v" + std::to_string(i);
    // Every node reads the previous one, so the chain is one group; side operands come from earlier values and
    // broadcast inputs.
    Value* a = last;
    if (pick(rng) % 2) {
      last = g.add_node(unary[pick(rng) % std::size(unary)], {a}, {name})->output(0);
    } else {
      Value* b;
      switch (pick(rng) % 3) {
        case 0: b = pool[size_t(pick(rng)) % pool.size()]; break;
        case 1: b = add_input({full[1]}); break;
        default: b = add_input({full[0], 1}); break;
      }
      last = g.add_node(binary[pick(rng) % std::size(binary)], {a, b}, {name})->output(0);
    }
    if (pick(rng) % 3) pool.push_back(last);
  }
  if (reduction >= 3) {
    Value* axis = g.add_constant("axis", vec<int64_t>({reduction == 3 ? -1 : 0}));
    Node* cs = g.add_node(OpKind::CumSum, {last, axis}, {"scan"});
    cs->attrs()["exclusive"] = int64_t(pick(rng) % 2);
    cs->attrs()["reverse"] = int64_t(pick(rng) % 2);
    last = g.add_node(OpKind::Mul, {cs->output(0), add_input({full[1]})}, {"post"})->output(0);
  } else if (reduction) {
    int64_t axis = reduction == 1 ? -1 : 0;
    if (pick(rng) % 2) {  // a Reduce with keepdims feeding back into the full space
      const OpKind keep[] = {OpKind::ReduceMax, OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceL2};
      Value* axes = g.add_constant("axes", vec<int64_t>({axis}));
      Value* m = g.add_node(keep[pick(rng) % std::size(keep)], {last, axes}, {"keep"})->output(0);
      last = g.add_node(OpKind::Sub, {last, m}, {"centred"})->output(0);
    }
    const OpKind red[] = {OpKind::Softmax, OpKind::LogSoftmax};
    Node* sm = g.add_node(red[pick(rng) % 2], {last}, {"red"});
    sm->attrs()["axis"] = axis;
    last = g.add_node(OpKind::Mul, {sm->output(0), add_input({full[1]})}, {"post"})->output(0);
  }
  g.add_output(last);
  if (pick(rng) % 2 && pool.size() > 1) g.add_output(pool[1]);
  infer_shapes(g);
  verify(g);
  return rb;
}

TEST(Codegen, RandomChainsRandomSchedules) {
  std::mt19937 rng(2024);
  const Schedule schedules[] = {{1, 1, 1},    {4, 1, 3},          {8, 3, 7},         {16, 2, 64},
                                {16, 4, 5},   {32, 1, 100},       {2, 8, 9},         {16, 2, 64, true},
                                {8, 1, 5, true}, {4, 2, 48, true}, {64, 1, 33},     {128, 2, 200}};
  for (int trial = 0; trial < 40; ++trial) {
    RandomBody rb = random_chain(rng, trial % 5);
    std::vector<Tensor> want = Executor(rb.g, reference_kernels()).run(rb.feeds);
    PassContext ctx;
    run_pass(*create_pass("fuse-elementwise"), *rb.g, ctx);
    ASSERT_EQ(rb.g->nodes().size(), 1u) << "trial " << trial << ": the chain is one group";
    const Node& fk = *rb.g->nodes()[0];
    const Graph& body = *AttrReader(fk).g("body");
    std::vector<Ints> shapes;
    // the FusedKernel's inputs are some of the graph inputs, in its own order
    std::vector<const Tensor*> ins;
    for (const Value* v : fk.inputs()) {
      size_t idx = size_t(std::find(rb.g->inputs().begin(), rb.g->inputs().end(), v) - rb.g->inputs().begin());
      ins.push_back(&rb.feeds.at(idx));
      shapes.push_back(rb.feeds[idx].shape());
    }
    std::string why;
    auto lk = lower_body(body, shapes, &why);
    ASSERT_TRUE(lk) << why;
    std::vector<Tensor> first;
    for (const Schedule& s : schedules) {
      GeneratedFn fn = jit_kernel(lk->kernel, s);
      std::vector<Tensor> outs;
      std::vector<void*> ptrs;
      for (const Tensor* t : ins) ptrs.push_back(const_cast<void*>(t->raw()));
      // outputs take the shapes the reference gave them
      for (const Value* ov : fk.outputs()) {
        size_t gi = size_t(std::find(rb.g->outputs().begin(), rb.g->outputs().end(), ov) - rb.g->outputs().begin());
        outs.push_back(Tensor::zeros(ov->dtype(), want.at(gi).shape()));
      }
      for (Tensor& t : outs) ptrs.push_back(t.raw());
      // Split the work at a schedule-dependent point: results must not depend on it.
      bool rows = lk->kernel.has_rows() && !lk->kernel.columns;
      int64_t total = rows ? lk->rows : lk->rows * lk->inner;
      int64_t cut = std::min<int64_t>(total, s.grain % (total + 1));
      fn(lk->dims.data(), lk->strides.data(), ptrs.data(), 0, cut);
      fn(lk->dims.data(), lk->strides.data(), ptrs.data(), cut, total);
      for (size_t k = 0; k < outs.size(); ++k) {
        const Value* ov = fk.outputs()[k];
        size_t gi = size_t(std::find(rb.g->outputs().begin(), rb.g->outputs().end(), ov) - rb.g->outputs().begin());
        expect_close(outs[k], want[gi], 2e-5, "trial " + std::to_string(trial) + " " + s.str());
      }
      if (first.empty()) {
        first = outs;
      } else {
        // Bit for bit, except that NaNs may differ in sign and payload (which NaN a max keeps depends on the
        // order operands meet, and x86's default NaN is negative).
        for (size_t k = 0; k < outs.size(); ++k)
          for (int64_t i = 0; i < outs[k].numel(); ++i) {
            float a = outs[k].data<float>()[i], b = first[k].data<float>()[i];
            bool same = std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
            if (!same) {
              ADD_FAILURE() << "trial " << trial << ": schedule " << s.str() << " changed element " << i
                            << " of output " << k << ": " << a << " vs " << b << "\n" << lk->kernel.str();
              break;
            }
          }
      }
    }
  }
}

// y = op(x) over `rank` dims, x read with `access` along the innermost dim: a hand-made kernel.
Kernel unary_kernel(Op op, Access access = Access::contiguous, int rank = 1) {
  Kernel k;
  k.rank = rank;
  k.operands = {{DType::f32, access, false, false}, {DType::f32, Access::contiguous, true, false}};
  k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 0, 0});
  k.exprs.push_back({op, Scalar::f32, 0, -1, -1, -1, 0});
  k.stores.push_back({1, 1});
  return k;
}

// A strided operand (a transposed read, which layout fusion will produce) goes through gathers.
TEST(Codegen, StridedOperand) {
  Kernel k = unary_kernel(Op::exp, Access::strided, 2);
  int64_t R = 5, Cn = 19;
  std::vector<float> x(size_t(R * Cn)), y(size_t(R * Cn));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) * 0.1f - 0.5f;
  // y[r][c] = exp(x[c][r]) with x stored [Cn, R]
  Ints dims{R, Cn}, strides{1, R, Cn, 1};
  for (Schedule s : {Schedule{16, 2, 1}, Schedule{4, 1, 1}}) {
    GeneratedFn fn = jit_kernel(k, s);
    void* ptrs[] = {x.data(), y.data()};
    fn(dims.data(), strides.data(), ptrs, 0, R * Cn);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < Cn; ++c)
        EXPECT_NEAR(y[size_t(r * Cn + c)], std::exp(x[size_t(c * R + r)]), 1e-6) << r << "," << c;
  }
}

// Streaming (non-temporal) stores: taken where every full vector store is aligned, plain stores elsewhere
// (a misaligned output, rows that are not whole vector groups, a range starting mid-group), the same bits.
TEST(Codegen, StreamingStoresMatchPlainStores) {
  Kernel k = unary_kernel(Op::erf, Access::contiguous, 2);
  for (Schedule s : {Schedule{16, 1, 1, true}, Schedule{8, 2, 1, true}, Schedule{4, 1, 1, true}})
    EXPECT_NE(kernel_assembly(k, s).find("vmovnt"), std::string::npos) << s.str();  // vmovntps or vmovntdq
  EXPECT_EQ(kernel_assembly(k, Schedule{16, 1, 1, false}).find("vmovnt"), std::string::npos);
  for (int64_t cols : {int64_t(48), int64_t(19)}) {
    int64_t rows = 7, n = rows * cols;
    Tensor x = Tensor::zeros(DType::f32, {n});
    for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = float(i % 29) * 0.2f - 2.8f;
    Ints dims{rows, cols}, strides{cols, 1, cols, 1};
    auto run = [&](Schedule s, int64_t shift, int64_t cut) {
      Tensor y = Tensor::zeros(DType::f32, {n + 16});  // 64-byte aligned; shifted by `shift` floats
      void* ptrs[] = {x.raw(), y.data<float>() + shift};
      GeneratedFn fn = jit_kernel(k, s);
      fn(dims.data(), strides.data(), ptrs, 0, cut);
      fn(dims.data(), strides.data(), ptrs, cut, n);
      return std::vector<float>(y.data<float>() + shift, y.data<float>() + shift + n);
    };
    std::vector<float> want = run(Schedule{16, 1, 1, false}, 0, n);
    for (Schedule s : {Schedule{16, 1, 1, true}, Schedule{8, 2, 1, true}, Schedule{4, 1, 1, true}})
      for (int64_t shift : {0, 1, 4})
        for (int64_t cut : {int64_t(0), int64_t(32), int64_t(5), n})
          EXPECT_EQ(run(s, shift, cut), want) << s.str() << " cols " << cols << " shift " << shift << " cut " << cut;
  }
}

// Softmax streams its output through a stack buffer that holds the row's exp between the sum's pass and the
// output pass (rows of up to 4096); longer rows, misaligned outputs and odd rows keep the output as that cache
// and store plainly. All give the plain schedule's bits.
TEST(Codegen, StreamingSoftmaxMatchesPlain) {
  Kernel k;
  k.rank = 2;
  k.operands = {{DType::f32, Access::contiguous, false, false}, {DType::f32, Access::contiguous, true, false}};
  k.exprs = {{Op::load, Scalar::f32, -1, -1, -1, 0, 0}, {Op::row_max, Scalar::f32, 0, -1, -1, -1, 0},
             {Op::sub, Scalar::f32, 0, 1, -1, -1, 0},   {Op::exp, Scalar::f32, 2, -1, -1, -1, 0},
             {Op::row_sum, Scalar::f32, 3, -1, -1, -1, 0}, {Op::constant, Scalar::f32, -1, -1, -1, -1, 1},
             {Op::div, Scalar::f32, 5, 4, -1, -1, 0},   {Op::mul, Scalar::f32, 3, 6, -1, -1, 0}};
  k.stores = {{1, 7}};
  ASSERT_EQ(k.row_cache_expr(), 3);
  EXPECT_EQ(k.output_pass_costly_exprs(), 0);  // the exp is the cache's; 1 / sum is once a row
  EXPECT_NE(kernel_assembly(k, Schedule{16, 2, 1, true}).find("vmovntps"), std::string::npos);
  for (int64_t cols : {int64_t(48), int64_t(4096), int64_t(4112), int64_t(19)}) {
    int64_t rows = 5, n = rows * cols;
    Tensor x = random_tensor(DType::f32, {n}, uint32_t(cols), true, -20, 20);
    Ints dims{rows, cols}, strides{cols, 1, cols, 1};
    auto run = [&](Schedule s, int64_t shift) {
      Tensor y = Tensor::zeros(DType::f32, {n + 16});  // 64-byte aligned; shifted by `shift` floats
      void* ptrs[] = {x.raw(), y.data<float>() + shift};
      GeneratedFn fn = jit_kernel(k, s);
      fn(dims.data(), strides.data(), ptrs, 0, 2);
      fn(dims.data(), strides.data(), ptrs, 2, rows);
      return std::vector<uint32_t>(reinterpret_cast<uint32_t*>(y.data<float>() + shift),
                                   reinterpret_cast<uint32_t*>(y.data<float>() + shift + n));
    };
    std::vector<uint32_t> want = run(Schedule{16, 2, 1, false}, 0);
    for (Schedule s : {Schedule{16, 2, 1, true}, Schedule{16, 1, 1, true}, Schedule{8, 2, 1, true}})
      for (int64_t shift : {0, 3})
        EXPECT_EQ(run(s, shift), want) << s.str() << " cols " << cols << " shift " << shift;
  }
}

// ---- math error bounds over wide sweeps

double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(want)) return double(got) == want ? 0 : 1e9;
  float w = float(want);
  if (std::isinf(w)) return std::isinf(got) && (got > 0) == (w > 0) ? 0 : 1e9;  // rounds to inf in float
  double ulp = std::ldexp(1.0, std::max(std::ilogb(w == 0 ? std::numeric_limits<float>::min() : w), -126) - 23);
  return std::fabs(double(got) - want) / ulp;
}

// Runs a one-op f32 kernel over `xs` and returns the outputs.
std::vector<float> run_unary(Op op, const std::vector<float>& xs, Schedule schedule = {}) {
  Kernel k = unary_kernel(op);
  std::vector<float> ys(xs.size());
  Ints dims{int64_t(xs.size())}, strides{1, 1};
  void* ptrs[] = {const_cast<float*>(xs.data()), ys.data()};
  jit_kernel(k, schedule)(dims.data(), strides.data(), ptrs, 0, int64_t(xs.size()));
  return ys;
}

std::vector<float> sweep_inputs(float lo, float hi) {
  std::vector<float> xs;
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int i = 0; i < 400000; ++i) xs.push_back(d(rng));
  // every 97th float bit pattern: all binades, denormals, both signs
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 97 * 65537) xs.push_back(std::bit_cast<float>(uint32_t(b)));
  for (float s : {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, 1e-45f, std::numeric_limits<float>::max()}) xs.push_back(s);
  return xs;
}

// The CPU kernels' erf_f and exp_f (kernels/cpu/vec_math.h: the GEMM's GELU epilogue, the unary kernels,
// Attention's Softmax) evaluate the polynomials of support/erf_polynomial.h and exp_polynomial.h with the same
// multiply-adds as the generated erf and exp: equal bits everywhere, denormal and overflowing results included.
TEST(Codegen, ErfAndExpEqualCpuKernelsBitForBit) {
  struct F {
    Op op;
    float (*cpu)(float);
    float lo, hi;
  };
  for (const F& f : {F{Op::erf, cpu::erf_f, -5.f, 5.f}, F{Op::exp, cpu::exp_f, -110.f, 95.f}}) {
    std::vector<float> xs = sweep_inputs(f.lo, f.hi);
    std::vector<float> ys = run_unary(f.op, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      float want = f.cpu(xs[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(ys[i])) << op_name(f.op) << "(" << xs[i] << ")";
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(ys[i]), std::bit_cast<uint32_t>(want)) << op_name(f.op) << "(" << xs[i] << ")";
    }
  }
}

TEST(Codegen, MathErrorBounds) {
  struct M {
    Op op;
    double (*ref)(double);
    float lo, hi;
    double max_ulp;      // bound in units of the result's last place
    double max_abs;      // or this absolute error (for results near 0, where ulps shrink)
    bool every_exponent = false;  // also random bit patterns and floats nearest multiples of pi/2
  };
  const M fns[] = {
      {Op::exp, [](double x) { return std::exp(x); }, -110, 90, 2, 0},
      {Op::log, [](double x) { return std::log(x); }, 0, 100, 2, 0},
      {Op::tanh, [](double x) { return std::tanh(x); }, -10, 10, 2, 0},
      {Op::erf, [](double x) { return std::erf(x); }, -5, 5, 3, 0},
      {Op::sin, [](double x) { return std::sin(x); }, -100, 100, 1, 0, true},
      {Op::cos, [](double x) { return std::cos(x); }, -100, 100, 1, 0, true},
      {Op::tan, [](double x) { return std::tan(x); }, -100, 100, 1, 0, true},
      {Op::atan, [](double x) { return std::atan(x); }, -10, 10, 1, 0, true},
  };
  // Every width: 16 and 32 lanes scale by 2^n with AVX-512's vscalefps (32 in two halves), 8 with its 256-bit
  // form, 4 and 1 (row-uniform values) with exponent-field multiplies.
  for (const M& m : fns) {
    std::vector<float> xs = sweep_inputs(m.lo, m.hi);
    if (m.every_exponent) {
      // Random bit patterns: every exponent, so sin/cos/tan meet the table-driven reduction of huge arguments.
      std::mt19937 rng(78);
      for (int i = 0; i < 300000; ++i) {
        float v = std::bit_cast<float>(uint32_t(rng()));
        if (std::isfinite(v)) xs.push_back(v);
      }
      // Floats nearest multiples of pi/2 (the hardest reductions) and the edge of the Cody-Waite range.
      for (double k = 1; k < 2e6; k = k * 1.37 + 1) {
        float v = float(k * 1.5707963267948966);
        for (float u : {v, std::nextafter(v, 0.0f), std::nextafter(v, kInf), -v}) xs.push_back(u);
      }
      for (float v : {1048576.0f, std::nextafter(1048576.0f, 0.0f), -1048576.0f, 3.0e38f, 1e-45f}) xs.push_back(v);
    }
    for (int width : {16, 32, 128, 8, 4, 1}) {
      Schedule s;
      s.vector_width = width;
      std::vector<float> ys = run_unary(m.op, xs, s);
      double worst = 0;
      float worst_x = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        double want = m.ref(double(xs[i]));
        double e = ulp_error(ys[i], want);
        if (m.max_abs > 0 && std::fabs(double(ys[i]) - want) <= m.max_abs) e = 0;
        if (e > worst) worst = e, worst_x = xs[i];
      }
      EXPECT_LE(worst, m.max_ulp) << op_name(m.op) << " at width " << width << ": worst at x = " << worst_x;
    }
  }
}

// Every float of the ranges below through the generated exp, log, erf and tanh, against f64: the bounds that
// MathErrorBounds samples, checked everywhere (erf and tanh are odd and computed from |x|, and round to 1 past
// their ranges). About two minutes; run with --gtest_also_run_disabled_tests after changing one of them.
TEST(Codegen, DISABLED_MathEveryFloat) {
  struct F {
    Op op;
    double (*ref)(double);
    std::vector<float> ends;  // each range runs from 0 (or -0) to the end, denormals included
    double max_ulp;
  };
  const F fns[] = {
      {Op::exp, [](double x) { return std::exp(x); }, {89.0f, -104.0f}, 2.0},
      {Op::log, [](double x) { return std::log(x); }, {std::numeric_limits<float>::max()}, 2.0},
      {Op::erf, [](double x) { return std::erf(x); }, {4.0f}, 3.0},
      {Op::tanh, [](double x) { return std::tanh(x); }, {9.1f}, 2.0},
  };
  for (const F& f : fns) {
    double worst = 0;
    float worst_x = 0;
    std::vector<float> xs;
    for (float end : f.ends) {
      const uint32_t first = std::signbit(end) ? 0x80000000u : 0u, last = std::bit_cast<uint32_t>(end);
      const uint32_t chunk = uint32_t(1) << 22;
      for (uint32_t lo = first; lo <= last; lo += std::min(chunk, last - lo + 1)) {
        xs.clear();
        for (uint32_t b = lo; b - lo < chunk && b <= last; ++b) xs.push_back(std::bit_cast<float>(b));
        std::vector<float> ys = run_unary(f.op, xs);
        for (size_t i = 0; i < xs.size(); ++i) {
          double e = ulp_error(ys[i], f.ref(double(xs[i])));
          if (e > worst) worst = e, worst_x = xs[i];
        }
        if (last - lo < chunk) break;
      }
    }
    EXPECT_LE(worst, f.max_ulp) << op_name(f.op) << ": worst at x = " << worst_x;
    std::printf("%s over every float of its ranges: worst %.3f ulp at x = %.9g\n", op_name(f.op), worst,
                double(worst_x));
  }
}

// pow against C's pow in f64 over bases and exponents of every magnitude and sign, within 1 ulp.
TEST(Codegen, PowErrorBound) {
  Kernel k;
  k.operands = {{DType::f32, Access::contiguous, false, false}, {DType::f32, Access::contiguous, false, false},
                {DType::f32, Access::contiguous, true, false}};
  k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 0, 0});
  k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 1, 0});
  k.exprs.push_back({Op::pow, Scalar::f32, 0, 1, -1, -1, 0});
  k.stores.push_back({2, 2});
  std::mt19937 rng(91);
  std::vector<float> xs, ys;
  std::uniform_real_distribution<float> small(-12, 12), base(0, 4);
  for (int i = 0; i < 300000; ++i) {
    float x, y;
    switch (i % 4) {
      case 0: x = std::bit_cast<float>(uint32_t(rng())), y = small(rng); break;              // any base
      case 1: x = base(rng), y = std::bit_cast<float>(uint32_t(rng()) & 0x87ffffffu); break;  // |y| < 2^17 or so
      case 2: x = -base(rng), y = float(int(small(rng))); break;                              // negative bases
      default: x = 1 + small(rng) * 1e-3f, y = small(rng) * 1e4f;                             // near 1, big exponents
    }
    xs.push_back(x), ys.push_back(y);
  }
  for (Schedule s : {Schedule{}, Schedule{4, 1}, Schedule{1, 1}}) {
    std::vector<float> out(xs.size());
    Ints dims{int64_t(xs.size())}, strides{1, 1, 1};
    void* ptrs[] = {xs.data(), ys.data(), out.data()};
    jit_kernel(k, s)(dims.data(), strides.data(), ptrs, 0, int64_t(xs.size()));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double e = ulp_error(out[i], std::pow(double(xs[i]), double(ys[i])));
      if (e > worst) worst = e, at = i;
    }
    EXPECT_LE(worst, 1.0) << "pow at width " << s.vector_width << ": worst at " << xs[at] << " ^ " << ys[at]
                          << " = " << out[at];
  }
}

// The ops lowered as compositions (asin via atan, sinh via exp, ...) against the C library over their domains:
// the bounds the documentation states.
TEST(Codegen, CompositeMathErrorBounds) {
  struct C {
    OpKind op;
    double (*ref)(double);
    float lo, hi;
    double max_ulp, max_abs;
  };
  const C fns[] = {
      {OpKind::Asin, [](double x) { return std::asin(x); }, -1, 1, 3, 0},
      {OpKind::Acos, [](double x) { return std::acos(x); }, -1, 1, 3, 0},
      {OpKind::Sinh, [](double x) { return std::sinh(x); }, -90, 90, 4, 0},
      {OpKind::Cosh, [](double x) { return std::cosh(x); }, -90, 90, 4, 0},
      {OpKind::Asinh, [](double x) { return std::asinh(x); }, -1e5, 1e5, 4, 0},
      {OpKind::Acosh, [](double x) { return std::acosh(x); }, 1, 1e5, 4, 0},
      {OpKind::Atanh, [](double x) { return std::atanh(x); }, -1, 1, 4, 0},
  };
  for (const C& c : fns) {
    std::vector<float> xs = sweep_inputs(c.lo, c.hi);
    std::uniform_real_distribution<float> near(-1e-3f, 1e-3f);  // the edges of each branch and domain
    std::mt19937 rng(5);
    for (float edge : {0.0f, 0.5f, 1.0f, 20.0f, 4096.0f})
      for (int i = 0; i < 2000; ++i) xs.push_back(edge + edge * near(rng)), xs.push_back(-(edge + edge * near(rng)));
    Tensor x = Tensor::zeros(DType::f32, {int64_t(xs.size())});
    std::copy(xs.begin(), xs.end(), x.data<float>());
    OneOp one = build_op(c.op, {input(x)});
    PassContext ctx;
    run_pass(*create_pass("fuse-elementwise"), *one.g, ctx);
    Tensor y = Executor(one.g, ExecutorOptions{}).run(one.feeds)[0];
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double want = c.ref(double(xs[i]));
      double e = ulp_error(y.data<float>()[i], want);
      if (e > worst) worst = e, worst_x = xs[i];
    }
    EXPECT_LE(worst, c.max_ulp) << op_name(c.op) << ": worst at x = " << worst_x;
  }
}

// ---- the disk cache

TEST(Codegen, DiskCacheHitsAndRejectsCorruptEntries) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cuvil_jit_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  jit_reset_for_testing(dir.string());
  Kernel k;
  k.operands = {{DType::f32, Access::contiguous, false, false}, {DType::f32, Access::contiguous, true, false}};
  k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 0, 0});
  k.exprs.push_back({Op::constant, Scalar::f32, -1, -1, -1, -1, 2.5});
  k.exprs.push_back({Op::mul, Scalar::f32, 0, 1, -1, -1, 0});
  k.stores.push_back({1, 2});
  auto check = [&](GeneratedFn fn) {
    float x[3] = {1, -2, 4}, y[3] = {};
    Ints dims{3}, strides{1, 1};
    void* ptrs[] = {x, y};
    fn(dims.data(), strides.data(), ptrs, 0, 3);
    EXPECT_EQ(y[0], 2.5f);
    EXPECT_EQ(y[1], -5.0f);
    EXPECT_EQ(y[2], 10.0f);
  };
  check(jit_kernel(k, Schedule{}));
  EXPECT_EQ(jit_stats().compiled, 1);
  check(jit_kernel(k, Schedule{}));
  EXPECT_EQ(jit_stats().memory_hits, 1);
  std::vector<fs::path> entries;
  for (auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);

  jit_reset_for_testing(dir.string());  // a new process, as far as the cache can tell
  check(jit_kernel(k, Schedule{}));
  EXPECT_EQ(jit_stats().disk_hits, 1);
  EXPECT_EQ(jit_stats().compiled, 0);

  auto damage = [&](auto edit) {
    std::string data;
    {
      std::ifstream f(entries[0], std::ios::binary);
      data.assign(std::istreambuf_iterator<char>(f), {});
    }
    edit(data);
    std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << data;
    jit_reset_for_testing(dir.string());
    check(jit_kernel(k, Schedule{}));
    EXPECT_EQ(jit_stats().rejected_entries, 1);
    EXPECT_EQ(jit_stats().compiled, 1);  // rebuilt, and the entry rewritten
    jit_reset_for_testing(dir.string());
    check(jit_kernel(k, Schedule{}));
    EXPECT_EQ(jit_stats().disk_hits, 1);
  };
  damage([](std::string& d) { d[d.size() - 9] ^= 0x5a; });               // a flipped bit in the object
  damage([](std::string& d) { d.resize(d.size() / 2); });                // truncated
  damage([](std::string& d) { d.replace(d.find("cuvil "), 6, "cuvix "); });  // another version's entry
  damage([](std::string& d) { d.assign("garbage"); });
  fs::remove_all(dir);
  jit_reset_for_testing("");
}

// CUVIL_CACHE_MAX_MB bounds the disk cache: past it the least recently used entries go; an evicted kernel is
// simply compiled again.
TEST(Codegen, DiskCacheEvictsLeastRecentlyUsed) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cuvil_jit_evict_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto kernel = [](int i) {  // y = x * (i + 0.5): a distinct kernel (and cache entry) per i
    Kernel k;
    k.operands = {{DType::f32, Access::contiguous, false, false}, {DType::f32, Access::contiguous, true, false}};
    k.exprs.push_back({Op::load, Scalar::f32, -1, -1, -1, 0, 0});
    k.exprs.push_back({Op::constant, Scalar::f32, -1, -1, -1, -1, i + 0.5});
    k.exprs.push_back({Op::mul, Scalar::f32, 0, 1, -1, -1, 0});
    k.stores.push_back({1, 2});
    return k;
  };
  auto check = [](GeneratedFn fn, int i) {
    float x[2] = {2, -4}, y[2] = {};
    Ints dims{2}, strides{1, 1};
    void* ptrs[] = {x, y};
    fn(dims.data(), strides.data(), ptrs, 0, 2);
    EXPECT_EQ(y[0], 2 * (i + 0.5f));
    EXPECT_EQ(y[1], -4 * (i + 0.5f));
  };
  auto entries = [&] {
    std::vector<fs::path> out;
    uint64_t bytes = 0;
    for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path()), bytes += fs::file_size(e.path());
    return std::pair{out, bytes};
  };
  jit_reset_for_testing(dir.string());
  check(jit_kernel(kernel(0), Schedule{}), 0);
  uint64_t one = entries().second;
  ASSERT_GT(one, 0u);
  // A budget of four and a half entries.
  std::string mb = std::to_string(4.5 * double(one) / (1024 * 1024));
  ::setenv("CUVIL_CACHE_MAX_MB", mb.c_str(), 1);
  jit_reset_for_testing(dir.string());
  std::vector<fs::path> first = entries().first;
  for (int i = 1; i <= 10; ++i) check(jit_kernel(kernel(i), Schedule{}), i);
  auto [kept, bytes] = entries();
  EXPECT_GT(jit_stats().evicted_entries, 0);
  EXPECT_LE(bytes, uint64_t(4.5 * double(one)) + one / 8);  // entries differ in size by a few bytes
  EXPECT_GE(kept.size(), 2u);
  EXPECT_FALSE(fs::exists(first[0])) << "the oldest entry stays";
  // The newest kernel is a disk hit in a new process; the oldest, evicted, is compiled again and still right.
  jit_reset_for_testing(dir.string());
  check(jit_kernel(kernel(10), Schedule{}), 10);
  EXPECT_EQ(jit_stats().disk_hits, 1);
  check(jit_kernel(kernel(0), Schedule{}), 0);
  EXPECT_EQ(jit_stats().compiled, 1);
  ::unsetenv("CUVIL_CACHE_MAX_MB");
  fs::remove_all(dir);
  jit_reset_for_testing("");
}

// lower_body runs its stages in order, each showing what it decided; the last is the kernel itself.
TEST(Codegen, LoweringStagesInOrder) {
  auto g = parse_checked(R"(graph @g(%x: f32[2, 3, 4], %s: f32[4]) {
  %t: f32[3, 2, 4] = Transpose(%x) {perm = [1, 0, 2]}
  %y: f32[3, 2, 4] = Softmax(%t) {axis = -1}
  %z: f32[3, 2, 4] = Mul(%y, %s)
  return %z
})");
  PassContext ctx;
  optimize(*g, 1, ctx);
  ASSERT_EQ(g->nodes().size(), 1u);
  ASSERT_EQ(g->nodes()[0]->op(), OpKind::FusedKernel);
  const Graph& body = *AttrReader(*g->nodes()[0]).g("body");
  std::vector<std::string> stages, texts;
  std::string why;
  auto lk = lower_body(body, {{2, 3, 4}, {4}}, &why, [&](const char* stage, const std::string& text) {
    stages.push_back(stage);
    texts.push_back(text);
  });
  ASSERT_TRUE(lk) << why;
  EXPECT_EQ(stages, (std::vector<std::string>{"block", "space", "operands", "views", "merge", "exprs"}));
  EXPECT_NE(texts[0].find("reduce over 1 dims"), std::string::npos) << texts[0];
  EXPECT_NE(texts[3].find("Transpose"), std::string::npos) << texts[3];  // the permuted view
  EXPECT_EQ(texts[5], lk->kernel.str());
  // Without an observer, the same kernel.
  auto plain = lower_body(body, {{2, 3, 4}, {4}}, &why);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->kernel.hash(), lk->kernel.hash());
}

// The passes see the generator only through PassContext::fusion: the registered facts are the generator's, and
// under facts where nothing generates, fuse-elementwise forms no kernel.
TEST(Codegen, PassesAskTheGeneratorThroughTheirContext) {
  PassContext ctx;
  EXPECT_EQ(ctx.fusion, &generator_facts());
  struct NoneGenerate final : FusionFacts {
    bool can_generate(const Node&, std::string* why) const override {
      if (why) *why = "none";
      return false;
    }
    std::optional<ReducedBlock> reduced_block(const Node&) const override { return ReducedBlock{}; }
    std::optional<std::vector<int64_t>> reduced_axes(const Node&) const override { return std::nullopt; }
    bool storable(DType) const override { return true; }
    InputRole input_role(const Node&, size_t) const override { return InputRole::element; }
    OutputRole output_role(const Node&, size_t) const override { return OutputRole::element; }
    int compile_weight(const Node&) const override { return 1; }
    bool gathers(const Node&) const override { return false; }
  } none;
  const char* text = R"(graph @g(%x: f32[4, 6]) {
  %a: f32[4, 6] = Exp(%x)
  %b: f32[4, 6] = Add(%a, %x)
  return %b
})";
  auto fused = parse_checked(text);
  ASSERT_TRUE(create_pass("fuse-elementwise")->run(*fused, ctx));
  auto kept = parse_checked(text);
  ctx.fusion = &none;
  EXPECT_FALSE(create_pass("fuse-elementwise")->run(*kept, ctx));
  EXPECT_EQ(kept->nodes().size(), 2u);
}

// The generator's facts come from the ops' lowering records: roles of inputs and outputs, compile weights.
TEST(Codegen, RecordsGiveRoles) {
  const FusionFacts& f = generator_facts();
  OneOp div = build_op(OpKind::Div, {input(random_tensor(DType::i32, {5}, 1)), input(random_tensor(DType::i32, {5}, 2))});
  EXPECT_EQ(f.input_role(*div.node, 0), InputRole::element);
  EXPECT_EQ(f.input_role(*div.node, 1), InputRole::divisor);
  OneOp fdiv = build_op(OpKind::Div, {input(random_tensor(DType::f32, {5}, 1)), input(random_tensor(DType::f32, {5}, 2))});
  EXPECT_EQ(f.input_role(*fdiv.node, 1), InputRole::element);
  OneOp sum = build_op(OpKind::ReduceSum, {input(random_tensor(DType::f32, {3, 4}, 1)), constant(vec<int64_t>({1}))},
                       {{"keepdims", Attribute(int64_t(0))}});
  EXPECT_EQ(f.input_role(*sum.node, 1), InputRole::axes);
  EXPECT_EQ(f.output_role(*sum.node, 0), OutputRole::row_dropped);
  EXPECT_EQ(f.reduced_block(*sum.node), (ReducedBlock{1, 0}));
  OneOp topk = build_op(OpKind::TopK, {input(random_tensor(DType::f32, {3, 9}, 1)), constant(vec<int64_t>({2}))}, {}, 2);
  EXPECT_EQ(f.output_role(*topk.node, 1), OutputRole::entries);
  EXPECT_EQ(f.compile_weight(*topk.node), 1);
  OneOp tanh = build_op(OpKind::Tanh, {input(random_tensor(DType::f32, {3}, 1))});
  EXPECT_EQ(f.compile_weight(*tanh.node), 8);
  OneOp conv = build_op(OpKind::Relu, {input(random_tensor(DType::f32, {3}, 1))});
  EXPECT_TRUE(f.can_generate(*conv.node));
}

// The lowering refuses what it cannot do, saying why, and never produces a wrong kernel.
TEST(Codegen, RefusalsAreExplained) {
  OneOp one = build_op(OpKind::ReduceSum, {input(random_tensor(DType::f32, {3, 4, 5}, 1)), constant(vec<int64_t>({0, 2}))});
  std::string why;
  EXPECT_FALSE(can_generate(*one.node, &why));
  EXPECT_NE(why.find("one block"), std::string::npos) << why;
  // 0 raised to a negative integer power is an error the reference reports (bases and exponent tensors are
  // checked before the kernel runs; constants here).
  OneOp pn = build_op(OpKind::Pow, {constant(Tensor::scalar<int32_t>(0)), constant(Tensor::scalar<int64_t>(-2))});
  EXPECT_FALSE(can_generate(*pn.node, &why));
  EXPECT_NE(why.find("0 to a negative power"), std::string::npos) << why;
}

}  // namespace
