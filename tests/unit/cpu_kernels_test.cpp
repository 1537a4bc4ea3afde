// The hand-written CPU kernels (src/kernels/cpu): what the op-test harness (tests/ops) does not cover -- the
// approximations' exact values at the edges and their error over a sweep of bit patterns, the workers' spin
// window, and which nodes get no fast kernel. Each op's results against the reference kernels (odd sizes, special
// values, broadcasting, in place, every permutation of transposes, TopK with ties) are harness cases, run with
// the CPU kernels forced on their own.
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

// ---- unary

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

// ---- threads

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

// The executor's thread count under load: the running tasks come from /proc/loadavg's fourth field, and the
// threads are the cores other tasks leave free, never fewer than one, never more than asked.
TEST(CpuKernels, ThreadsFollowTheMachinesLoad) {
  EXPECT_EQ(cpu::parse_runnable_tasks("0.52 0.58 0.59 3/512 12345\n"), 3);
  EXPECT_EQ(cpu::parse_runnable_tasks("10.82 9.72 6.82 14/573 18154"), 14);
  EXPECT_EQ(cpu::parse_runnable_tasks("0.52 0.58 0.59"), -1);
  EXPECT_EQ(cpu::parse_runnable_tasks("0.52 0.58 0.59 x/512 1"), -1);
  EXPECT_EQ(cpu::parse_runnable_tasks("0.52 0.58 0.59 3 1"), -1);
  EXPECT_EQ(cpu::parse_runnable_tasks(""), -1);
  // want, cores, runnable (ours included), own
  EXPECT_EQ(cpu::threads_given_load(2, 2, 1, 1), 2);   // idle: only the caller runs
  EXPECT_EQ(cpu::threads_given_load(2, 2, 2, 2), 2);   // our spinning worker is ours
  EXPECT_EQ(cpu::threads_given_load(2, 2, 2, 1), 1);   // another task holds a core
  EXPECT_EQ(cpu::threads_given_load(2, 2, 14, 2), 1);  // never below one
  EXPECT_EQ(cpu::threads_given_load(8, 16, 10, 1), 7); // the free cores of a larger machine
  EXPECT_EQ(cpu::threads_given_load(4, 16, 3, 1), 4);  // never above the count asked for
  EXPECT_EQ(cpu::threads_given_load(2, 2, -1, 1), 2);  // load unknown: as asked
  EXPECT_EQ(cpu::threads_given_load(1, 2, 9, 1), 1);
  int t = cpu::threads_free(2);
  EXPECT_GE(t, 1);
  EXPECT_LE(t, 2);
  EXPECT_EQ(cpu::threads_free(1), 1);
}

// ---- layer normalization

TEST(CpuKernels, LayerNormalizationFallsBack) {
  Tensor x = random_f32({3, 8}, 1);
  // Mean/InvStdDev requested.
  EXPECT_EQ(Case(OpKind::LayerNormalization, {input(x), constant(random_f32({8}, 2))}, {}, 3).prepare(), nullptr);
  // Scale varying across rows.
  EXPECT_EQ(Case(OpKind::LayerNormalization, {input(x), constant(random_f32({3, 8}, 2))}).prepare(), nullptr);
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
  // Parameters only known at run time, reductions over axes that are not contiguous.
  EXPECT_EQ(Case(OpKind::Slice, {input(random_f32({4, 4}, 1)), input(vec<int64_t>({1})), constant(vec<int64_t>({3}))})
                .prepare(),
            nullptr);
  Tensor x3 = random_f32({2, 3, 4}, 1);
  EXPECT_EQ(Case(OpKind::ReduceSum, {input(x3), constant(vec<int64_t>({0, 2}))}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::ReduceSum, {input(x3), input(vec<int64_t>({2}))}).prepare(), nullptr);
  EXPECT_EQ(Case(OpKind::TopK, {input(random_f32({4, 9}, 1)), input(vec<int64_t>({3}))}, {}, 2).prepare(), nullptr);
}

}  // namespace
