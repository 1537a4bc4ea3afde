// Attention in bf16 (KernelOptions::precision = bf16; kernels/onednn/attention.cpp) against a reference computed
// here in the kernel's own precision: q, k and v rounded to bf16, scores, max, exp and sum in double, the
// probabilities exp(s - max) rounded to bf16 before the second product, y = sum P v / sum e. What is left between
// the two is f32 arithmetic, and a probability rounding to the neighbouring bf16 where the kernel's f32 exp lands
// on the other side of a rounding boundary: per element |dy| <= (2^-8 + 3 eps + 2 (Sk + 16) 2^-24) sum e |v| /
// sum e, with 2^-8 two bf16 unit roundoffs (2^-9 each) and eps the f32 scores' and exp's relative error. The case
// also shows it is that precision that ran: the kernel is 10x closer (RMS) to this reference than to the
// unrounded one. Odd sizes, masks (float, bool, causal, broadcast), several heads and batches, permuted operands,
// row blocks with a partial last one. A CPU without AVX512-BF16 keeps f32 and says why.
#include <gtest/gtest.h>

#include <cstring>

#include <dnnl.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "runtime/executor.h"
#include "support/half.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

bool machine_has_bf16() {
  auto isa = unsigned(dnnl::get_effective_cpu_isa()), bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16 && __builtin_cpu_supports("avx512bf16");
}

double bf(float x) { return double(float(bf16_t(x))); }

