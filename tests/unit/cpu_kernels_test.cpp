// The hand-written CPU kernels (src/kernels/cpu) against the reference kernels: same node, same inputs (random
// with a fixed seed, odd sizes, special values), each kernel called directly with its own KernelContext so the
// executor's kernel choice plays no part. Exact where the kernel claims bit-exact results; otherwise within a
// stated tolerance, NaN where the reference has NaN and inf where it has inf.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/workers.h"
#include "kernels/ref/ref_kernels.h"
#include "support/half.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Random floats in [lo, hi); with `specials`, every 7th element is a special value (NaN, ±inf, ±0, denormals,
// large magnitudes).
Tensor random_f32(Ints shape, uint32_t seed, float lo = -3, float hi = 3, bool specials = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  static const float kSpecial[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e30f, -1e30f, 88.8f, -104.5f, 1e-30f};
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = specials && i % 7 == 3 ? kSpecial[(i / 7) % std::size(kSpecial)] : d(rng);
  return Tensor::from_vector<float>(v, shape);
}

// A one-node graph with shapes inferred, its inputs (by slot; undefined when absent) and the prepare types.
struct Case {
  OneOp one;
  std::vector<Tensor> ins;
  std::vector<PrepareInput> prep;

  Case(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}, size_t num_outputs = 1)
      : one(build_op(op, args, std::move(attrs), num_outputs)) {
    for (const OpArg& a : args) {
      ins.push_back(a.t);
      PrepareInput p;
      p.present = a.kind != OpArg::Absent;
      if (p.present) {
        p.dtype = a.t.dtype();
        p.shape = a.t.shape();
        if (a.kind == OpArg::Const) p.value = &ins.back();
      }
      prep.push_back(p);
    }
    for (size_t i = 0; i < prep.size(); ++i)  // ins may have moved while growing
      if (prep[i].value) prep[i].value = &ins[i];
  }

  std::unique_ptr<PreparedKernel> prepare() const { return cpu::prepare_cpu_kernel(*one.node, prep); }

  std::vector<Tensor> fresh_outputs() const {
    std::vector<Tensor> outs;
    for (Value* v : one.node->outputs()) outs.push_back(Tensor::zeros(v->type().dtype, v->type().shape.static_dims()));
    return outs;
  }

  std::vector<const Tensor*> in_ptrs(const std::vector<Tensor>& t) const {
    std::vector<const Tensor*> p;
    for (const Tensor& x : t) p.push_back(x.defined() ? &x : nullptr);
    return p;
  }

  Tensor run_ref(size_t output = 0) const {
    std::vector<Tensor> outs = fresh_outputs();
    KernelContext ctx(*one.node, in_ptrs(ins), &outs, nullptr);
    ref_kernel(one.node->op())(ctx);
    return outs[output];
  }

  // Runs the prepared kernel (twice, to check that a kernel can run again); `inplace_input` >= 0 makes output 0
  // share that input's buffer (a copy of it). Returns output `output`.
  Tensor run_fast(PreparedKernel& k, int inplace_input = -1, size_t output = 0) const {
    std::vector<Tensor> in = ins;
    std::vector<Tensor> outs = fresh_outputs();
    if (inplace_input >= 0) {
      Tensor& src = in[size_t(inplace_input)];
      src = src.clone();
      EXPECT_EQ(src.nbytes(), outs[0].nbytes());
      outs[0] = Tensor::view(outs[0].dtype(), outs[0].shape(), src.raw());
    }
    if (inplace_input < 0) {
      KernelContext warm(*one.node, in_ptrs(in), &outs, nullptr);
      k.run(warm);
    }
    KernelContext ctx(*one.node, in_ptrs(in), &outs, nullptr);
    k.run(ctx);
    return outs[output].clone();
  }
};

// got vs want: bit-exact when tol < 0 (NaN matches any NaN); else NaN where want is NaN, equal infinities, and
// |got - want| <= rel * |want| + abs.
struct Tol {
  double rel = -1, abs = 0;
};
constexpr Tol kExact{};

