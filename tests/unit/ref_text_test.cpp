// The text family (TfIdfVectorizer on integer token ids): skip-gram counting as the ONNX spec describes it, the
// three weighting modes, permuted and shared output coordinates, empty inputs and pools, symbolic batch dims, a
// randomized comparison against a brute-force enumeration, and malformed nodes failing with cuvil::Error.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "frontend/onnx/onnx_importer.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using I64s = std::vector<int64_t>;

// Attributes of a TfIdfVectorizer node; the defaults are a TF node with an empty pool.
struct Cfg {
  std::string mode = "TF";
  int64_t min_n = 1, max_n = 1, skips = 0;
  I64s counts, indexes{0}, pool;
  std::vector<double> weights;

  AttrMap attrs() const {
    AttrMap a{{"mode", mode},        {"min_gram_length", min_n}, {"max_gram_length", max_n},
              {"max_skip_count", skips}, {"ngram_counts", counts}, {"ngram_indexes", indexes},
              {"pool_int64s", pool}};
    if (!weights.empty()) a["weights"] = weights;
    return a;
  }
};

std::shared_ptr<Graph> tfidf_graph(DType dt, std::vector<Dim> dims, const AttrMap& attrs) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {dt, Shape(std::move(dims))});
  Node* n = g->add_node(OpKind::TfIdfVectorizer, {x}, {"y"}, attrs);
  g->add_output(n->output(0));
  infer_shapes(*g);
  verify(*g);
  return g;
}

Tensor tokens(DType dt, const I64s& v, std::vector<int64_t> shape) {
  if (dt == DType::i32) return Tensor::from_vector<int32_t>(std::vector<int32_t>(v.begin(), v.end()), shape);
  return Tensor::from_vector<int64_t>(v, shape);
}

// Runs the op on x (i64 unless told) with static input dims.
Tensor run(const Cfg& cfg, const I64s& x, std::vector<int64_t> shape, DType dt = DType::i64) {
  auto g = tfidf_graph(dt, std::vector<Dim>(shape.begin(), shape.end()), cfg.attrs());
  Executor e(g, reference_kernels());
  return e.run({tokens(dt, x, shape)})[0];
}

// The spec read literally: every n-gram x[i], x[i+d], ..., x[i+(n-1)d] with n in [min, max] and d in 1..skips+1
// (d = 1 only for n = 1), looked up in a map from the pool's n-grams to their output coordinates.
std::vector<float> brute_force(const Cfg& cfg, const I64s& x, int64_t rows, int64_t len) {
  std::map<I64s, int64_t> column;
  int64_t id = 0;
  for (size_t k = 0; k < cfg.counts.size(); ++k) {
    int64_t n = int64_t(k) + 1;
    int64_t end = k + 1 < cfg.counts.size() ? cfg.counts[k + 1] : int64_t(cfg.pool.size());
    for (int64_t p = cfg.counts[k]; p < end; p += n, ++id)
      if (n >= cfg.min_n && n <= cfg.max_n) column[I64s(cfg.pool.begin() + p, cfg.pool.begin() + p + n)] = cfg.indexes[size_t(id)];
  }
  int64_t out = *std::max_element(cfg.indexes.begin(), cfg.indexes.end()) + 1;
  std::vector<float> y(size_t(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> cnt(static_cast<size_t>(out));
    for (int64_t n = cfg.min_n; n <= cfg.max_n; ++n)
      for (int64_t d = 1; d <= (n == 1 ? 1 : cfg.skips + 1); ++d)
        for (int64_t i = 0; i + (n - 1) * d < len; ++i) {
          I64s gram;
          for (int64_t k = 0; k < n; ++k) gram.push_back(x[size_t(r * len + i + k * d)]);
          auto it = column.find(gram);
          if (it != column.end()) ++cnt[size_t(it->second)];
        }
    for (int64_t j = 0; j < out; ++j) {
      float w = cfg.weights.empty() ? 1.0f : float(cfg.weights[size_t(j)]);
      float c = float(cfg.mode == "IDF" ? std::min<int64_t>(cnt[size_t(j)], 1) : cnt[size_t(j)]);
      y[size_t(r * out + j)] = cfg.mode == "TF" ? c : c * w;
    }
  }
  return y;
}

// The pool of the ONNX backend tests: 1-grams 2 3 5 4, 2-grams (5 6) (7 8) (6 7).
Cfg backend_pool() {
  Cfg c;
  c.counts = {0, 4};
  c.indexes = {0, 1, 2, 3, 4, 5, 6};
  c.pool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
  return c;
}

// ---- counting

TEST(RefTextTfIdf, SpecExampleSkipGrams) {
  // The spec's example: with 2 skips, [94 17 36 12 28] yields the 2-grams (94 12) and (17 28); with fewer skips
  // allowed they are not found.
  Cfg c;
  c.min_n = c.max_n = 2;
  c.counts = {0, 0};
  c.indexes = {0, 1};
  c.pool = {94, 12, 17, 28};
  I64s x{94, 17, 36, 12, 28};
  c.skips = 2;
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{1, 1}));
  c.skips = 1;
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{0, 0}));
  // Every distance up to skips + 1 counts: (94 17) and (17 36) at distance 1, (94 36) at distance 2.
  c.pool = {94, 17, 17, 36, 94, 36};
  c.indexes = {0, 1, 2};
  c.skips = 2;
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{1, 1, 1}));
}