Tensor random_tensor(const Ints& shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Ints strides_of(const Ints& shape) {
  Ints s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Logical dim i stored as dim perm[i] (perm empty: identity).
Ints stored_shape(const Ints& logical, const Ints& perm) {
  if (perm.empty()) return logical;
  Ints s(logical.size());
  for (size_t i = 0; i < perm.size(); ++i) s[size_t(perm[i])] = logical[i];
  return s;
}
Ints logical_strides(const Ints& logical, const Ints& perm) {
  Ints st = strides_of(stored_shape(logical, perm)), l(logical.size());
  for (size_t i = 0; i < logical.size(); ++i) l[i] = st[perm.empty() ? i : size_t(perm[i])];
  return l;
}
// y's logical strides when the stored output is Transpose(y, perm): stored dim j is logical dim perm[j].
Ints output_strides(const Ints& logical, const Ints& perm) {
  if (perm.empty()) return strides_of(logical);
  Ints y_shape(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) y_shape[j] = logical[size_t(perm[j])];
  Ints st = strides_of(y_shape), l(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) l[size_t(perm[j])] = st[j];
  return l;
}

struct Case {
  std::string what;
  Ints batch;
  int64_t sq, sk, d, dv;
  Ints perm_q, perm_k, perm_v, perm_y;  // all of rank batch + 2, or empty
  std::optional<Ints> mask;             // the mask's shape
  bool bool_mask = false, causal = false;
  double fill = -INFINITY;              // a bool mask's fill
};

void check(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.what);
  auto logical = [&](int64_t a, int64_t b) {
    Ints s = c.batch;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  Tensor q = random_tensor(stored_shape(logical(c.sq, c.d), c.perm_q), seed, 2.f);
  Tensor k = random_tensor(stored_shape(logical(c.sk, c.d), c.perm_k), seed + 1, 2.f);
  Tensor v = random_tensor(stored_shape(logical(c.sk, c.dv), c.perm_v), seed + 2, 1.f);
  std::vector<OpArg> args{input(q), input(k), input(v)};
  Tensor mask;
  if (c.mask) {
    int64_t cols = c.mask->back(), rows = (*c.mask)[c.mask->size() - 2];
    if (c.bool_mask) {
      mask = Tensor::zeros(DType::boolean, *c.mask);
      std::mt19937 rng(seed + 3);
      for (int64_t i = 0; i < mask.numel(); ++i)
        mask.data<bool>()[i] = i % cols == 0 || (c.causal ? i % cols <= (i / cols) % rows : rng() % 3 != 0);
    } else {
      mask = random_tensor(*c.mask, seed + 3, 3.f);
      for (int64_t i = 0; i < mask.numel(); ++i)
        if (c.causal ? i % cols > (i / cols) % rows : i % 3 == 1) mask.data<float>()[i] = -1e4f;
    }
    args.push_back(input(mask));
  }
  AttrMap attrs{{"scale", Attribute(0.125)}};
  if (c.bool_mask) attrs.emplace("mask_fill", Attribute(c.fill));
  for (auto [name, p] : {std::pair{"perm_q", &c.perm_q}, {"perm_k", &c.perm_k}, {"perm_v", &c.perm_v},
                         {"perm_y", &c.perm_y}})
    if (!p->empty()) attrs.emplace(name, Attribute(*p));
  OneOp one = build_op(OpKind::Attention, args, attrs);
  ExecutorOptions o;
  o.kernels.precision = Precision::bf16;
  Executor fast(one.g, o);
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  const PrecisionDecision& dec = prof[0].precision;
  Tensor got = fast.run(one.feeds)[0];
  if (dec.precision == Precision::fp32) {
    EXPECT_FALSE(machine_has_bf16()) << "kept f32 on a bf16 machine: " << dec.reason;
    EXPECT_FALSE(dec.reason.empty()) << "f32 kept without a reason";
    expect_fast_matches_reference(one, "onednn:attention:", 2e-5, 1e-5);
    return;
  }
  ASSERT_TRUE(machine_has_bf16());
  EXPECT_NE(prof[0].impl.find("bf16"), std::string::npos) << prof[0].impl;  // a bf16 ISA ran the products
  EXPECT_TRUE(dec.reason.empty()) << dec.reason;

  Ints lq = logical_strides(logical(c.sq, c.d), c.perm_q), lk = logical_strides(logical(c.sk, c.d), c.perm_k),
       lv = logical_strides(logical(c.sk, c.dv), c.perm_v), ly = output_strides(logical(c.sq, c.dv), c.perm_y);
  Ints scores = logical(c.sq, c.sk), ms(scores.size(), 0);
  if (c.mask) {  // broadcast strides, right-aligned
    Ints mst = strides_of(*c.mask);
    for (size_t i = 0; i < c.mask->size(); ++i) {
      size_t to = scores.size() - c.mask->size() + i;
      ms[to] = (*c.mask)[i] == 1 ? 0 : mst[i];
    }
  }
  size_t r = scores.size();
  int64_t heads = 1;
  for (int64_t b : c.batch) heads *= b;
  const double u32 = 0x1p-24, scale = 0.125;
  double sq_rounded = 0, sq_unrounded = 0;
  int64_t checked = 0;
  std::vector<double> s(size_t(c.sk)), s32(size_t(c.sk)), e(size_t(c.sk));
  for (int64_t h = 0; h < heads; ++h) {
    int64_t oq = 0, ok = 0, ov = 0, oy = 0, om = 0;
    for (int64_t rest = h, dim = int64_t(c.batch.size()) - 1; dim >= 0; --dim) {
      int64_t i = rest % c.batch[size_t(dim)];
      rest /= c.batch[size_t(dim)];
      oq += i * lq[size_t(dim)], ok += i * lk[size_t(dim)], ov += i * lv[size_t(dim)], oy += i * ly[size_t(dim)];
      om += i * ms[size_t(dim)];
    }
    for (int64_t i = 0; i < c.sq; ++i) {
      double smax = -INFINITY, s32max = -INFINITY, qk_mag = 0, mask_mag = 0;
      for (int64_t j = 0; j < c.sk; ++j) {
        double acc = 0, acc32 = 0, mag = 0;
        for (int64_t t = 0; t < c.d; ++t) {
          float a = q.data<float>()[oq + i * lq[r - 2] + t * lq[r - 1]];
          float b = k.data<float>()[ok + j * lk[r - 2] + t * lk[r - 1]];
          acc += bf(a) * bf(b), acc32 += double(a) * b, mag += std::fabs(bf(a) * bf(b));
        }
        acc *= scale, acc32 *= scale, qk_mag = std::max(qk_mag, mag * scale);
        int64_t mo = om + i * ms[r - 2] + j * ms[r - 1];
        if (c.mask && c.bool_mask) {
          if (!mask.data<bool>()[mo]) acc = acc32 = c.fill;
        } else if (c.mask) {
          double m = mask.data<float>()[mo];
          acc += m, acc32 += m, mask_mag = std::max(mask_mag, std::fabs(m));
        }
        s[size_t(j)] = acc, s32[size_t(j)] = acc32;
        smax = std::max(smax, acc), s32max = std::max(s32max, acc32);
      }
      // f32 scores: d products summed (oneDNN), scaled, the mask added; then exp_f (<= 1 ulp).
      double eps = 2 * (double(c.d + 2) * u32 * (qk_mag + mask_mag)) + 4 * u32;
      for (int64_t dv = 0; dv < c.dv; ++dv) {
        double num = 0, sum = 0, weight = 0, num32 = 0, sum32 = 0;
        for (int64_t j = 0; j < c.sk; ++j) {
          double ej = std::exp(s[size_t(j)] - smax), e32 = std::exp(s32[size_t(j)] - s32max);
          float vj = v.data<float>()[ov + j * lv[r - 2] + dv * lv[r - 1]];
          num += bf(float(ej)) * bf(vj), sum += ej, weight += ej * std::fabs(bf(vj));
          num32 += e32 * vj, sum32 += e32;
        }
        double want = num / sum, unrounded = num32 / sum32;
        double tol = (0x1p-8 + 3 * eps + 2 * double(c.sk + 16) * u32) * weight / sum + 1e-30;
        double g = got.data<float>()[oy + i * ly[r - 2] + dv * ly[r - 1]];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(g)) << "row " << i << " col " << dv;
          continue;
        }
        ASSERT_LE(std::fabs(g - want), tol) << "head " << h << " row " << i << " col " << dv << ": " << g
                                             << " vs " << want;
        sq_rounded += (g - want) * (g - want), sq_unrounded += (g - unrounded) * (g - unrounded);
        ++checked;
      }
    }
  }
  ASSERT_GT(checked, 0);
  EXPECT_LT(std::sqrt(sq_rounded), 0.1 * std::sqrt(sq_unrounded))
      << "the kernel is not closer to the bf16 computation than to the f32 one";
}