void expect_match(const Tensor& got, const Tensor& want, Tol tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  int failures = 0;
  for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (tol.rel < 0) ok = std::signbit(g) == std::signbit(w) && g == w;
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= tol.rel * std::fabs(w) + tol.abs;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " = " << g << ", reference " << w;
    }
  }
}

// Prepares (asserting a fast kernel exists), runs both and compares; also in place on `inplace_inputs`.
void check(const Case& c, Tol tol, const std::string& what, std::vector<int> inplace_inputs = {}) {
  auto k = c.prepare();
  ASSERT_NE(k, nullptr) << what << ": no fast kernel";
  EXPECT_EQ(k->impl_name().rfind("cpu:", 0), 0u) << k->impl_name();
  Tensor want = c.run_ref();
  expect_match(c.run_fast(*k), want, tol, what + " [" + k->impl_name() + "]");
  for (int i : inplace_inputs) expect_match(c.run_fast(*k, i), want, tol, what + " in place on input " + std::to_string(i));
}

std::string str(const Ints& v) { return shape_str(v); }

const Ints kSizes = {1, 7, 33, 1000, 4099};

// ---- unary

struct UnaryOp {
  OpKind op;
  Tol tol;
  AttrMap attrs;
  float lo = -3, hi = 3;
};

std::vector<UnaryOp> unary_ops() {
  Tol approx{1e-6, 1e-44};  // absolute: results in the denormal range carry few bits
  return {
      {OpKind::Relu, kExact, {}},
      {OpKind::Neg, kExact, {}},
      {OpKind::Abs, kExact, {}},
      {OpKind::Reciprocal, kExact, {}},
      {OpKind::Sqrt, kExact, {}},
      {OpKind::LeakyRelu, kExact, {{"alpha", 0.1}}},
      {OpKind::HardSigmoid, kExact, {{"alpha", 0.3}, {"beta", 0.4}}},
      {OpKind::HardSwish, kExact, {}, -8, 8},
      {OpKind::Exp, approx, {}, -110, 95},
      {OpKind::Exp, approx, {}, -2, 2},
      {OpKind::Tanh, approx, {}, -12, 12},
      {OpKind::Tanh, approx, {}, -1, 1},
      {OpKind::Erf, approx, {}, -5, 5},
      {OpKind::Erf, approx, {}, -1.5, 1.5},
      {OpKind::Sigmoid, approx, {}, -110, 110},
      {OpKind::Sigmoid, approx, {}, -4, 4},
      // Gelu's 1 + erf(x) cancels for negative x: the reference itself is good to about 1e-7 absolute there.
      {OpKind::Gelu, {1e-6, 1e-6}, {}, -8, 8},
      {OpKind::Gelu, {1e-6, 1e-6}, {{"approximate", "tanh"}}, -8, 8},
  };
}

TEST(CpuKernels, UnaryMatchesReference) {
  uint32_t seed = 1;
  for (const UnaryOp& u : unary_ops()) {
    for (int64_t n : kSizes) {
      for (bool specials : {false, true}) {
        Tensor x = random_f32({n}, seed++, u.lo, u.hi, specials);
        Case c(u.op, {input(x)}, u.attrs);
        check(c, u.tol, std::string(op_name(u.op)) + " n=" + std::to_string(n) + (specials ? " specials" : ""), {0});
      }
    }
  }
}

TEST(CpuKernels, UnarySpecialValuesExact) {
  // These must be exactly what std:: gives (the approximations' contract at the edges).
  std::vector<float> v = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, 200.0f, -200.0f, 88.8f, -104.5f};
  for (OpKind op : {OpKind::Exp, OpKind::Tanh, OpKind::Erf, OpKind::Sigmoid}) {
    Case c(op, {input(vec(v))});
    check(c, {1e-6, 1e-44}, std::string(op_name(op)) + " specials");
    Tensor got = c.run_fast(*c.prepare());
    Tensor want = c.run_ref();
    for (size_t i = 0; i < v.size(); ++i) {
      float g = got.data<float>()[i], w = want.data<float>()[i];
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << op_name(op) << "(" << v[i] << ")";
      } else if (std::isinf(w) || w == 0 || std::fabs(w) == 1) {
        EXPECT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(w))
            << op_name(op) << "(" << v[i] << ") = " << g << " vs " << w;
      }
    }
  }
}

