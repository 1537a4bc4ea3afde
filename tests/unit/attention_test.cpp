// Attention: the fast kernel (oneDNN products around a masked Softmax, operands read through strides) against the
// reference kernel over ranks 2-5, every permutation kind, mask broadcasts, odd sizes, head chunks with a partial
// last chunk, fully masked rows; the fuse-attention pass on a symbolic shape; inference errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "passes/pass.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& shape, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// The stored shape of a tensor whose logical view through `perm` is `logical` (logical dim i = stored perm[i]).
Ints stored_shape(const Ints& logical, const Ints& perm) {
  if (perm.empty()) return logical;
  Ints s(logical.size());
  for (size_t i = 0; i < perm.size(); ++i) s[size_t(perm[i])] = logical[i];
  return s;
}

struct Case {
  std::string what;
  Ints batch;  // logical batch dims
  int64_t sq, sk, d, dv;
  Ints perm_q, perm_k, perm_v, perm_y;
  std::optional<Ints> mask;  // the mask's shape
  float scale = 0.125f;
};

void expect_matches_reference(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.what);
  auto logical = [&](int64_t a, int64_t b) {
    Ints s = c.batch;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  std::vector<OpArg> args{input(random_tensor(stored_shape(logical(c.sq, c.d), c.perm_q), seed, 2.f)),
                          input(random_tensor(stored_shape(logical(c.sk, c.d), c.perm_k), seed + 1, 2.f)),
                          input(random_tensor(stored_shape(logical(c.sk, c.dv), c.perm_v), seed + 2))};
  if (c.mask) {
    Tensor m = random_tensor(*c.mask, seed + 3, 3.f);
    for (int64_t i = 0; i < m.numel(); i += 3) m.data<float>()[i] = -1e4f;  // masked-out positions
    args.push_back(input(m));
  }
  AttrMap attrs{{"scale", Attribute(double(c.scale))}};
  for (auto [name, p] : {std::pair{"perm_q", &c.perm_q}, {"perm_k", &c.perm_k}, {"perm_v", &c.perm_v},
                         {"perm_y", &c.perm_y}})
    if (!p->empty()) attrs.emplace(name, Attribute(*p));
  expect_fast_matches_reference(build_op(OpKind::Attention, args, attrs), "onednn:attention:", 2e-5, 1e-5);
}

TEST(Attention, FastKernelMatchesReference) {
  std::vector<Case> cases = {
      {"2-D, no batch", {}, 7, 5, 3, 4, {}, {}, {}, {}, std::nullopt},
      {"2-D, k stored transposed, mask [Sq, Sk]", {}, 9, 11, 8, 8, {}, {1, 0}, {}, {}, Ints{9, 11}},
      {"[S, H, D] heads (MultiheadAttention export)", {3}, 13, 13, 16, 16, {1, 0, 2}, {1, 0, 2}, {1, 0, 2},
       {1, 0, 2}, std::nullopt},
      {"[B, H, S, D], padding mask [B, 1, 1, Sk]", {2, 3}, 6, 10, 8, 5, {}, {0, 1, 3, 2}, {}, {},
       Ints{2, 1, 1, 10}},
      {"[B, S, H, D] in and out, causal mask [Sq, Sk]", {2, 4}, 17, 17, 8, 8, {0, 2, 1, 3}, {0, 2, 1, 3},
       {0, 2, 1, 3}, {0, 2, 1, 3}, Ints{17, 17}},
      {"per-head mask [H, 1, Sk], odd sizes", {5}, 3, 29, 7, 1, {}, {}, {}, {}, Ints{5, 1, 29}},
      {"mask of one value per row [Sq, 1]", {2}, 4, 6, 3, 3, {}, {}, {}, {}, Ints{4, 1}},
      {"rank 5, heads in the middle of the output", {2, 2, 3}, 5, 7, 4, 6, {}, {}, {}, {0, 1, 3, 2, 4},
       std::nullopt},
      {"5 heads of 300 x 400 scores, strided q, v and y", {5}, 300, 400, 16, 8, {1, 0, 2}, {}, {1, 0, 2}, {1, 0, 2},
       Ints{5, 300, 400}},
      {"heads in row blocks (scores of 700 columns: 374 rows per 1 MB)", {2}, 600, 700, 4, 4, {}, {}, {}, {},
       std::nullopt, 1.f},
      {"one head, long keys: 52-row blocks and a last one of 18", {1}, 70, 5000, 8, 3, {}, {}, {}, {},
       Ints{1, 1, 5000}},
      {"a scale not a power of two (the product's post-op), strided q", {3}, 11, 9, 5, 4, {1, 0, 2}, {}, {}, {},
       Ints{11, 9}, 0.1f},
  };
  uint32_t seed = 10;
  for (const Case& c : cases) expect_matches_reference(c, seed += 10);
}