TEST(RefTextTfIdf, SpecExamplePermutedCoordinates) {
  // pool [94 17 17 36], ngram_indexes [1 0]: Y[0] counts (17 36), Y[1] counts (94 17).
  Cfg c;
  c.min_n = c.max_n = 2;
  c.counts = {0, 0};
  c.indexes = {1, 0};
  c.pool = {94, 17, 17, 36};
  EXPECT_EQ(values<float>(run(c, {17, 36, 94, 17, 36, 17, 36}, {7})), (std::vector<float>{3, 1}));
}

TEST(RefTextTfIdf, UnigramsCountOnceWhateverTheSkipCount) {
  Cfg c = backend_pool();
  c.max_n = 1;
  c.skips = 7;
  EXPECT_EQ(values<float>(run(c, {3, 3, 5, 9, 3}, {5})), (std::vector<float>{0, 3, 1, 0, 0, 0, 0}));
}

TEST(RefTextTfIdf, LongerGramsUseOneUniformSkip) {
  // 3-grams (1 3 5) and (1 2 5): the first is x[0], x[2], x[4] at distance 2; the second would need distances 1
  // then 3, which is not a skip-gram.
  Cfg c;
  c.min_n = 3;
  c.max_n = 3;
  c.skips = 3;
  c.counts = {0, 0, 0};
  c.indexes = {0, 1};
  c.pool = {1, 3, 5, 1, 2, 5};
  EXPECT_EQ(values<float>(run(c, {1, 2, 3, 4, 5}, {5})), (std::vector<float>{1, 0}));
  // Both 2-grams and 3-grams, with 1-grams of the pool outside [min, max] and so ignored.
  c.min_n = 2;
  c.counts = {0, 2, 6};
  c.indexes = {0, 1, 2, 3, 4};
  c.pool = {1, 5, 1, 3, 3, 5, 1, 3, 5};  // 1-grams 1 5; 2-grams (1 3) (3 5); 3-gram (1 3 5)
  EXPECT_EQ(values<float>(run(c, {1, 2, 3, 4, 5}, {5})), (std::vector<float>{0, 0, 1, 1, 1}));
}

TEST(RefTextTfIdf, Int32AndInt64AgreeAndNegativeIdsWork) {
  Cfg c;
  c.max_n = 2;
  c.skips = 1;
  c.counts = {0, 2};
  c.indexes = {0, 1, 2};
  c.pool = {-5, 2147483647, -5, -7};
  I64s x{-5, 0, -7, -5, 2147483647};
  std::vector<float> want{2, 1, 1};
  EXPECT_EQ(values<float>(run(c, x, {5}, DType::i64)), want);
  EXPECT_EQ(values<float>(run(c, x, {5}, DType::i32)), want);
  // An i64 id outside the i32 range matches only itself.
  c.pool = {int64_t(1) << 40, 1, 1, 1};
  EXPECT_EQ(values<float>(run(c, {int64_t(1) << 40, 0, 1}, {3})), (std::vector<float>{1, 1, 0}));
}

TEST(RefTextTfIdf, BatchRowsAreIndependentAndTheBatchDimStaysSymbolic) {
  Cfg c = backend_pool();
  c.min_n = 1;
  c.max_n = 2;
  c.skips = 5;
  auto g = tfidf_graph(DType::i32, {Dim::symbol("n"), Dim::symbol("len")}, c.attrs());
  EXPECT_EQ(g->outputs()[0]->type(), (TensorType{DType::f32, Shape({Dim::symbol("n"), 7})}));
  Executor e(g, reference_kernels());
  // The backend tests' two rows, and a third row continuing the second: no n-gram spans two rows.
  auto y = e.run({tokens(DType::i32, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8, 7, 9, 9, 9, 9, 8}, {3, 6})})[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{0, 3, 0, 0, 0, 0, 0,  //
                                           0, 0, 1, 0, 1, 1, 1,  //
                                           0, 0, 0, 0, 0, 1, 0}));
  // Running again (the arena is reused) gives the right answer for other sizes.
  y = e.run({tokens(DType::i32, {7, 8}, {1, 2})})[0];
  EXPECT_EQ(values<float>(y), (std::vector<float>{0, 0, 0, 0, 0, 1, 0}));
}