// The approximations over every 61st float bit pattern: the accuracy bounds stated in vec_math.h.
TEST(CpuKernels, ApproximationAccuracySweep) {
  struct Bound { OpKind op; double rel; };
  for (Bound b : {Bound{OpKind::Exp, 2.5e-7}, Bound{OpKind::Tanh, 3.6e-7}, Bound{OpKind::Erf, 3.6e-7}, Bound{OpKind::Sigmoid, 4e-7}}) {
    std::vector<float> v;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 61 * 1031) v.push_back(std::bit_cast<float>(uint32_t(u)));
    Case c(b.op, {input(vec(v))});
    auto k = c.prepare();
    ASSERT_NE(k, nullptr);
    Tensor got = c.run_fast(*k), want = c.run_ref();
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      float g = got.data<float>()[i], w = want.data<float>()[i];
      if (std::isnan(w) || std::isnan(g)) {
        EXPECT_EQ(std::isnan(w), std::isnan(g)) << op_name(b.op) << "(" << v[i] << ")";
        continue;
      }
      if (std::fabs(w) < std::numeric_limits<float>::min()) {  // denormal results: absolute
        EXPECT_LE(std::fabs(double(g) - w), 3e-45) << op_name(b.op) << "(" << v[i] << ")";
        continue;
      }
      worst = std::max(worst, std::fabs(double(g) - w) / std::fabs(double(w)));
    }
    EXPECT_LE(worst, b.rel) << op_name(b.op);
    std::printf("  %s: max relative error %.3g over %zu values\n", std::string(op_name(b.op)).c_str(), worst, v.size());
  }
}

TEST(CpuKernels, ClipBounds) {
  Tensor x = random_f32({1000}, 7, -3, 3, true);
  auto f = [](float v) { return Tensor::from_vector<float>({v}, {}); };
  check(Case(OpKind::Clip, {input(x), constant(f(-1)), constant(f(0.5))}), kExact, "Clip const", {0});
  check(Case(OpKind::Clip, {input(x), input(f(-1)), input(f(0.5))}), kExact, "Clip runtime bounds", {0});
  check(Case(OpKind::Clip, {input(x), absent(), constant(f(0.5))}), kExact, "Clip max only");
  check(Case(OpKind::Clip, {input(x), constant(f(-0.5))}), kExact, "Clip min only");
  check(Case(OpKind::Clip, {input(x)}), kExact, "Clip no bounds");
  check(Case(OpKind::Clip, {input(x), constant(f(1)), constant(f(-1))}), kExact, "Clip min > max");
  check(Case(OpKind::Clip, {input(x), constant(f(kNaN)), constant(f(2))}), kExact, "Clip NaN bound");
}

TEST(CpuKernels, UnaryLargeThreaded) {
  Tensor x = random_f32({1 << 20}, 11, -6, 6, true);
  for (OpKind op : {OpKind::Relu, OpKind::Exp, OpKind::Gelu, OpKind::Tanh})
    check(Case(op, {input(x)}), op == OpKind::Relu ? kExact : Tol{1e-6, 1e-6}, std::string(op_name(op)) + " 1M", {0});
}

// ---- binary

// A multi-threaded loop notes when it ended; workers count as spinning for kSpinWindowNs after that, not later.
TEST(CpuKernels, WorkersSpinningOnlyRightAfterAParallelRegion) {
  int64_t before = cpu::detail::last_region_end_ns.load();
  std::vector<float> x(1 << 20, 1.f);
  cpu::parallel_ranges(int64_t(x.size()), 1, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[size_t(i)] *= 2.f;
  });
  int64_t end = cpu::detail::last_region_end_ns.load();
  if (omp_get_max_threads() > 1) EXPECT_GT(end, before);
  EXPECT_TRUE(cpu::workers_spinning(end + 1000));
  EXPECT_FALSE(cpu::workers_spinning(end + cpu::kSpinWindowNs));
  // one thread's loop (below the work threshold) leaves the mark alone
  cpu::parallel_ranges(8, 1, 1, [&](int64_t b, int64_t e) { x[size_t(b)] += float(e); });
  EXPECT_EQ(cpu::detail::last_region_end_ns.load(), end);
}