// A power-of-two scale is applied to q as it is gathered, which scales every product and partial sum exactly:
// the same bits as the scaled q handed in with scale 1 (dense q, gathered only for the scale; strided q).
TEST(Attention, PowerOfTwoScaleOnQKeepsTheBits) {
  for (bool strided : {false, true}) {
    Ints perm = strided ? Ints{1, 0, 2} : Ints{};
    Ints shape = strided ? Ints{37, 3, 16} : Ints{3, 37, 16};
    Tensor q = random_tensor(shape, 1, 2.f), k = random_tensor(shape, 2, 2.f), v = random_tensor(shape, 3);
    Tensor q8 = q.clone();
    for (int64_t i = 0; i < q8.numel(); ++i) q8.data<float>()[i] *= 0.125f;
    auto run = [&](const Tensor& qq, double scale) {
      AttrMap attrs{{"scale", Attribute(scale)}};
      if (strided)
        for (const char* p : {"perm_q", "perm_k", "perm_v", "perm_y"}) attrs.emplace(p, Attribute(perm));
      OneOp one = build_op(OpKind::Attention, {input(qq), input(k), input(v)}, attrs);
      return Executor(one.g).run(one.feeds)[0];
    };
    Tensor folded = run(q, 0.125), given = run(q8, 1.0);
    ASSERT_EQ(folded.shape(), given.shape());
    EXPECT_EQ(std::memcmp(folded.data<float>(), given.data<float>(), size_t(folded.numel()) * sizeof(float)), 0)
        << (strided ? "strided" : "dense");
  }
}

// A row whose mask is -inf everywhere is 0/0 in the Softmax: NaN in both kernels, not a silent number.
TEST(Attention, FullyMaskedRowIsNaNInBothKernels) {
  Tensor mask = Tensor::zeros(DType::f32, {3, 4});
  for (int64_t j = 0; j < 4; ++j) mask.data<float>()[4 + j] = -INFINITY;
  OneOp one = build_op(OpKind::Attention,
                       {input(random_tensor({3, 5}, 1)), input(random_tensor({4, 5}, 2)),
                        input(random_tensor({4, 2}, 3)), input(mask)});
  Executor fast(one.g), ref(one.g, reference_kernels());
  Tensor got = fast.run(one.feeds)[0], want = ref.run(one.feeds)[0];
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool masked_row = i / 2 == 1;
    EXPECT_EQ(std::isnan(got.data<float>()[i]), masked_row) << i;
    EXPECT_EQ(std::isnan(want.data<float>()[i]), masked_row) << i;
    if (!masked_row) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << i;
  }
}