TEST(RefTextTfIdf, SharedCoordinatesAddUpAndDuplicatesTakeTheLastCoordinate) {
  Cfg c;
  c.counts = {0};
  c.indexes = {2, 2, 0};
  c.pool = {4, 5, 6};
  EXPECT_EQ(values<float>(run(c, {4, 5, 5, 6, 1}, {5})), (std::vector<float>{1, 0, 3}));
  c.indexes = {0, 1};
  c.pool = {4, 4};
  EXPECT_EQ(values<float>(run(c, {4, 4}, {2})), (std::vector<float>{0, 2}));
}

TEST(RefTextTfIdf, HugeSkipCountAndShortRows) {
  Cfg c = backend_pool();
  c.min_n = 1;
  c.max_n = 2;
  c.skips = int64_t(1) << 62;
  EXPECT_EQ(values<float>(run(c, {5, 9, 9, 9, 6}, {5})), (std::vector<float>{0, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(values<float>(run(c, {3}, {1})), (std::vector<float>{0, 1, 0, 0, 0, 0, 0}));
  c.skips = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(values<float>(run(c, {7, 8}, {2})), (std::vector<float>{0, 0, 0, 0, 0, 1, 0}));
}

// ---- weighting

TEST(RefTextTfIdf, WeightingModesScaleByOutputCoordinate) {
  // 1-grams 1 2 3 go to coordinates 2 0 1; weights[j] scales coordinate j (as onnxruntime does).
  Cfg c;
  c.counts = {0};
  c.indexes = {2, 0, 1};
  c.pool = {1, 2, 3};
  c.weights = {10, 100, 1000};
  I64s x{1, 1, 1, 2, 4};
  c.mode = "TF";
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{1, 0, 3}));
  c.mode = "IDF";
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{10, 0, 1000}));
  c.mode = "TFIDF";
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{10, 0, 3000}));
  c.weights = {-0.5, 2, 0.25};
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{-0.5f, 0, 0.75f}));
  // IDF selects the weight of a present n-gram, so an absent one stays 0 even for an inf or NaN weight; TFIDF
  // multiplies, so 0 * inf is NaN (as in onnxruntime).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  c.weights = {-inf, inf, nan};
  c.mode = "IDF";
  std::vector<float> y = values<float>(run(c, x, {5}));
  EXPECT_EQ(y[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  c.mode = "TFIDF";
  y = values<float>(run(c, x, {5}));
  EXPECT_EQ(y[0], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_TRUE(std::isnan(y[2]));
  c.weights.clear();
  c.mode = "IDF";
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{1, 0, 1}));
  c.mode = "TFIDF";
  EXPECT_EQ(values<float>(run(c, x, {5})), (std::vector<float>{1, 0, 3}));
}

TEST(RefTextTfIdf, TfIgnoresWeightsEvenWhenTooFew) {
  Cfg c;
  c.counts = {0};
  c.indexes = {0, 3};
  c.pool = {1, 2};
  c.weights = {2, 2};
  EXPECT_EQ(values<float>(run(c, {2, 2, 1}, {3})), (std::vector<float>{1, 0, 0, 2}));
}

// ---- empty tensors and pools

TEST(RefTextTfIdf, EmptyInputsAndPools) {
  Cfg c = backend_pool();
  c.max_n = 2;
  c.skips = 3;
  EXPECT_EQ(values<float>(run(c, {}, {0})), std::vector<float>(7, 0.0f));
  Tensor y = run(c, {}, {0, 4});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{0, 7}));
  y = run(c, {}, {3, 0});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(values<float>(y), std::vector<float>(21, 0.0f));
  // No n-grams at all: a zero vector sized by ngram_indexes.
  Cfg empty;
  empty.indexes = {0, 1, 4};
  EXPECT_EQ(values<float>(run(empty, {1, 2, 3}, {3})), std::vector<float>(5, 0.0f));
  // Levels may be empty: here only 3-grams.
  Cfg only3;
  only3.min_n = 1;
  only3.max_n = 3;
  only3.counts = {0, 0, 0};
  only3.pool = {1, 2, 3};
  EXPECT_EQ(values<float>(run(only3, {1, 2, 3, 1, 2, 3}, {6})), (std::vector<float>{2}));
}