TEST(CpuKernels, BinaryBroadcastPatterns) {
  std::vector<std::pair<Ints, Ints>> shapes = {
      {{7}, {7}},
      {{4099}, {4099}},
      {{33}, {}},                   // scalar
      {{}, {1000}},
      {{1}, {1}},
      {{3, 5}, {1}},
      {{2, 3, 768}, {768}},         // row broadcast
      {{2, 3, 33}, {1, 1, 33}},
      {{2, 4, 5, 5}, {2, 1, 1, 5}},  // attention mask
      {{3, 1}, {1, 4}},             // outer product
      {{4, 1}, {4, 7}},             // column broadcast
      {{2, 6, 5, 3}, {1, 6, 1, 1}},  // per channel
      {{5}, {3, 1, 5}},
      {{2, 1, 3, 1, 5}, {1, 4, 1, 6, 1}},
      {{1, 1, 7}, {7, 1}},
  };
  uint32_t seed = 100;
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
    for (auto& [sa, sb] : shapes) {
      for (bool specials : {false, true}) {
        Tensor a = random_f32(sa, seed++, -3, 3, specials), b = random_f32(sb, seed++, -3, 3, specials);
        Case c(op, {input(a), input(b)});
        std::vector<int> inplace;
        Ints out = c.one.node->output(0)->type().shape.static_dims();
        if (shape_numel(sa) == shape_numel(out)) inplace.push_back(0);
        if (shape_numel(sb) == shape_numel(out)) inplace.push_back(1);
        check(c, kExact, std::string(op_name(op)) + " " + str(sa) + " " + str(sb) + (specials ? " specials" : ""), inplace);
      }
    }
  }
}

TEST(CpuKernels, BinaryLargeThreaded) {
  Tensor a = random_f32({4, 256, 1024}, 5), b = random_f32({1024}, 6), m = random_f32({4, 1, 1024}, 7);
  check(Case(OpKind::Add, {input(a), input(b)}), kExact, "Add 1M row", {0});
  check(Case(OpKind::Mul, {input(a), input(m)}), kExact, "Mul 1M mid broadcast", {0});
  check(Case(OpKind::Div, {input(a), input(a)}), kExact, "Div 1M same", {0, 1});
}

TEST(CpuKernels, PowConstantExponent) {
  Tensor x = random_f32({4099}, 9, -3, 3, true);
  std::vector<float> edge = {-0.0f, 0.0f, -kInf, kInf, kNaN, -1.0f, 1e-40f, 1e20f, 1e-30f};
  for (Tensor t : {x, vec(edge)}) {
    check(Case(OpKind::Pow, {input(t), constant(Tensor::scalar<float>(2))}), kExact, "Pow 2", {0});
    check(Case(OpKind::Pow, {input(t), constant(Tensor::scalar<float>(0.5))}), kExact, "Pow 0.5", {0});
    check(Case(OpKind::Pow, {input(t), constant(vec<double>({2.0}))}), kExact, "Pow f64 exponent 2");
    check(Case(OpKind::Pow, {input(t), constant(vec<int64_t>({2}))}), kExact, "Pow i64 exponent 2");
  }
}

// ---- softmax

TEST(CpuKernels, SoftmaxAllAxes) {
  std::vector<Ints> shapes = {{1}, {7}, {4099}, {3, 33}, {2, 5, 1000}, {3, 1, 7, 5}, {2, 300, 3}, {1, 600, 1}};
  uint32_t seed = 200;
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    for (const Ints& s : shapes) {
      int64_t r = int64_t(s.size());
      for (int64_t axis = -r; axis < r; ++axis) {
        for (float scale : {1.0f, 30.0f}) {
          Tensor x = random_f32(s, seed++, -scale, scale);
          check(Case(op, {input(x)}, {{"axis", axis}}), {1e-5, 1e-7},
                std::string(op_name(op)) + " " + str(s) + " axis " + std::to_string(axis));
        }
      }
    }
  }
}