// nan_probs_zero (PyTorch's safe softmax, Where(IsNaN(P), 0, P)): the rows without a finite score, a NaN score or
// +inf give 0 in both kernels, in f32 and bf16 where the machine runs it; the other rows are as without it. Enough
// heads to run on both threads.
TEST(Attention, NanProbsZeroGivesZeroRowsInBothKernels) {
  const int64_t heads = 6, sq = 7, sk = 9, dv = 5;
  Tensor mask = random_tensor({heads, sq, sk}, 4, 2.f);
  Tensor q = random_tensor({heads, sq, 8}, 1);
  auto at = [&](int64_t h, int64_t i, int64_t j) -> float& { return mask.data<float>()[(h * sq + i) * sk + j]; };
  for (int64_t j = 0; j < sk; ++j) at(0, 1, j) = -INFINITY, at(3, 6, j) = -INFINITY;  // no finite score
  at(2, 2, 4) = NAN;                                                                    // a NaN score
  at(4, 0, 3) = INFINITY;                                                               // +inf
  auto zero_row = [](int64_t h, int64_t i) {
    return (h == 0 && i == 1) || (h == 3 && i == 6) || (h == 2 && i == 2) || (h == 4 && i == 0);
  };
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    bool bf16 = std::string(precision) == "bf16";
    if (bf16 && !__builtin_cpu_supports("avx512bf16")) continue;
    OneOp one = build_op(OpKind::Attention,
                         {input(q), input(random_tensor({heads, sk, 8}, 2)), input(random_tensor({heads, sk, dv}, 3)),
                          input(mask)},
                         {{"nan_probs_zero", Attribute(int64_t(1))}, {"scale", Attribute(0.125)}});
    ExecutorOptions fast_options;
    if (bf16) fast_options.kernels.precision = Precision::bf16;
    Executor fast(one.g, fast_options), ref(one.g, reference_kernels());
    ASSERT_EQ(fast.profile(one.feeds)[0].impl.rfind("onednn:attention:", 0), 0u);
    Tensor got = fast.run(one.feeds)[0], want = ref.run(one.feeds)[0];
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t c = 0; c < dv; ++c) {
          int64_t e = (h * sq + i) * dv + c;
          float g = got.data<float>()[e], w = want.data<float>()[e];
          if (zero_row(h, i)) {
            EXPECT_EQ(g, 0.f) << h << "," << i;
            EXPECT_EQ(w, 0.f) << h << "," << i;
          } else {
            EXPECT_NEAR(g, w, bf16 ? 2e-2 : 1e-5) << h << "," << i << "," << c;
          }
        }
  }
}

// A bool mask selects (Where(Mask, score, mask_fill)), as torch.export's SDPA and Hugging Face masks do: padding
// [B, 1, 1, Sk], causal [Sq, Sk], one value per row [Sq, 1] (stride 0) and a full per-head mask, odd sizes, heads
// in the [B, S, H, D] layout, fills of -inf and float's lowest. Every row keeps its first key (no 0/0 row).
TEST(Attention, BoolMaskFastKernelMatchesReference) {
  struct BoolCase {
    std::string what;
    Ints batch;
    int64_t sq, sk, d;
    Ints perm;  // of q, k, v and y alike
    Ints mask;
    double fill;
  };
  const double lowest = double(std::numeric_limits<float>::lowest());
  std::vector<BoolCase> cases = {
      {"padding [B, 1, 1, Sk], -inf", {2, 3}, 7, 9, 8, {}, {2, 1, 1, 9}, -INFINITY},
      {"causal [Sq, Sk], [B, S, H, D] layout, lowest", {1, 5}, 13, 13, 16, {0, 2, 1, 3}, {13, 13}, lowest},
      {"one value per row [Sq, 1], odd sizes", {3}, 5, 7, 3, {}, {5, 1}, -INFINITY},
      {"full mask per head [H, Sq, Sk]", {4}, 11, 17, 5, {}, {4, 11, 17}, -1e4},
  };
  uint32_t seed = 500;
  for (const BoolCase& c : cases) {
    SCOPED_TRACE(c.what);
    seed += 10;
    auto shape = [&](int64_t a, int64_t b) {
      Ints s = c.batch;
      s.push_back(a);
      s.push_back(b);
      return stored_shape(s, c.perm);
    };
    Tensor mask = Tensor::zeros(DType::boolean, c.mask);
    std::mt19937 rng(seed);
    int64_t cols = c.mask.back();
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.data<bool>()[i] = i % cols == 0 || (c.what.rfind("causal", 0) == 0 ? i % cols <= (i / cols) % c.sq
                                                                               : rng() % 3 != 0);
    std::vector<OpArg> args{input(random_tensor(shape(c.sq, c.d), seed, 2.f)),
                            input(random_tensor(shape(c.sk, c.d), seed + 1, 2.f)),
                            input(random_tensor(shape(c.sk, c.d), seed + 2)), input(mask)};
    AttrMap attrs{{"scale", Attribute(0.125)}, {"mask_fill", Attribute(c.fill)}};
    if (!c.perm.empty())
      for (const char* p : {"perm_q", "perm_k", "perm_v", "perm_y"}) attrs.emplace(p, Attribute(c.perm));
    expect_fast_matches_reference(build_op(OpKind::Attention, args, attrs), "onednn:attention:", 2e-5, 1e-5);
  }
}