// ---- randomized comparison with the brute-force enumeration

TEST(RefTextTfIdf, MatchesBruteForceOnRandomCases) {
  std::mt19937 rng(1234);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* modes[] = {"TF", "IDF", "TFIDF"};
  for (int iter = 0; iter < 200; ++iter) {
    Cfg c;
    c.mode = modes[iter % 3];
    int64_t levels = uniform(1, 4);
    int64_t num_ngrams = 0;
    for (int64_t n = 1; n <= levels; ++n) {
      c.counts.push_back(int64_t(c.pool.size()));
      for (int64_t k = uniform(0, 4); k > 0; --k, ++num_ngrams)
        for (int64_t t = 0; t < n; ++t) c.pool.push_back(uniform(0, 3));
    }
    c.min_n = uniform(1, levels);
    c.max_n = uniform(c.min_n, levels + 1);
    c.skips = uniform(0, 4);
    c.indexes.clear();
    for (int64_t k = 0; k < std::max<int64_t>(num_ngrams, 1); ++k) c.indexes.push_back(uniform(0, num_ngrams + 1));
    int64_t out = *std::max_element(c.indexes.begin(), c.indexes.end()) + 1;
    if (iter % 2)
      for (int64_t j = 0; j < out; ++j) c.weights.push_back(double(uniform(-4, 4)) / 4);
    int64_t rows = uniform(1, 3), len = uniform(0, 12);
    I64s x;
    for (int64_t k = 0; k < rows * len; ++k) x.push_back(uniform(0, 3));
    DType dt = iter % 4 < 2 ? DType::i64 : DType::i32;
    std::vector<int64_t> shape = iter % 5 ? std::vector<int64_t>{rows, len} : std::vector<int64_t>{rows * len};
    if (shape.size() == 1) {
      len = rows * len;
      rows = 1;
    }
    EXPECT_EQ(values<float>(run(c, x, shape, dt)), brute_force(c, x, rows, len)) << "case " << iter;
  }
}

TEST(RefTextTfIdf, LargeInputRunsQuickly) {
  // A 10k-entry vocabulary of 1- to 3-grams over 256 rows of 2048 tokens with 8 skips.
  std::mt19937 rng(7);
  Cfg c;
  c.min_n = 1;
  c.max_n = 3;
  c.skips = 8;
  for (int64_t n = 1; n <= 3; ++n) {
    c.counts.push_back(int64_t(c.pool.size()));
    for (int k = 0; k < 3333 * int(n); ++k) c.pool.push_back(int64_t(rng() % 50));
  }
  for (int64_t k = 0; k < 3333 * 3; ++k) c.indexes.push_back(k);
  I64s x(256 * 2048);
  for (auto& v : x) v = int64_t(rng() % 60);
  Tensor y = run(c, x, {256, 2048});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{256, 9999}));
}

// ---- malformed nodes

void expect_infer_error(const Cfg& c, const std::string& needle, DType dt = DType::i64,
                        std::vector<Dim> dims = {Dim(4)}) {
  EXPECT_CUVIL_ERROR(tfidf_graph(dt, dims, c.attrs()), needle);
}

TEST(RefTextTfIdf, BadAttributesAreErrors) {
  Cfg ok = backend_pool();
  ok.max_n = 2;
  {
    Cfg c = ok;
    c.mode = "BM25";
    expect_infer_error(c, "'mode'");
  }
  {
    Cfg c = ok;
    c.min_n = 0;
    expect_infer_error(c, "'min_gram_length' must be >= 1");
  }
  {
    Cfg c = ok;
    c.min_n = 3;
    expect_infer_error(c, "'max_gram_length' (2) must be >= 'min_gram_length' (3)");
  }
  {
    Cfg c = ok;
    c.skips = -1;
    expect_infer_error(c, "'max_skip_count' must be >= 0");
  }
  {
    Cfg c = ok;
    c.counts = {1, 4};
    expect_infer_error(c, "must start at 0");
  }
  {
    Cfg c = ok;
    c.counts = {0, 4, 2};
    expect_infer_error(c, "non-decreasing");
  }
  {
    Cfg c = ok;
    c.counts = {0, 11};
    expect_infer_error(c, "outside the pool");
  }
  {
    Cfg c = ok;
    c.counts = {0, 5};  // 5 ids of 2-grams
    expect_infer_error(c, "not a whole number of 2-grams");
  }
  {
    Cfg c = ok;
    c.counts = {};
    expect_infer_error(c, "'ngram_counts' is empty");
  }
  {
    Cfg c = ok;
    c.indexes = {0, 1, 2, 3, 4, 5};
    expect_infer_error(c, "'ngram_indexes' has 6 entries, but the pool holds 7 n-grams");
  }
  {
    Cfg c = ok;
    c.indexes = {0, 1, 2, 3, 4, -5, 6};
    expect_infer_error(c, "invalid output coordinate -5");
  }
  {
    Cfg c;
    c.indexes = {};
    expect_infer_error(c, "'ngram_indexes' must not be empty");
  }
  {
    Cfg c = ok;
    c.mode = "TFIDF";
    c.weights = {1, 1, 1, 1, 1, 1};
    expect_infer_error(c, "'weights' has 6 entries, but the output has 7 coordinates");
  }
}