TEST(CpuKernels, SoftmaxSpecialRows) {
  // Rows: ordinary; one NaN; one +inf; all -inf; huge magnitudes; one -inf among finite values.
  std::vector<float> v = {1, 2, 3, 4,  1, kNaN, 3, 4,  1, kInf, 3, 4,  -kInf, -kInf, -kInf, -kInf,
                          1e30f, -1e30f, 1e30f, 3,  -kInf, 0, 1, 2};
  Tensor x = Tensor::from_vector<float>(v, {6, 4});
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    check(Case(op, {input(x)}, {{"axis", int64_t(-1)}}), {1e-5, 1e-7}, std::string(op_name(op)) + " special rows");
    check(Case(op, {input(x)}, {{"axis", int64_t(0)}}), {1e-5, 1e-7}, std::string(op_name(op)) + " special columns");
  }
}

TEST(CpuKernels, SoftmaxLargeThreaded) {
  check(Case(OpKind::Softmax, {input(random_f32({1024, 1024}, 31, -10, 10))}), {1e-5, 1e-7}, "Softmax 1M rows");
  check(Case(OpKind::Softmax, {input(random_f32({4, 256, 1024}, 32, -10, 10))}, {{"axis", int64_t(1)}}), {1e-5, 1e-7},
        "Softmax 1M columns");
}

// ---- layer normalization

TEST(CpuKernels, LayerNormalization) {
  struct LnCase { Ints x; int64_t axis; Ints scale; Ints bias; };  // bias {} with rank 0 marker below
  std::vector<LnCase> cases = {
      {{1}, -1, {1}, {1}},
      {{7}, 0, {7}, {7}},
      {{2, 3, 768}, -1, {768}, {768}},
      {{3, 33}, 1, {33}, {1, 33}},
      {{2, 5, 1000}, -1, {1000}, {}},
      {{2, 3, 4, 5}, 1, {3, 4, 5}, {3, 4, 5}},
      {{2, 3, 4, 5}, -2, {1, 5}, {4, 1}},  // broadcast within the normalized dims
      {{4099}, 0, {4099}, {4099}},
      {{2, 1, 7}, 0, {1, 1, 7}, {1, 1, 1}},
  };
  uint32_t seed = 300;
  for (const LnCase& lc : cases) {
    for (bool const_params : {true, false}) {
      for (float offset : {0.0f, 10.0f}) {
        Tensor x = random_f32(lc.x, seed++, offset - 2, offset + 2);
        Tensor sc = random_f32(lc.scale, seed++, -2, 2);
        auto arg = [&](Tensor t) { return const_params ? constant(t) : input(t); };
        std::vector<OpArg> args = {input(x), arg(sc)};
        if (!lc.bias.empty()) args.push_back(arg(random_f32(lc.bias, seed++, -2, 2)));
        Case c(OpKind::LayerNormalization, args, {{"axis", lc.axis}, {"epsilon", 1e-5}});
        check(c, {1e-5, 1e-5},
              "LayerNorm " + str(lc.x) + " axis " + std::to_string(lc.axis) + (const_params ? " const" : " runtime") +
                  " offset " + std::to_string(offset));
      }
    }
  }
  // Special values: a NaN or inf spoils its own row only.
  Tensor x = Tensor::from_vector<float>({1, kNaN, 3, 4, 1, kInf, 3, 4, 0, 0, 0, 0, 1e-40f, 0, 0, 0}, {4, 4});
  check(Case(OpKind::LayerNormalization, {input(x), constant(random_f32({4}, 1)), constant(random_f32({4}, 2))}),
        {1e-5, 1e-5}, "LayerNorm specials");
  check(Case(OpKind::LayerNormalization, {input(random_f32({1024, 1024}, 3)), constant(random_f32({1024}, 4)),
                                          constant(random_f32({1024}, 5))}),
        {1e-5, 1e-5}, "LayerNorm 1M");
}