// The bool mask's meaning itself: a masked-out key gets weight 0 (fill -inf) or exp(lowest - max) = 0 too; a row
// whose mask is all false is 0/0 = NaN with -inf (as the Where + Softmax it replaces), the mean of v with lowest.
TEST(Attention, BoolMaskSelectsTheScores) {
  Tensor q = random_tensor({2, 3}, 1), k = random_tensor({4, 3}, 2), v = random_tensor({4, 2}, 3);
  Tensor mask = Tensor::zeros(DType::boolean, {2, 4});
  mask.data<bool>()[1] = true;  // row 0 sees key 1 only; row 1 sees nothing
  for (double fill : {-double(INFINITY), double(std::numeric_limits<float>::lowest())}) {
    OneOp one = build_op(OpKind::Attention, {input(q), input(k), input(v), input(mask)},
                         {{"mask_fill", Attribute(fill)}});
    Executor fast(one.g), ref(one.g, reference_kernels());
    for (Executor* ex : {&fast, &ref}) {
      Tensor y = ex->run(one.feeds)[0];
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_NEAR(y.data<float>()[j], v.data<float>()[2 + j], 1e-6) << fill;  // only key 1's value
        float mean = (v.data<float>()[j] + v.data<float>()[2 + j] + v.data<float>()[4 + j] + v.data<float>()[6 + j]) / 4;
        if (std::isinf(fill)) EXPECT_TRUE(std::isnan(y.data<float>()[2 + j])) << j;
        else EXPECT_NEAR(y.data<float>()[2 + j], mean, 1e-6) << j;
      }
    }
  }
}

TEST(Attention, InferenceRejectsMismatchedOperands) {
  auto fails_with = [](std::vector<OpArg> args, AttrMap attrs, const std::string& msg) {
    OneOp one(OpKind::Attention, args, std::move(attrs), 1);
    try {
      one.infer();
      ADD_FAILURE() << "no error; expected '" << msg << "'";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Attention"), std::string::npos) << e.what();
    }
  };
  Tensor q = random_tensor({2, 3, 4}, 1);
  fails_with({input(q), input(random_tensor({2, 5, 3}, 2)), input(random_tensor({2, 5, 4}, 3))}, {},
             "different head sizes");
  fails_with({input(q), input(random_tensor({2, 5, 4}, 2)), input(random_tensor({2, 6, 4}, 3))}, {},
             "different sequence lengths");
  fails_with({input(q), input(random_tensor({3, 5, 4}, 2)), input(random_tensor({3, 5, 4}, 3))}, {},
             "different batch dims");
  fails_with({input(q), input(random_tensor({5, 4}, 2)), input(random_tensor({5, 4}, 3))}, {}, "same rank");
  fails_with({input(q), input(random_tensor({2, 5, 4}, 2)), input(random_tensor({2, 5, 4}, 3)),
              input(random_tensor({2, 2, 5}, 4))},
             {}, "Mask does not broadcast");
  fails_with({input(q), input(random_tensor({2, 5, 4}, 2)), input(random_tensor({2, 5, 4}, 3))},
             {{"perm_q", Attribute(Ints{0, 0, 1})}}, "not a permutation");
}