TEST(RefTextTfIdf, StringPoolsAndMissingPoolsAreErrors) {
  Cfg ok = backend_pool();
  AttrMap a = ok.attrs();
  a["pool_strings"] = std::vector<std::string>{"a", "b"};
  EXPECT_CUVIL_ERROR(tfidf_graph(DType::i64, {4}, a), "'pool_strings' is not supported");
  a = ok.attrs();
  a.erase("pool_int64s");
  EXPECT_CUVIL_ERROR(tfidf_graph(DType::i64, {4}, a), "'pool_int64s' is required");
  a = ok.attrs();
  a.erase("mode");
  EXPECT_CUVIL_ERROR(tfidf_graph(DType::i64, {4}, a), "required attribute 'mode' is missing");
}

TEST(RefTextTfIdf, BadInputsAreErrors) {
  Cfg ok = backend_pool();
  expect_infer_error(ok, "i32", DType::f32);
  expect_infer_error(ok, "i32", DType::u8);
  expect_infer_error(ok, "rank 1", DType::i64, {});
  expect_infer_error(ok, "rank 1", DType::i64, {2, 3, 4});
  // A rank only known at run time is checked there.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::i64, Shape::unknown_rank()});
  Node* n = g->add_node(OpKind::TfIdfVectorizer, {x}, {"y"}, ok.attrs());
  g->add_output(n->output(0));
  infer_shapes(*g);
  EXPECT_FALSE(g->outputs()[0]->shape().rank_known());
  Executor e(g, reference_kernels());
  EXPECT_EQ(values<float>(e.run({tokens(DType::i64, {3, 5}, {2})})[0]), (std::vector<float>{0, 1, 1, 0, 0, 0, 0}));
  EXPECT_CUVIL_ERROR(e.run({tokens(DType::i64, {3, 5}, {1, 1, 2})}), "rank 1");
  EXPECT_CUVIL_ERROR(e.run({Tensor::scalar<int64_t>(3)}), "rank 1");
}

// ---- ONNX import

onnx::ModelProto tfidf_model(int elem) {
  onnx::ModelProto m = onnx_model(8, 9);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", elem, {4});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {3});
  auto* n = g->add_node();
  n->set_op_type("TfIdfVectorizer");
  n->set_name("tfidf");
  n->add_input("x");
  n->add_output("y");
  auto add_int = [&](const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto add_ints = [&](const char* name, I64s v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t k : v) a->add_ints(k);
  };
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("TF");
  add_int("min_gram_length", 1);
  add_int("max_gram_length", 1);
  add_int("max_skip_count", 0);
  add_ints("ngram_counts", {0});
  add_ints("ngram_indexes", {0, 1, 2});
  if (elem == onnx::TensorProto::STRING) {
    auto* a = n->add_attribute();
    a->set_name("pool_strings");
    a->set_type(onnx::AttributeProto::STRINGS);
    for (const char* s : {"a", "b", "c"}) a->add_strings(s);
  } else {
    add_ints("pool_int64s", {7, 8, 9});
  }
  return m;
}

TEST(RefTextTfIdf, OnnxImport) {
  auto g = import(tfidf_model(onnx::TensorProto::INT32));
  Executor e(g, reference_kernels());
  auto y = e.run({Tensor::from_vector<int32_t>({9, 7, 9, 1}, {4})})[0];
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 0, 2}));
  // String tokens become pool ids at import (convert_text.cpp); a token outside the pool counts for nothing.
  Executor es(import(tfidf_model(onnx::TensorProto::STRING)), reference_kernels());
  auto ys = es.run({Tensor::strings({"c", "a", "c", "zz"}, {4})})[0];
  EXPECT_EQ(values<float>(ys), (std::vector<float>{1, 0, 2}));
  // A string pool on an integer input is refused.
  onnx::ModelProto m = tfidf_model(onnx::TensorProto::STRING);
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  EXPECT_CUVIL_ERROR(import(m), "'pool_strings' is not supported");
}

}  // namespace