TEST(CpuKernels, LayerNormalizationFallsBack) {
  Tensor x = random_f32({3, 8}, 1);
  // Mean/InvStdDev requested.
  EXPECT_EQ(Case(OpKind::LayerNormalization, {input(x), constant(random_f32({8}, 2))}, {}, 3).prepare(), nullptr);
  // Scale varying across rows.
  EXPECT_EQ(Case(OpKind::LayerNormalization, {input(x), constant(random_f32({3, 8}, 2))}).prepare(), nullptr);
}

// ---- transpose

// Every permutation of a rank-r shape, in several dtypes.
void check_all_perms(const Ints& shape, DType dtype, uint32_t seed) {
  Tensor xf = random_f32(shape, seed, -1000, 1000);
  Tensor x = Tensor::zeros(dtype, shape);
  std::mt19937 rng(seed);
  // Fill with arbitrary bytes: transpose moves bits, whatever the dtype (no NaN canonicalization expected).
  auto* bytes = static_cast<uint8_t*>(x.raw());
  for (size_t i = 0; i < x.nbytes(); ++i) bytes[i] = uint8_t(rng());
  if (dtype == DType::f32) x = xf;
  if (dtype == DType::boolean)
    for (size_t i = 0; i < x.nbytes(); ++i) bytes[i] &= 1;
  Ints perm(shape.size());
  std::iota(perm.begin(), perm.end(), int64_t(0));
  do {
    Case c(OpKind::Transpose, {input(x)}, {{"perm", perm}});
    auto k = c.prepare();
    ASSERT_NE(k, nullptr) << str(shape) << " perm " << str(perm);
    Tensor want = c.run_ref(), got = c.run_fast(*k);
    EXPECT_TRUE(got.same_bytes(want)) << dtype_name(dtype) << " " << str(shape) << " perm " << str(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(CpuKernels, TransposeAllPerms) {
  check_all_perms({33, 47}, DType::f32, 1);
  check_all_perms({1, 7}, DType::f32, 2);
  check_all_perms({3, 35, 41}, DType::f32, 3);
  check_all_perms({2, 3, 1, 5}, DType::i64, 4);
  check_all_perms({2, 17, 33, 3}, DType::u8, 5);
  check_all_perms({3, 4, 5, 6}, DType::f16, 6);
  check_all_perms({2, 1, 3, 1, 2, 3}, DType::boolean, 7);
  check_all_perms({2, 3, 2, 3, 2}, DType::f32, 8);
  // 4-byte words go through 16 x 16 register blocks where the tile holds them: whole blocks, blocks with ragged
  // edges on either side, tiles narrower than a block; arbitrary bit patterns (NaN payloads included) move intact.
  check_all_perms({37, 50}, DType::i32, 9);
  check_all_perms({16, 16}, DType::i32, 10);
  check_all_perms({3, 33, 20}, DType::i32, 11);
  check_all_perms({2, 48, 7, 17}, DType::i32, 12);
  // Fewer than 16 output columns with dense output rows: 16 input rows at a time interleaved by gathers.
  check_all_perms({3, 53, 2}, DType::f32, 13);
  check_all_perms({15, 33}, DType::i32, 14);
}

TEST(CpuKernels, TransposeCommonLayouts) {
  struct T { Ints shape; Ints perm; };
  for (const T& t : std::vector<T>{{{2, 64, 56, 56}, {0, 2, 3, 1}},   // NCHW -> NHWC
                                   {{2, 56, 56, 64}, {0, 3, 1, 2}},   // NHWC -> NCHW
                                   {{2, 128, 12, 64}, {0, 2, 1, 3}},  // attention head split
                                   {{2, 12, 128, 64}, {0, 1, 3, 2}},  // K^T
                                   {{1000, 1001}, {1, 0}},
                                   {{2, 3, 4, 5, 6, 7}, {5, 3, 1, 4, 0, 2}},
                                   {{1, 3, 224, 224}, {0, 2, 3, 1}},   // an RGB image to NHWC
                                   {{2, 1, 37, 41}, {0, 2, 3, 1}}}) {  // one channel: a copy
    Case c(OpKind::Transpose, {input(random_f32(t.shape, 9))}, {{"perm", t.perm}});
    check(c, kExact, "Transpose " + str(t.shape) + " " + str(t.perm));
  }
  // Outputs of 16 MB and more stream their whole 16 x 16 blocks (rows 64-byte aligned) and store the rest plainly:
  // 64 channels (aligned rows), 65 (no row aligned), and back.
  for (const T& t : std::vector<T>{{{1, 64, 256, 257}, {0, 2, 3, 1}},
                                   {{1, 65, 256, 253}, {0, 2, 3, 1}},
                                   {{1, 256, 257, 64}, {0, 3, 1, 2}}}) {
    Case c(OpKind::Transpose, {input(random_f32(t.shape, 11))}, {{"perm", t.perm}});
    check(c, kExact, "Transpose (streamed) " + str(t.shape) + " " + str(t.perm));
  }
  check(Case(OpKind::Transpose, {input(random_f32({3, 4, 5}, 10))}), kExact, "Transpose default perm");
  check(Case(OpKind::Transpose, {input(random_f32({3, 4, 5}, 10))}, {{"perm", Ints{-1, 0, 1}}}), kExact,
        "Transpose negative perm");
  check(Case(OpKind::Transpose, {input(random_f32({}, 10))}, {{"perm", Ints{}}}), kExact, "Transpose scalar");
}

// ---- slice

TEST(CpuKernels, SliceConstantParameters) {
  struct S { Ints shape, starts, ends, axes, steps; };
  for (const S& t : std::vector<S>{
           {{128, 2304}, {768}, {1536}, {1}, {1}},            // BERT's packed QKV split
           {{2, 7, 33}, {1, -5}, {100, 30}, {1, 2}, {2, 3}},  // steps, clamping, negative start
           {{5, 6, 7}, {-1}, {-100}, {0}, {-2}},              // backwards with a stride
           {{4, 9}, {8}, {0}, {1}, {-1}},                     // reversed innermost dim
           {{3, 4, 5}, {0, 0, 0}, {3, 4, 5}, {0, 1, 2}, {1, 1, 1}},  // everything
           {{300, 512}, {1}, {300}, {0}, {1}}}) {              // large: threaded rows
    std::vector<OpArg> args{input(random_f32(t.shape, 12)), constant(vec<int64_t>(t.starts)),
                            constant(vec<int64_t>(t.ends)), constant(vec<int64_t>(t.axes)),
                            constant(vec<int64_t>(t.steps))};
    check(Case(OpKind::Slice, args), kExact, "Slice " + str(t.shape) + " starts " + str(t.starts));
  }
  // Other dtypes move as raw words.
  check(Case(OpKind::Slice, {input(Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3})),
                             constant(vec<int64_t>({1})), constant(vec<int64_t>({3})), constant(vec<int64_t>({1}))}),
        kExact, "Slice i64");
  // Starts only known at run time: no fast kernel.
  EXPECT_EQ(Case(OpKind::Slice, {input(random_f32({4, 4}, 1)), input(vec<int64_t>({1})), constant(vec<int64_t>({3}))})
                .prepare(),
            nullptr);
}

// ---- reductions

TEST(CpuKernels, ReduceSumMean) {
  struct R { Ints shape; Ints axes; };
  std::vector<R> cases = {{{7}, {0}},           {{3, 33}, {-1}},          {{2, 5, 1000}, {2}},
                          {{2, 5, 1000}, {1}},  {{2, 5, 1000}, {0}},      {{2, 3, 4, 5}, {2, 3}},
                          {{2, 3, 4, 5}, {1, 2}}, {{4099}, {0}},          {{2, 3, 700}, {0, 1}},
                          {{1024, 1024}, {1}},  {{1024, 1024}, {0}}};
  uint32_t seed = 400;
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean}) {
    for (const R& r : cases) {
      for (int64_t keep : {0, 1}) {
        Case c(op, {input(random_f32(r.shape, seed++, -1, 3)), constant(vec<int64_t>(r.axes))}, {{"keepdims", keep}});
        check(c, {1e-6, 1e-6}, std::string(op_name(op)) + " " + str(r.shape) + " axes " + str(r.axes));
      }
    }
  }
  Tensor x = random_f32({2, 3, 4}, 1);
  EXPECT_EQ(Case(OpKind::ReduceSum, {input(x), constant(vec<int64_t>({0, 2}))}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::ReduceSum, {input(x), input(vec<int64_t>({2}))}).prepare(), nullptr);
}