// Symbolic shapes fuse like static ones where the dims the kernel relies on are provably equal (the same
// expression); batch dims of q and k that are different symbols, or a mask dim that is neither 1 nor the scores',
// keep the separate nodes.
TEST(Attention, PassFusesSymbolicShapesOnlyWhenDimsProvablyMatch) {
  struct Case {
    std::string q, k, mask;
    bool fuses;
  };
  for (const Case& c : std::vector<Case>{{"f32[b, n, 4]", "f32[b, n, 4]", "", true},
                                         {"f32[b, 6, 4]", "f32[b, 6, 4]", "", true},
                                         {"f32[b, n, 4]", "f32[c, n, 4]", "", false},
                                         {"f32[b, n, 4]", "f32[b, n, 4]", "f32[1, n]", true},
                                         {"f32[b, n, 4]", "f32[b, n, 4]", "f32[b, 1, n]", true},
                                         {"f32[b, n, 4]", "f32[b, n, 4]", "f32[1, m]", false}}) {
    // scores [b, n, n] (or [b, 6, 6]): the q's sequence dim both ways
    std::string seq = c.q.find(", 6,") != std::string::npos ? "6" : "n";
    std::string bq = c.q.substr(4, c.q.find(',') - 4), bk = c.k.substr(4, c.k.find(',') - 4);
    std::string scores = "f32[" + bq + ", " + seq + ", " + seq + "]";
    std::string text = "graph @main(%q: " + c.q + ", %k: " + c.k +
                       (c.mask.empty() ? "" : ", %m: " + c.mask) + ") {\n"
                       "  %kt: f32[" + bk + ", 4, " + seq + "] = Transpose(%k) {perm = [0, 2, 1]}\n"
                       "  %s: " + scores + " = MatMul(%q, %kt)\n" +
                       (c.mask.empty() ? "" : "  %sm: " + scores + " = Add(%s, %m)\n") +
                       "  %p: " + scores + " = Softmax(" + (c.mask.empty() ? "%s" : "%sm") + ") {axis = 2}\n"
                       "  %y: " + c.q + " = MatMul(%p, %k)\n"
                       "  return %y\n}\n";
    auto g = parse_checked(text);
    PassContext ctx;
    bool changed = run_pass(*create_pass("fuse-attention"), *g, ctx);
    EXPECT_EQ(changed, c.fuses) << text;
  }
}

}  // namespace

// PassContext::skip (and CUVIL_SKIP_PASSES) leave a pass out, for A/B measurements of one pass.
TEST(Attention, SkippedPassLeavesTheGraphAlone) {
  std::string text = "graph @main(%x: f32[6, 4]) {\n"
                     "  %xt: f32[4, 6] = Transpose(%x) {perm = [1, 0]}\n"
                     "  %s: f32[6, 6] = MatMul(%x, %xt)\n"
                     "  %p: f32[6, 6] = Softmax(%s) {axis = 1}\n"
                     "  %y: f32[6, 4] = MatMul(%p, %x)\n"
                     "  return %y\n}\n";
  auto g = parse_checked(text);
  PassContext ctx;
  ctx.skip.insert("fuse-attention");
  auto pass = create_pass("fuse-attention");
  EXPECT_FALSE(run_pass(*pass, *g, ctx));
  EXPECT_EQ(g->nodes().size(), 4u);
  ctx.skip.clear();
  EXPECT_TRUE(run_pass(*pass, *g, ctx));
}