TEST(Bf16Attention, MatchesReferenceInTheSamePrecision) {
  std::vector<Case> cases = {
      {"2-D, no batch, odd sizes", {}, 7, 5, 3, 4, {}, {}, {}, {}, std::nullopt},
      {"[B, H], 7 x 13 scores, no mask", {2, 3}, 7, 13, 8, 5, {}, {}, {}, {}, std::nullopt},
      {"[S, H, D] heads, float causal mask [Sq, Sk]", {3}, 33, 33, 16, 16, {1, 0, 2}, {1, 0, 2}, {1, 0, 2},
       {1, 0, 2}, Ints{33, 33}, false, true},
      {"[B, H, S, D], k stored transposed, padding mask [B, 1, 1, Sk]", {2, 3}, 6, 10, 8, 5, {}, {0, 1, 3, 2}, {},
       {}, Ints{2, 1, 1, 10}},
      {"[B, S, H, D] in and out, bool causal mask", {2, 4}, 17, 17, 8, 8, {0, 2, 1, 3}, {0, 2, 1, 3},
       {0, 2, 1, 3}, {0, 2, 1, 3}, Ints{17, 17}, true, true},
      {"bool mask [B, 1, Sq, Sk], fill lowest", {2, 2}, 9, 21, 4, 3, {}, {}, {}, {}, Ints{2, 1, 9, 21}, true, false,
       double(std::numeric_limits<float>::lowest())},
      {"per-head mask [H, 1, Sk], one value column", {5}, 3, 29, 7, 1, {}, {}, {}, {}, Ints{5, 1, 29}},
      {"one head, long keys: row blocks and a partial last one", {1}, 70, 5000, 8, 3, {}, {}, {}, {},
       Ints{1, 1, 5000}},
      {"Whisper-like: 64-dim head, 1500 keys", {1}, 40, 1500, 64, 64, {}, {}, {}, {}, std::nullopt},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) check(c, seed += 10);
}

// An int8 executor runs attention on the same bf16 kernel (its products multiply two activations: nothing to
// quantize ahead), bit for bit the bf16 executor's result, checked above against the bf16 reference.
TEST(Bf16Attention, Int8ExecutorRunsItInBf16) {
  Tensor q = random_tensor({2, 3, 11, 8}, 1, 1.f), k = random_tensor({2, 3, 13, 8}, 2, 1.f),
         v = random_tensor({2, 3, 13, 5}, 3, 1.f);
  OneOp one = build_op(OpKind::Attention, {input(q), input(k), input(v)}, {{"scale", Attribute(0.125)}});
  ExecutorOptions bf16, int8;
  bf16.kernels.precision = Precision::bf16;
  int8.kernels.precision = Precision::int8;
  Executor a(one.g, bf16), b(one.g, int8);
  std::vector<NodeTime> prof = b.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  if (!machine_has_bf16()) {
    EXPECT_EQ(prof[0].precision.precision, Precision::fp32);
    EXPECT_FALSE(prof[0].precision.reason.empty());
    return;
  }
  EXPECT_EQ(prof[0].precision.precision, Precision::bf16) << prof[0].precision.reason;
  Tensor x = a.run(one.feeds)[0], y = b.run(one.feeds)[0];
  ASSERT_EQ(x.nbytes(), y.nbytes());
  EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0);
  Tensor f = Executor(one.g).run(one.feeds)[0];
  EXPECT_NE(std::memcmp(f.raw(), y.raw(), f.nbytes()), 0);  // not the f32 kernel's result
}

// Fast kernels off: the reference kernel runs, f32, and the decision says why.
TEST(Bf16Attention, KeepsF32WithAReason) {
  OneOp one = build_op(OpKind::Attention, {input(random_tensor({3, 4}, 1, 1.f)), input(random_tensor({5, 4}, 2, 1.f)),
                                           input(random_tensor({5, 2}, 3, 1.f))});
  ExecutorOptions o;
  o.kernels.precision = Precision::bf16;
  o.kernels.fast = false;
  Executor ref(one.g, o);
  std::vector<NodeTime> prof = ref.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  EXPECT_EQ(prof[0].precision.precision, Precision::fp32);
  EXPECT_FALSE(prof[0].precision.reason.empty());
}

}  // namespace