// ---- selection

// TopK (the K that generated kernels do not hold in registers, and any other): the reference's values and
// positions exactly, over rows and columns, K from 1 to the whole axis, largest and smallest, with many ties
// (equal values keep position order) and NaN (first among the largest, last among the smallest), every dtype
// family; slices enough to split between the threads.
TEST(CpuKernels, TopKMatchesReference) {
  struct T {
    Ints shape;
    int64_t axis;
    std::vector<int64_t> ks;
  };
  uint32_t seed = 500;
  for (const T& t : std::vector<T>{{{3, 1000}, -1, {1, 17, 64, 1000}},
                                   {{1, 50000}, 1, {100, 256}},
                                   {{4, 300, 9}, 1, {5, 40, 300}},
                                   {{40, 7}, 0, {33, 40}},
                                   {{256, 1000}, 1, {50}},
                                   {{8, 1000, 64}, 1, {32}}}) {
    for (int64_t k : t.ks)
      for (int64_t largest : {1, 0})
        for (DType dt : {DType::f32, DType::i32, DType::f16, DType::u64, DType::f64}) {
          // Values on a coarse grid (ties), NaN and infinities among the floats.
          Tensor x = random_f32(t.shape, seed++, -3, 3, true);
          Tensor xt = Tensor::zeros(dt, t.shape);
          for (int64_t i = 0; i < x.numel(); ++i) {
            float v = x.data<float>()[i];
            float grid = std::isfinite(v) ? std::round(v * 4) / 4 : v;
            visit_dtype(dt, [&]<class E>() {
              if constexpr (std::is_integral_v<E>) {
                // (NaN and magnitudes no integer holds: 7)
                if constexpr (!std::is_same_v<E, bool>) xt.data<E>()[i] = E(std::fabs(v) < 1e6f ? int64_t(grid * 4) : 7);
              } else {
                xt.data<E>()[i] = E(grid);
              }
            });
          }
          std::string what = "TopK " + std::string(dtype_name(dt)) + " " + str(t.shape) + " axis " +
                             std::to_string(t.axis) + " K " + std::to_string(k) + (largest ? " largest" : " smallest");
          Case c(OpKind::TopK, {input(xt), constant(vec<int64_t>({k}))}, {{"axis", t.axis}, {"largest", largest}}, 2);
          auto kern = c.prepare();
          ASSERT_NE(kern, nullptr) << what;
          EXPECT_EQ(kern->impl_name(), "cpu:topk:heap");
          for (size_t o : {size_t(0), size_t(1)})
            expect_match(c.run_fast(*kern, -1, o), c.run_ref(o), kExact, what + " output " + std::to_string(o));
        }
  }
  // K only known at run time: no fast kernel.
  EXPECT_EQ(Case(OpKind::TopK, {input(random_f32({4, 9}, 1)), input(vec<int64_t>({3}))}, {}, 2).prepare(), nullptr);
}

// ---- what stays on the reference kernels

TEST(CpuKernels, NoFastKernel) {
  Tensor xd = Tensor::from_vector<double>({1, 2, 3}, {3});
  EXPECT_EQ(Case(OpKind::Relu, {input(xd)}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::Add, {input(xd), input(xd)}).prepare(), nullptr);
  Tensor xi = vec<int64_t>({1, 2, 3});
  EXPECT_EQ(Case(OpKind::Add, {input(xi), input(xi)}).prepare(), nullptr);
  Tensor x = random_f32({3}, 1);
  EXPECT_EQ(Case(OpKind::Pow, {input(x), constant(Tensor::scalar<float>(3))}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::Pow, {input(x), input(Tensor::scalar<float>(2))}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::Log, {input(x)}).prepare(), nullptr);
}

}  // namespace
