// Tensor family: shape inference (static and symbolic), reference kernels, and the ONNX converters of older
// opsets. Covers what the ONNX node suite misses: empty tensors, negative axes, every dtype class, special float
// values, symbolic shape arithmetic, and bad input failing with cuvil::Error instead of crashing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "runtime/executor.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

Tensor i64(const std::vector<int64_t>& v) { return vec<int64_t>(v); }
Tensor f32(const std::vector<float>& v, std::vector<int64_t> shape) { return tensor<float>(v, std::move(shape)); }

// Short names for the node's inputs: run-time inputs and constants.
OpArg I(Tensor t) { return input(std::move(t)); }
OpArg C(Tensor t) { return constant(std::move(t)); }

// Runs op without verifying the graph.
std::vector<Tensor> run(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}, size_t outputs = 1) {
  return OneOp(op, args, std::move(attrs), outputs).run();
}
Tensor run1(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}) {
  return run(op, args, std::move(attrs))[0];
}

// Runs with the non-data inputs as constants and again as run-time inputs: both must agree (compile-time and
// run-time inference share one function).
Tensor run_both(OpKind op, std::vector<Tensor> ins, AttrMap attrs = {}) {
  std::vector<OpArg> a, b;
  for (size_t i = 0; i < ins.size(); ++i) {
    a.push_back(i == 0 ? I(ins[i]) : C(ins[i]));
    b.push_back(I(ins[i]));
  }
  Tensor x = run1(op, a, attrs), y = run1(op, b, attrs);
  EXPECT_TRUE(x.same_bytes(y)) << x.type_str() << " vs " << y.type_str();
  return x;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

// ---- Reshape, Flatten, Squeeze, Unsqueeze

TEST(RefTensorReshape, ZeroCopiesAndMinusOneInfers) {
  Tensor x = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  Tensor y = run_both(OpKind::Reshape, {x, i64({0, -1})});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(values<float>(y), values<float>(x));
  EXPECT_EQ(run_both(OpKind::Reshape, {x, i64({-1})}).shape(), (std::vector<int64_t>{12}));
  EXPECT_EQ(run_both(OpKind::Reshape, {f32({7}, {1, 1}), i64({})}).rank(), 0u);
}

TEST(RefTensorReshape, AllowZeroAndEmpty) {
  Tensor e = Tensor::zeros(DType::f32, {0, 3});
  Tensor y = run1(OpKind::Reshape, {I(e), C(i64({3, 0}))}, {{"allowzero", int64_t(1)}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 0}));
  // Without allowzero the 0 copies the input dim: [0, 3] -> [0, 3].
  EXPECT_EQ(run1(OpKind::Reshape, {I(e), C(i64({0, 3}))}).shape(), (std::vector<int64_t>{0, 3}));
  // -1 next to dims with zero elements is ambiguous.
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(e), C(i64({0, -1}))}), "-1");
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(e), C(i64({0, -1}))}, {{"allowzero", int64_t(1)}}), "-1");
}

TEST(RefTensorReshape, BadShapesAreErrors) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), C(i64({-1, -1}))}), "more than one -1");
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), C(i64({4, 2}))}), "cannot reshape");
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), C(i64({-2, 3}))}), "invalid dim");
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), C(i64({4, -1}))}), "cannot reshape");
  // The same errors when the shape only arrives at run time.
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), I(i64({4, 2}))}), "cannot reshape");
  EXPECT_CUVIL_ERROR(run1(OpKind::Reshape, {I(x), C(tensor<int32_t>({6}, {1}))}), "dtype");
}

TEST(RefTensorReshape, RunsInPlace) {
  // Reshape's output may share its input's buffer when that input dies at the Reshape.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape::of({2, 3})});
  Value* a = g->add_node(OpKind::Transpose, {x}, {"a"})->output(0);
  Value* s = g->add_constant("s", i64({6}));
  Value* b = g->add_node(OpKind::Reshape, {a, s}, {"b"})->output(0);
  Value* c = g->add_node(OpKind::Transpose, {b}, {"c"})->output(0);
  g->add_output(c);
  infer_shapes(*g);
  Executor ex(g, reference_kernels());
  auto out = ex.run({f32({1, 2, 3, 4, 5, 6}, {2, 3})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(ex.stats().inplace_reuses, 1);
}

TEST(RefTensorReshape, ViewsABufferStillRead) {
  // A Reshape's output shares its input's buffer even while the input is read later; the buffer then lives until
  // both are read, so nothing writes it in place before (the Neg of `a` takes a fresh buffer), and no node writes
  // in place into a buffer that another of its inputs views (ScatterND would read the updates it overwrote).
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape::of({2, 2})});
  Value* a = g->add_node(OpKind::Abs, {x}, {"a"})->output(0);
  Value* r = g->add_node(OpKind::Reshape, {a, g->add_constant("s4", i64({4}))}, {"r"})->output(0);
  Value* n = g->add_node(OpKind::Neg, {a}, {"n"})->output(0);
  Value* n4 = g->add_node(OpKind::Reshape, {n, g->add_constant("s4b", i64({4}))}, {"n4"})->output(0);
  Value* sum = g->add_node(OpKind::Add, {r, n4}, {"sum"})->output(0);  // |x| - |x| = 0, unless Neg clobbered a
  Value* idx = g->add_constant("idx", tensor<int64_t>({3, 2, 1, 0}, {4, 1}));
  Value* u = g->add_node(OpKind::Reshape, {r, g->add_constant("s4c", i64({4}))}, {"u"})->output(0);
  Value* rev = g->add_node(OpKind::ScatterND, {r, idx, u}, {"rev"})->output(0);  // r reversed
  g->add_output(sum);
  g->add_output(g->add_node(OpKind::Neg, {rev}, {"neg_rev"})->output(0));  // rev itself is in the arena
  infer_shapes(*g);
  Executor ex(g, reference_kernels());
  auto out = ex.run({f32({1, -2, 3, -4}, {2, 2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{-4, -3, -2, -1}));
  EXPECT_GE(ex.stats().inplace_reuses, 3);  // r, n4 and u are views
}

TEST(RefTensorFlatten, AxesIncludingNegativeAndEnds) {
  Tensor x = Tensor::zeros(DType::u8, {2, 3, 4});
  EXPECT_EQ(run1(OpKind::Flatten, {I(x)}).shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run1(OpKind::Flatten, {I(x)}, {{"axis", int64_t(0)}}).shape(), (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(run1(OpKind::Flatten, {I(x)}, {{"axis", int64_t(3)}}).shape(), (std::vector<int64_t>{24, 1}));
  EXPECT_EQ(run1(OpKind::Flatten, {I(x)}, {{"axis", int64_t(-1)}}).shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Flatten, {I(x)}, {{"axis", int64_t(4)}}), "out of range");
}

TEST(RefTensorSqueeze, WithAndWithoutAxes) {
  Tensor x = tensor<bool>({true, false, true}, {1, 3, 1});
  Tensor y = run1(OpKind::Squeeze, {I(x)});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(values<bool>(y), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(run_both(OpKind::Squeeze, {x, i64({-1})}).shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Squeeze, {I(x), C(i64({1}))}), "not 1");
  EXPECT_CUVIL_ERROR(run1(OpKind::Squeeze, {I(x), C(i64({3}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::Squeeze, {I(x), C(i64({0, -3}))}), "twice");
}

TEST(RefTensorUnsqueeze, UnsortedNegativeAndDuplicates) {
  Tensor x = Tensor::zeros(DType::i8, {3, 4});
  EXPECT_EQ(run_both(OpKind::Unsqueeze, {x, i64({3, 0})}).shape(), (std::vector<int64_t>{1, 3, 4, 1}));
  EXPECT_EQ(run_both(OpKind::Unsqueeze, {x, i64({-1})}).shape(), (std::vector<int64_t>{3, 4, 1}));
  EXPECT_EQ(run_both(OpKind::Unsqueeze, {Tensor::scalar<float>(2), i64({0})}).shape(), (std::vector<int64_t>{1}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Unsqueeze, {I(x), C(i64({1, -3}))}), "twice");
  EXPECT_CUVIL_ERROR(run1(OpKind::Unsqueeze, {I(x), C(i64({3, 4}))}), "out of range");
}

// ---- symbolic shape arithmetic

TEST(RefTensorSymbolic, ReshapeOfShapeSliceConcatKeepsBatch) {
  Graph g;
  Dim b = Dim::symbol("batch"), h = Dim::symbol("h"), w = Dim::symbol("w");
  Value* x = g.add_input("x", {DType::f32, Shape({b, Dim(3), h, w})});
  Value* shp = g.add_node(OpKind::Shape, {x}, {"shp"})->output(0);
  Value* head = g.add_node(OpKind::Slice, {shp, g.add_constant("st", i64({0})), g.add_constant("en", i64({1}))},
                           {"head"})->output(0);
  Value* tgt = g.add_node(OpKind::Concat, {head, g.add_constant("m1", i64({-1}))}, {"tgt"}, {{"axis", int64_t(0)}})
                   ->output(0);
  Value* y = g.add_node(OpKind::Reshape, {x, tgt}, {"y"})->output(0);
  g.add_output(y);
  infer_shapes(g);
  EXPECT_EQ(y->shape(), Shape({b, Dim(3) * h * w})) << y->shape().str();
}

TEST(RefTensorSymbolic, GatherUnsqueezeConcatAndCancellation) {
  auto g = std::make_shared<Graph>();
  Dim b = Dim::symbol("b"), s = Dim::symbol("s");
  Value* x = g->add_input("x", {DType::f32, Shape({b, s, Dim(768)})});
  Value* shp = g->add_node(OpKind::Shape, {x}, {"shp"})->output(0);
  auto dim_of = [&](int64_t i, const std::string& n) {
    Value* d = g->add_node(OpKind::Gather, {shp, g->add_constant(n + "_i", Tensor::scalar<int64_t>(i))}, {n})
                   ->output(0);
    return g->add_node(OpKind::Unsqueeze, {d, g->add_constant(n + "_ax", i64({0}))}, {n + "_u"})->output(0);
  };
  Value* bs = g->add_node(OpKind::Concat, {dim_of(0, "d0"), dim_of(1, "d1"), g->add_constant("tail", i64({12, -1}))},
                          {"bs"}, {{"axis", int64_t(0)}})->output(0);
  // [b, s, 768] -> [b*s, 768] -> [b, s, 12, -1]: the -1 is 64 once b*s cancels against b and s.
  Value* flat = g->add_node(OpKind::Reshape, {x, g->add_constant("f", i64({-1, 768}))}, {"flat"})->output(0);
  Value* y = g->add_node(OpKind::Reshape, {flat, bs}, {"y"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  EXPECT_EQ(flat->shape(), Shape({b * s, Dim(768)})) << flat->shape().str();
  EXPECT_EQ(y->shape(), Shape({b, s, Dim(12), Dim(64)})) << y->shape().str();
  Executor ex(g, reference_kernels());
  auto out = ex.run({Tensor::zeros(DType::f32, {2, 5, 768})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 5, 12, 64}));
  // Every intermediate size was known symbolically and planned; only the graph output lives outside the arena.
  EXPECT_EQ(ex.stats().dynamic_bytes, int64_t(out[0].nbytes()));
}

TEST(RefTensorSymbolic, SliceFlattenRangeExpand) {
  auto g = std::make_shared<Graph>();
  Dim b = Dim::symbol("b"), s = Dim::symbol("s");
  Value* x = g->add_input("x", {DType::f32, Shape({b, s, Dim(4)})});
  auto cst = [&](const char* n, Tensor t) { return g->add_constant(n, std::move(t)); };
  // x[:, 1:] and x[:, -2:]
  Value* tail = g->add_node(OpKind::Slice, {x, cst("s1", i64({1})), cst("e1", i64({INT64_MAX})), cst("a1", i64({1}))},
                            {"tail"})->output(0);
  Value* last2 = g->add_node(OpKind::Slice, {x, cst("s2", i64({-2})), cst("e2", i64({INT64_MAX})), cst("a2", i64({1}))},
                             {"last2"})->output(0);
  Value* fl = g->add_node(OpKind::Flatten, {x}, {"fl"})->output(0);
  // position ids: Range(0, s, 1) expanded to [b, s]
  Value* shp = g->add_node(OpKind::Shape, {x}, {"shp"})->output(0);
  Value* sdim = g->add_node(OpKind::Gather, {shp, cst("one", Tensor::scalar<int64_t>(1))}, {"sdim"})->output(0);
  Value* pos = g->add_node(OpKind::Range, {cst("z", Tensor::scalar<int64_t>(0)), sdim, cst("d", Tensor::scalar<int64_t>(1))},
                           {"pos"})->output(0);
  Value* bsz = g->add_node(OpKind::Shape, {x}, {"bsz"}, {{"end", int64_t(2)}})->output(0);
  Value* ex_pos = g->add_node(OpKind::Expand, {pos, bsz}, {"ex_pos"})->output(0);
  for (Value* v : {tail, last2, fl, pos, ex_pos}) g->add_output(v);
  infer_shapes(*g);
  EXPECT_EQ(tail->shape(), Shape({b, Dim::max(s - Dim(1), Dim(0)), Dim(4)})) << tail->shape().str();
  EXPECT_EQ(last2->shape(), Shape({b, Dim::min(Dim(2), s), Dim(4)})) << last2->shape().str();
  EXPECT_EQ(fl->shape(), Shape({b, s * Dim(4)})) << fl->shape().str();
  EXPECT_EQ(pos->shape(), Shape({s})) << pos->shape().str();
  EXPECT_EQ(ex_pos->shape(), Shape({b, s})) << ex_pos->shape().str();
  Executor ex(g, reference_kernels());
  for (int64_t sv : {int64_t(1), int64_t(3)}) {
    auto out = ex.run({Tensor::zeros(DType::f32, {2, sv, 4})});
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, sv - 1, 4}));
    EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, std::min<int64_t>(2, sv), 4}));
    EXPECT_EQ(out[4].shape(), (std::vector<int64_t>{2, sv}));
    EXPECT_EQ(values<int64_t>(out[4]).back(), sv - 1);
  }
}

TEST(RefTensorSymbolic, UnknownValuesGiveFreshDimsAndRunCorrectly) {
  // Shapes that arrive as run-time inputs: inference makes fresh dims, the runtime sizes them.
  OneOp op(OpKind::Reshape, {I(f32({1, 2, 3, 4, 5, 6}, {6})), I(i64({3, 2}))});
  op.infer();
  ASSERT_EQ(op.type().shape.rank(), 2u);
  EXPECT_FALSE(op.type().shape[0].is_const());
  EXPECT_EQ(op.run()[0].shape(), (std::vector<int64_t>{3, 2}));
  // Squeeze without axes over a symbolic dim: the rank is unknown until run time.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim::symbol("n"), Dim(1)})});
  Value* y = g->add_node(OpKind::Squeeze, {x}, {"y"})->output(0);
  g->add_output(y);
  infer_shapes(*g);
  EXPECT_FALSE(y->shape().rank_known());
  Executor ex(g, reference_kernels());
  EXPECT_EQ(ex.run({Tensor::zeros(DType::f32, {1, 1})})[0].rank(), 0u);
  EXPECT_EQ(ex.run({Tensor::zeros(DType::f32, {4, 1})})[0].shape(), (std::vector<int64_t>{4}));
}

// ---- Shape, Size

TEST(RefTensorShape, StartEndClampAndSize) {
  Tensor x = Tensor::zeros(DType::bf16, {2, 3, 4});
  EXPECT_EQ(values<int64_t>(run1(OpKind::Shape, {I(x)})), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Shape, {I(x)}, {{"start", int64_t(-10)}, {"end", int64_t(-1)}})),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(run1(OpKind::Shape, {I(x)}, {{"start", int64_t(2)}, {"end", int64_t(1)}}).numel(), 0);
  EXPECT_EQ(values<int64_t>(run1(OpKind::Shape, {I(Tensor::scalar<float>(1))})), (std::vector<int64_t>{}));
  Tensor n = run1(OpKind::Size, {I(x)});
  EXPECT_EQ(n.rank(), 0u);
  EXPECT_EQ(values<int64_t>(n), (std::vector<int64_t>{24}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Size, {I(Tensor::zeros(DType::u64, {3, 0}))})), (std::vector<int64_t>{0}));
}

// ---- Transpose, Concat, Split, Slice

TEST(RefTensorTranspose, PermDefaultAndDtypes) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = float(i);
  Tensor x = f32(v, {2, 3, 4});
  Tensor y = run1(OpKind::Transpose, {I(x)}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{3, 4, 2}));
  // y[i][j][k] = x[k][i][j]
  EXPECT_EQ(values<float>(y)[size_t((1 * 4 + 2) * 2 + 1)], v[size_t(1 * 12 + 1 * 4 + 2)]);
  Tensor h = tensor<f16_t>({f16_t(1.f), f16_t(2.f), f16_t(3.f), f16_t(-0.f), f16_t(kNaN), f16_t(kInf)}, {2, 3});
  Tensor t = run1(OpKind::Transpose, {I(h)});
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(float(t.data<f16_t>()[1]), -0.f);
  EXPECT_TRUE(std::signbit(float(t.data<f16_t>()[1])));
  EXPECT_TRUE(std::isnan(float(t.data<f16_t>()[3])));
  EXPECT_EQ(run1(OpKind::Transpose, {I(Tensor::zeros(DType::i64, {0, 5}))}).shape(), (std::vector<int64_t>{5, 0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Transpose, {I(x)}, {{"perm", std::vector<int64_t>{0, 0, 1}}}), "permutation");
  EXPECT_CUVIL_ERROR(run1(OpKind::Transpose, {I(x)}, {{"perm", std::vector<int64_t>{0, 1}}}), "rank");
}

TEST(RefTensorConcat, NegativeAxisEmptyInputsAndErrors) {
  Tensor a = tensor<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = tensor<int32_t>({5, 6}, {2, 1});
  Tensor e = Tensor::zeros(DType::i32, {2, 0});
  Tensor y = run1(OpKind::Concat, {I(a), I(e), I(b)}, {{"axis", int64_t(-1)}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{1, 2, 5, 3, 4, 6}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Concat, {I(a), I(b)}, {{"axis", int64_t(0)}}), "other than the axis");
  EXPECT_CUVIL_ERROR(run1(OpKind::Concat, {I(a), I(f32({1, 2}, {2, 1}))}, {{"axis", int64_t(1)}}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::Concat, {I(a), I(b)}, {{"axis", int64_t(2)}}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::Concat, {I(a)}), "axis");  // required attribute
}

TEST(RefTensorSplit, EqualVariableZeroAndErrors) {
  Tensor x = tensor<uint16_t>({1, 2, 3, 4, 5, 6}, {6});
  auto eq = run(OpKind::Split, {I(x)}, {}, 3);
  EXPECT_EQ(values<uint16_t>(eq[2]), (std::vector<uint16_t>{5, 6}));
  auto var = run(OpKind::Split, {I(x), C(i64({1, 0, 5}))}, {{"axis", int64_t(-1)}}, 3);
  EXPECT_EQ(var[1].numel(), 0);
  EXPECT_EQ(values<uint16_t>(var[2]), (std::vector<uint16_t>{2, 3, 4, 5, 6}));
  auto rt = run(OpKind::Split, {I(x), I(i64({4, 2}))}, {}, 2);
  EXPECT_EQ(values<uint16_t>(rt[1]), (std::vector<uint16_t>{5, 6}));
  Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  auto cols = run(OpKind::Split, {I(m), C(i64({2, 1}))}, {{"axis", int64_t(1)}}, 2);
  EXPECT_EQ(values<float>(cols[0]), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(values<float>(cols[1]), (std::vector<float>{3, 6}));
  // More parts than inference tracks as a dims value, with sizes known only at run time.
  auto many = run(OpKind::Split, {I(Tensor::zeros(DType::f32, {140})), I(i64(std::vector<int64_t>(70, 2)))}, {}, 70);
  EXPECT_EQ(many[69].shape(), (std::vector<int64_t>{2}));
  EXPECT_CUVIL_ERROR(run(OpKind::Split, {I(x)}, {}, 4), "equal parts");
  EXPECT_CUVIL_ERROR(run(OpKind::Split, {I(x), C(i64({1, 2}))}, {}, 2), "add up to");
  EXPECT_CUVIL_ERROR(run(OpKind::Split, {I(x), I(i64({1, 2}))}, {}, 2), "add up to");
  EXPECT_CUVIL_ERROR(run(OpKind::Split, {I(x), C(i64({6}))}, {}, 2), "entries");
}

TEST(RefTensorSlice, StepsClampingAndEmpty) {
  Tensor x = tensor<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  auto sl = [&](int64_t s, int64_t e, int64_t st) {
    return values<int64_t>(run_both(OpKind::Slice, {x, i64({s}), i64({e}), i64({0}), i64({st})}));
  };
  EXPECT_EQ(sl(1, 8, 3), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(sl(-1, INT64_MIN, -3), (std::vector<int64_t>{9, 6, 3, 0}));
  EXPECT_EQ(sl(100, -100, -4), (std::vector<int64_t>{9, 5, 1}));
  EXPECT_EQ(sl(-100, 100, 1).size(), 10u);
  EXPECT_EQ(sl(5, 2, 1).size(), 0u);
  EXPECT_EQ(sl(2, 5, -1).size(), 0u);
  EXPECT_EQ(sl(0, INT64_MAX, INT64_MAX), (std::vector<int64_t>{0}));
  EXPECT_EQ(sl(9, -11, INT64_MIN), (std::vector<int64_t>{9}));
  // int32 starts/ends, default axes, a 2-D input sliced on its second axis through negative axes
  Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = run_both(OpKind::Slice, {m, tensor<int32_t>({2}, {1}), tensor<int32_t>({0}, {1}),
                                      tensor<int32_t>({-1}, {1}), tensor<int32_t>({-1}, {1})});
  EXPECT_EQ(values<float>(y), (std::vector<float>{3, 2, 6, 5}));
  // axes omitted, steps given
  EXPECT_EQ(values<float>(run1(OpKind::Slice, {I(m), C(i64({1, -1})), C(i64({2, INT64_MIN})), absent(), C(i64({1, -2}))})),
            (std::vector<float>{6, 4}));
  Tensor empty = Tensor::zeros(DType::f32, {0, 3});
  EXPECT_EQ(run_both(OpKind::Slice, {empty, i64({-1}), i64({0}), i64({0}), i64({-1})}).shape(),
            (std::vector<int64_t>{0, 3}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Slice, {I(x), C(i64({0})), C(i64({1})), C(i64({0})), C(i64({0}))}), "0");
  EXPECT_CUVIL_ERROR(run1(OpKind::Slice, {I(m), C(i64({0, 0})), C(i64({1, 1})), C(i64({1, -1}))}), "twice");
  EXPECT_CUVIL_ERROR(run1(OpKind::Slice, {I(m), C(i64({0})), C(i64({1, 1}))}), "entries");
  EXPECT_CUVIL_ERROR(run1(OpKind::Slice, {I(x), C(i64({0})), C(tensor<int32_t>({1}, {1}))}), "dtype");
}

// ---- gathers

TEST(RefTensorGather, AxesNegativeIndicesAndBounds) {
  Tensor d = tensor<bool>({true, false, false, true, true, true}, {3, 2});
  Tensor y = run_both(OpKind::Gather, {d, tensor<int32_t>({-1, 0}, {2})});
  EXPECT_EQ(values<bool>(y), (std::vector<bool>{true, true, true, false}));
  Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = run_both(OpKind::Gather, {m, Tensor::scalar<int64_t>(-1)}, {{"axis", int64_t(1)}});
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values<float>(c), (std::vector<float>{3, 6}));
  Tensor idx2 = tensor<int64_t>({0, 2, 1, 1}, {2, 2});
  EXPECT_EQ(run1(OpKind::Gather, {I(m), I(idx2)}, {{"axis", int64_t(-1)}}).shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(run1(OpKind::Gather, {I(m), I(Tensor::zeros(DType::i64, {0}))}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Gather, {I(m), I(i64({2}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::Gather, {I(m), I(i64({-3}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::Gather, {I(m), I(f32({0}, {1}))}), "dtype");
}

TEST(RefTensorGatherElements, AxisAndBounds) {
  Tensor d = tensor<int8_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  Tensor y = run1(OpKind::GatherElements, {I(d), I(tensor<int32_t>({-1, 0, 1, 2}, {2, 2}))}, {{"axis", int64_t(1)}});
  EXPECT_EQ(values<int8_t>(y), (std::vector<int8_t>{3, 1, 5, 6}));
  Tensor z = run1(OpKind::GatherElements, {I(d), I(tensor<int64_t>({2, 0, 1}, {1, 3}))});
  EXPECT_EQ(values<int8_t>(z), (std::vector<int8_t>{7, 2, 6}));
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherElements, {I(d), I(tensor<int64_t>({3}, {1, 1}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherElements, {I(d), I(tensor<int64_t>({0, 0, 0, 0}, {4, 1}))},
                          {{"axis", int64_t(1)}}),
                     "larger");
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherElements, {I(d), I(i64({0}))}), "rank");
}

TEST(RefTensorGatherND, BatchDimsAndBounds) {
  Tensor d = tensor<double>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  Tensor y = run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({1, 0}, {2, 1}))}, {{"batch_dims", int64_t(1)}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<double>(y), (std::vector<double>{2, 3, 4, 5}));
  Tensor z = run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({0, 1, -1, 0}, {2, 2}))});
  EXPECT_EQ(values<double>(z), (std::vector<double>{2, 3, 4, 5}));
  Tensor full = run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({1, 1, 1}, {1, 3}))});
  EXPECT_EQ(values<double>(full), (std::vector<double>{7}));
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({2}, {1, 1}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({0, 0, 0, 0}, {1, 4}))}), "last dim");
  EXPECT_CUVIL_ERROR(run1(OpKind::GatherND, {I(d), I(tensor<int64_t>({0}, {1, 1}))}, {{"batch_dims", int64_t(2)}}),
                     "batch_dims");
}

// ---- scatters

TEST(RefTensorScatterElements, ReductionsDtypesAndBounds) {
  Tensor d = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor idx = tensor<int64_t>({0, -1, 0}, {1, 3});
  Tensor upd = f32({10, 20, 30}, {1, 3});
  auto sc = [&](const char* red) {
    return values<float>(run1(OpKind::ScatterElements, {I(d), I(idx), I(upd)},
                              {{"axis", int64_t(1)}, {"reduction", std::string(red)}}));
  };
  // Row 0, columns 0, 2, 0: duplicate column 0 accumulates under add/mul.
  EXPECT_EQ(sc("none"), (std::vector<float>{30, 2, 20, 4, 5, 6}));
  EXPECT_EQ(sc("add"), (std::vector<float>{41, 2, 23, 4, 5, 6}));
  EXPECT_EQ(sc("mul"), (std::vector<float>{300, 2, 60, 4, 5, 6}));
  Tensor hb = tensor<bf16_t>({bf16_t(1.f), bf16_t(2.f)}, {2});
  Tensor hy = run1(OpKind::ScatterElements, {I(hb), I(i64({1})), I(tensor<bf16_t>({bf16_t(0.5f)}, {1}))},
                   {{"reduction", std::string("add")}});
  EXPECT_EQ(float(hy.data<bf16_t>()[1]), 2.5f);
  Tensor bb = run1(OpKind::ScatterElements, {I(tensor<bool>({false, true}, {2})), I(i64({0, 1})),
                                             I(tensor<bool>({true, false}, {2}))},
                   {{"reduction", std::string("mul")}});
  EXPECT_EQ(values<bool>(bb), (std::vector<bool>{false, false}));
  EXPECT_CUVIL_ERROR(run1(OpKind::ScatterElements, {I(d), I(tensor<int64_t>({3}, {1, 1})), I(f32({1}, {1, 1}))},
                          {{"axis", int64_t(1)}}),
                     "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ScatterElements, {I(d), I(idx), I(upd)}, {{"reduction", std::string("mean")}}),
                     "reduction");
  // Opset 18's max and min: numpy's maximum/minimum of what is there and each update in turn, NaN winning.
  Tensor mx = run1(OpKind::ScatterElements,
                   {I(f32({1, 5, 2}, {3})), I(i64({0, 0, 2, 1})), I(f32({3, -1, 0, NAN}, {4}))},
                   {{"reduction", std::string("max")}});
  EXPECT_EQ(values<float>(mx)[0], 3.f);
  EXPECT_TRUE(std::isnan(values<float>(mx)[1]));
  EXPECT_EQ(values<float>(mx)[2], 2.f);
  Tensor mn = run1(OpKind::ScatterND, {I(i64({4, 5, 6})), I(tensor<int64_t>({0, 2, 0}, {3, 1})), I(i64({7, 1, 2}))},
                   {{"reduction", std::string("min")}});
  EXPECT_EQ(values<int64_t>(mn), (std::vector<int64_t>{2, 5, 1}));
  EXPECT_CUVIL_ERROR(run1(OpKind::ScatterElements, {I(d), I(idx), I(f32({1, 2}, {1, 2}))}), "shape");
}

TEST(RefTensorScatterND, SlicesReductionsAndBounds) {
  Tensor d = tensor<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor y =
      run1(OpKind::ScatterND, {I(d), I(tensor<int64_t>({-1, 0}, {2, 1})), I(tensor<int32_t>({7, 8, 9, 10}, {2, 2}))});
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{9, 10, 3, 4, 7, 8}));
  Tensor a = run1(OpKind::ScatterND,
                  {I(d), I(tensor<int64_t>({1, 1, 1, 1}, {2, 2})), I(tensor<int32_t>({10, 100}, {2}))},
                  {{"reduction", std::string("add")}});
  EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{1, 2, 3, 114, 5, 6}));
  Tensor m = run1(OpKind::ScatterND, {I(d), I(tensor<int64_t>({0, 0, 0, 0}, {2, 2})), I(tensor<int32_t>({3, 5}, {2}))},
                  {{"reduction", std::string("mul")}});
  EXPECT_EQ(values<int32_t>(m)[0], 15);
  EXPECT_CUVIL_ERROR(
      run1(OpKind::ScatterND, {I(d), I(tensor<int64_t>({3}, {1, 1})), I(tensor<int32_t>({0, 0}, {1, 2}))}),
      "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ScatterND, {I(d), I(tensor<int64_t>({0}, {1, 1})), I(tensor<int32_t>({0}, {1, 1}))}),
                     "shape");
}

// ---- Expand, Tile, Pad

TEST(RefTensorExpand, BroadcastBothWays) {
  Tensor x = tensor<uint8_t>({1, 2, 3}, {3, 1});
  Tensor y = run_both(OpKind::Expand, {x, i64({2, 1, 2})});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(values<uint8_t>(y), (std::vector<uint8_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  // A shape of lower rank or with 1s keeps the input's dims.
  EXPECT_EQ(run_both(OpKind::Expand, {x, i64({1})}).shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(run_both(OpKind::Expand, {x, i64({0})}).shape(), (std::vector<int64_t>{3, 0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Expand, {I(x), C(i64({2, 2}))}), "broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::Expand, {I(x), I(i64({2, 2}))}), "broadcast");
}

TEST(RefTensorTile, RepeatsIncludingZero) {
  Tensor x = tensor<int16_t>({1, 2, 3, 4}, {2, 2});
  Tensor y = run_both(OpKind::Tile, {x, i64({1, 2})});
  EXPECT_EQ(values<int16_t>(y), (std::vector<int16_t>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(run_both(OpKind::Tile, {x, i64({0, 3})}).shape(), (std::vector<int64_t>{0, 6}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Tile, {I(x), C(i64({2}))}), "one per dim");
  EXPECT_CUVIL_ERROR(run1(OpKind::Tile, {I(x), C(i64({1, -1}))}), ">= 0");
}

TEST(RefTensorPad, ModesValuesNegativePads) {
  Tensor x = f32({1, 2, 3}, {1, 3});
  auto pad = [&](std::vector<int64_t> p, const char* mode) {
    return values<float>(run_both(OpKind::Pad, {x, i64(std::move(p))}, {{"mode", std::string(mode)}}));
  };
  EXPECT_EQ(pad({0, 2, 0, 1}, "constant"), (std::vector<float>{0, 0, 1, 2, 3, 0}));
  EXPECT_EQ(pad({0, 2, 0, 1}, "edge"), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(pad({0, 2, 0, 1}, "reflect"), (std::vector<float>{3, 2, 1, 2, 3, 2}));
  // wider than the axis: keeps reflecting (numpy's behaviour)
  EXPECT_EQ(pad({0, 4, 0, 0}, "reflect"), (std::vector<float>{1, 2, 3, 2, 1, 2, 3}));
  EXPECT_EQ(pad({0, -1, 0, 1}, "constant"), (std::vector<float>{2, 3, 0}));
  Tensor v = run1(OpKind::Pad, {I(x), C(i64({1, 0, 0, 0})), C(f32({kNaN}, {}))});
  EXPECT_TRUE(std::isnan(values<float>(v)[0]));
  Tensor iv = run1(OpKind::Pad, {I(tensor<int32_t>({5}, {1})), C(i64({1, 1})), C(Tensor::scalar<int32_t>(-7))});
  EXPECT_EQ(values<int32_t>(iv), (std::vector<int32_t>{-7, 5, -7}));
  Tensor e = Tensor::zeros(DType::f32, {0, 2});
  EXPECT_EQ(run1(OpKind::Pad, {I(e), C(i64({1, 0, 1, 0}))}).shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Pad, {I(e), C(i64({1, 0, 1, 0}))}, {{"mode", std::string("edge")}}), "empty");
  EXPECT_CUVIL_ERROR(run1(OpKind::Pad, {I(x), C(i64({0, -2, 0, -2}))}), "remove");
  EXPECT_CUVIL_ERROR(run1(OpKind::Pad, {I(x), C(i64({0, 1}))}), "needs 4");
  EXPECT_CUVIL_ERROR(run1(OpKind::Pad, {I(x), C(i64({0, 1, 0, 1}))}, {{"mode", std::string("mirror")}}), "mode");
  // Pad-19's wrap repeats the input; Pad-18's axes pad only the axes listed (here the last, by a negative axis).
  Tensor row = f32({1, 2, 3}, {1, 3});
  EXPECT_EQ(values<float>(run1(OpKind::Pad, {I(row), C(i64({0, 2, 0, 4}))}, {{"mode", std::string("wrap")}})),
            (std::vector<float>{2, 3, 1, 2, 3, 1, 2, 3, 1}));
  Tensor ax = run1(OpKind::Pad, {I(row), C(i64({1, 0})), C(f32({9}, {})), C(i64({-1}))});
  EXPECT_EQ(ax.shape(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(values<float>(ax), (std::vector<float>{9, 1, 2, 3}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Pad, {I(x), C(i64({0, 1, 0, 1})), C(Tensor::scalar<double>(1))}), "dtype");
}

// ---- generators

TEST(RefTensorRange, FloatIntEmptyAndZeroDelta) {
  Tensor f = run_both(OpKind::Range, {Tensor::scalar<float>(1), Tensor::scalar<float>(2), Tensor::scalar<float>(0.25f)});
  EXPECT_EQ(values<float>(f), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  Tensor i = run_both(OpKind::Range, {Tensor::scalar<int16_t>(10), Tensor::scalar<int16_t>(3),
                                      Tensor::scalar<int16_t>(-3)});
  EXPECT_EQ(values<int16_t>(i), (std::vector<int16_t>{10, 7, 4}));
  EXPECT_EQ(run_both(OpKind::Range, {Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(1),
                                     Tensor::scalar<int64_t>(1)})
                .numel(),
            0);
  EXPECT_CUVIL_ERROR(run1(OpKind::Range, {I(Tensor::scalar<int32_t>(0)), I(Tensor::scalar<int32_t>(3)),
                                          I(Tensor::scalar<int32_t>(0))}),
                     "delta");
  EXPECT_CUVIL_ERROR(run1(OpKind::Range, {I(Tensor::scalar<float>(0)), I(Tensor::scalar<float>(kInf)),
                                          I(Tensor::scalar<float>(1))}),
                     "finite");
  EXPECT_CUVIL_ERROR(run1(OpKind::Range, {I(Tensor::scalar<int32_t>(0)), I(Tensor::scalar<int64_t>(3)),
                                          I(Tensor::scalar<int32_t>(1))}),
                     "dtype");
}

TEST(RefTensorConstantOfShape, DefaultValueIntValueAndEmpty) {
  Tensor z = run_both(OpKind::ConstantOfShape, {i64({2, 3})});
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(values<float>(z), std::vector<float>(6, 0.f));
  Tensor o = run1(OpKind::ConstantOfShape, {I(i64({4}))}, {{"value", tensor<int32_t>({-3}, {1})}});
  EXPECT_EQ(values<int32_t>(o), std::vector<int32_t>(4, -3));
  EXPECT_EQ(run1(OpKind::ConstantOfShape, {I(i64({0, 5}))}).numel(), 0);
  EXPECT_EQ(run1(OpKind::ConstantOfShape, {I(i64({}))}).rank(), 0u);
  EXPECT_CUVIL_ERROR(run1(OpKind::ConstantOfShape, {I(i64({-1}))}), "negative");
}

TEST(RefTensorEyeLike, OffDiagonalsAndDtype) {
  Tensor x = Tensor::zeros(DType::i32, {3, 4});
  EXPECT_EQ(values<int32_t>(run1(OpKind::EyeLike, {I(x)}, {{"k", int64_t(1)}})),
            (std::vector<int32_t>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  Tensor b = run1(OpKind::EyeLike, {I(x)}, {{"k", int64_t(-2)}, {"dtype", int64_t(9)}});
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(values<bool>(b), (std::vector<bool>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(values<float>(run1(OpKind::EyeLike, {I(x)}, {{"k", int64_t(9)}, {"dtype", int64_t(1)}})),
            std::vector<float>(12, 0.f));
  EXPECT_CUVIL_ERROR(run1(OpKind::EyeLike, {I(Tensor::zeros(DType::f32, {3}))}), "2-D");
  EXPECT_CUVIL_ERROR(run1(OpKind::EyeLike, {I(x)}, {{"dtype", int64_t(8)}}), "dtype");
}

TEST(RefTensorTrilu, UpperLowerKBatchAndSpecialValues) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, kNaN, -0.f, kInf, 7, 8, 9}, {2, 2, 3});
  Tensor u = run1(OpKind::Trilu, {I(x)});
  EXPECT_EQ(values<float>(u)[3], 0.f);
  EXPECT_TRUE(std::isnan(values<float>(u)[6]));
  Tensor l = run1(OpKind::Trilu, {I(x), C(Tensor::scalar<int64_t>(-1))}, {{"upper", int64_t(0)}});
  EXPECT_EQ(values<float>(l), (std::vector<float>{0, 0, 0, 4, 0, 0, 0, 0, 0, 7, 0, 0}));
  Tensor k = run1(OpKind::Trilu, {I(x), I(Tensor::scalar<int64_t>(2))});
  EXPECT_EQ(values<float>(k), (std::vector<float>{0, 0, 3, 0, 0, 0, 0, 0, kInf, 0, 0, 0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Trilu, {I(f32({1}, {1}))}), "rank");
}

TEST(RefTensorOneHot, AxisNegativeAndOutOfRange) {
  Tensor idx = tensor<float>({0, -1, 3, 1.9f}, {4});
  Tensor vals = tensor<int64_t>({5, 9}, {2});
  Tensor y = run_both(OpKind::OneHot, {idx, Tensor::scalar<int32_t>(3), vals});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{9, 5, 5, 5, 5, 9, 5, 5, 5, 5, 9, 5}));
  Tensor a = run1(OpKind::OneHot, {I(tensor<int64_t>({1, 0}, {2})), C(Tensor::scalar<int64_t>(2)), I(vals)},
                  {{"axis", int64_t(0)}});
  EXPECT_EQ(values<int64_t>(a), (std::vector<int64_t>{5, 9, 9, 5}));
  Tensor nan = run1(OpKind::OneHot, {I(f32({kNaN}, {1})), C(Tensor::scalar<int64_t>(2)), I(vals)});
  EXPECT_EQ(values<int64_t>(nan), (std::vector<int64_t>{5, 5}));
  EXPECT_CUVIL_ERROR(run1(OpKind::OneHot, {I(idx), C(Tensor::scalar<int64_t>(0)), I(vals)}), "depth");
  EXPECT_CUVIL_ERROR(run1(OpKind::OneHot, {I(idx), C(Tensor::scalar<int64_t>(2)), I(vals)}, {{"axis", int64_t(2)}}),
                     "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::OneHot, {I(idx), C(Tensor::scalar<int64_t>(2)), I(i64({1, 2, 3}))}), "values");
}

// ---- data-dependent sizes

TEST(RefTensorNonZero, NaNScalarAndEmpty) {
  Tensor x = f32({0, kNaN, -0.f, 3}, {2, 2});
  Tensor y = run1(OpKind::NonZero, {I(x)});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(run1(OpKind::NonZero, {I(Tensor::scalar<int32_t>(5))}).shape(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(run1(OpKind::NonZero, {I(Tensor::zeros(DType::boolean, {3, 0}))}).shape(), (std::vector<int64_t>{2, 0}));
}

TEST(RefTensorCompress, AxisFlatShortConditionAndErrors) {
  Tensor x = tensor<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(values<int64_t>(run1(OpKind::Compress, {I(x), I(tensor<bool>({false, true, true}, {3}))},
                                 {{"axis", int64_t(0)}})),
            (std::vector<int64_t>{3, 4, 5, 6}));
  EXPECT_EQ(
      values<int64_t>(run1(OpKind::Compress, {I(x), I(tensor<bool>({false, true}, {2}))}, {{"axis", int64_t(-1)}})),
      (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Compress, {I(x), I(tensor<bool>({true, false, false, true}, {4}))})),
            (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(run1(OpKind::Compress, {I(x), I(tensor<bool>({false}, {1}))}, {{"axis", int64_t(1)}}).shape(),
            (std::vector<int64_t>{3, 0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Compress, {I(x), I(tensor<bool>({0, 0, 1}, {3}))}, {{"axis", int64_t(1)}}), "past");
  EXPECT_CUVIL_ERROR(run1(OpKind::Compress, {I(x), I(i64({1}))}), "dtype");
}

TEST(RefTensorUnique, SortedUnsortedAxisAndSpecialValues) {
  Tensor x = f32({2, kNaN, 1, -0.f, 0, kNaN, 1}, {7});
  auto r = run(OpKind::Unique, {I(x)}, {}, 4);
  std::vector<float> y = values<float>(r[0]);
  ASSERT_EQ(y.size(), 4u);  // -0 == 0 and NaNs collapse, as in numpy
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[2], 2.f);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(values<int64_t>(r[1]), (std::vector<int64_t>{3, 2, 0, 1}));
  EXPECT_EQ(values<int64_t>(r[2]), (std::vector<int64_t>{2, 3, 1, 0, 0, 3, 1}));
  EXPECT_EQ(values<int64_t>(r[3]), (std::vector<int64_t>{2, 2, 1, 2}));
  auto u = run(OpKind::Unique, {I(tensor<uint8_t>({5, 3, 5, 1}, {4}))}, {{"sorted", int64_t(0)}}, 4);
  EXPECT_EQ(values<uint8_t>(u[0]), (std::vector<uint8_t>{5, 3, 1}));
  EXPECT_EQ(values<int64_t>(u[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(values<int64_t>(u[2]), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(values<int64_t>(u[3]), (std::vector<int64_t>{2, 1, 1}));
  // unique columns of a 2x3 matrix
  auto a = run(OpKind::Unique, {I(tensor<int32_t>({1, 0, 1, 2, 3, 2}, {2, 3}))}, {{"axis", int64_t(-1)}}, 3);
  EXPECT_EQ(a[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int32_t>(a[0]), (std::vector<int32_t>{0, 1, 3, 2}));
  EXPECT_EQ(values<int64_t>(a[2]), (std::vector<int64_t>{1, 0, 1}));
  auto e = run(OpKind::Unique, {I(Tensor::zeros(DType::f32, {0}))}, {}, 2);
  EXPECT_EQ(e[0].numel(), 0);
  EXPECT_EQ(e[1].numel(), 0);
  EXPECT_CUVIL_ERROR(run(OpKind::Unique, {I(x)}, {{"axis", int64_t(1)}}), "out of range");
}

// ---- layout rearrangements

TEST(RefTensorDepthToSpace, ModesAndRoundTrip) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = float(i);
  Tensor x = f32(v, {1, 4, 2, 2});
  Tensor dcr = run1(OpKind::DepthToSpace, {I(x)}, {{"blocksize", int64_t(2)}});
  EXPECT_EQ(dcr.shape(), (std::vector<int64_t>{1, 1, 4, 4}));
  EXPECT_EQ(values<float>(dcr), (std::vector<float>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  Tensor crd = run1(OpKind::DepthToSpace, {I(x)}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
  EXPECT_EQ(values<float>(crd), values<float>(dcr));  // identical when C / b^2 == 1
  Tensor back = run1(OpKind::SpaceToDepth, {I(dcr)}, {{"blocksize", int64_t(2)}});
  EXPECT_EQ(values<float>(back), v);
  // With 2 output channels the modes differ: CRD keeps each output channel's block contiguous.
  std::vector<int8_t> w(8 * 1 * 1);
  for (int i = 0; i < 8; ++i) w[size_t(i)] = int8_t(i);
  Tensor z = tensor<int8_t>(w, {1, 8, 1, 1});
  EXPECT_EQ(values<int8_t>(run1(OpKind::DepthToSpace, {I(z)}, {{"blocksize", int64_t(2)}})),
            (std::vector<int8_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(values<int8_t>(run1(OpKind::DepthToSpace, {I(z)}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}})),
            (std::vector<int8_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // SpaceToDepth CRD (opset 28) inverts DepthToSpace CRD.
  Tensor crd8 = run1(OpKind::DepthToSpace, {I(z)}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
  Tensor s2d = run1(OpKind::SpaceToDepth, {I(crd8)}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
  EXPECT_EQ(values<int8_t>(s2d), w);
  EXPECT_EQ(values<int8_t>(run1(OpKind::SpaceToDepth, {I(crd8)}, {{"blocksize", int64_t(2)}})),
            (std::vector<int8_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_CUVIL_ERROR(run1(OpKind::DepthToSpace, {I(f32({1, 2, 3}, {1, 3, 1, 1}))}, {{"blocksize", int64_t(2)}}),
                     "divisible");
  EXPECT_CUVIL_ERROR(run1(OpKind::SpaceToDepth, {I(f32({1, 2, 3}, {1, 1, 1, 3}))}, {{"blocksize", int64_t(2)}}),
                     "divisible");
  EXPECT_CUVIL_ERROR(run1(OpKind::SpaceToDepth, {I(x)}, {{"blocksize", int64_t(0)}}), "blocksize");
}

TEST(RefTensorReverseSequence, BothAxisOrdersAndBadLengths) {
  Tensor x = tensor<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3});
  // time_axis 1, batch_axis 0: reverse the first len[b] entries of each row
  Tensor y = run1(OpKind::ReverseSequence, {I(x), I(i64({3, 1, 2}))},
                  {{"time_axis", int64_t(1)}, {"batch_axis", int64_t(0)}});
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{2, 1, 0, 3, 4, 5, 7, 6, 8}));
  Tensor t = run1(OpKind::ReverseSequence, {I(x), I(i64({0, 2, 3}))});
  EXPECT_EQ(values<int32_t>(t), (std::vector<int32_t>{0, 4, 8, 3, 1, 5, 6, 7, 2}));
  EXPECT_CUVIL_ERROR(run1(OpKind::ReverseSequence, {I(x), I(i64({4, 1, 1}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReverseSequence, {I(x), I(i64({1, 1}))}), "batch");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReverseSequence, {I(x), I(i64({1, 1, 1}))}, {{"batch_axis", int64_t(0)}}),
                     "batch_axis");
}

// ---- ONNX converters of older opsets, on models encoded here (the unit tests do not link the ONNX protobufs)

namespace {

// A minimal protobuf writer: enough of the wire format to spell ONNX models.
struct Pb {
  std::string s;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      s += char(v | 0x80);
      v >>= 7;
    }
    s += char(v);
  }
  Pb& i(int field, int64_t v) {
    varint(uint64_t(field) << 3);
    varint(uint64_t(v));
    return *this;
  }
  Pb& f(int field, float v) {
    varint(uint64_t(field) << 3 | 5);
    char b[4];
    std::memcpy(b, &v, 4);
    s.append(b, 4);
    return *this;
  }
  Pb& bytes(int field, const std::string& v) {
    varint(uint64_t(field) << 3 | 2);
    varint(v.size());
    s += v;
    return *this;
  }
  Pb& msg(int field, const Pb& m) { return bytes(field, m.s); }
};

Pb attr_ints(const std::string& name, std::vector<int64_t> v) {
  Pb a;
  a.bytes(1, name).i(20, 7);
  for (int64_t x : v) a.i(8, x);
  return a;
}
Pb attr_int(const std::string& name, int64_t v) { return Pb().bytes(1, name).i(20, 2).i(3, v); }
Pb attr_float(const std::string& name, float v) { return Pb().bytes(1, name).i(20, 1).f(2, v); }

Pb node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, std::vector<Pb> attrs = {}) {
  Pb n;
  for (auto& x : ins) n.bytes(1, x);
  for (auto& x : outs) n.bytes(2, x);
  n.bytes(4, op);
  for (auto& a : attrs) n.msg(5, a);
  return n;
}

Pb value_info(const std::string& name, int elem_type, std::vector<int64_t> dims) {
  Pb shape;
  for (int64_t d : dims) shape.msg(1, Pb().i(1, d));
  Pb tensor_type = Pb().i(1, elem_type).msg(2, shape);
  return Pb().bytes(1, name).msg(2, Pb().msg(1, tensor_type));
}

Pb initializer(const std::string& name, const std::vector<int64_t>& v, std::vector<int64_t> dims) {
  Pb t;
  for (int64_t d : dims) t.i(1, d);
  t.i(2, 7);
  for (int64_t x : v) t.i(7, x);
  return t.bytes(8, name);
}

// One-output model: `nodes` in order, inputs (name, onnx elem type, dims), output `out`.
std::shared_ptr<Graph> model(int opset, std::vector<Pb> nodes, std::vector<Pb> inputs, const std::string& out,
                             std::vector<Pb> inits = {}) {
  Pb g;
  for (auto& n : nodes) g.msg(1, n);
  g.bytes(2, "g");
  for (auto& t : inits) g.msg(5, t);
  for (auto& in : inputs) g.msg(11, in);
  g.msg(12, Pb().bytes(1, out));
  Pb m;
  m.i(1, 7).msg(8, Pb().bytes(1, "").i(2, opset)).msg(7, g);
  return import_onnx_bytes(m.s.data(), m.s.size());
}

std::vector<float> run_model(const std::shared_ptr<Graph>& g, std::vector<Tensor> inputs) {
  Executor ex(g, reference_kernels());
  return values<float>(ex.run(inputs)[0]);
}

}  // namespace

TEST(RefTensorOnnxConverters, AttributesBecomeInputs) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  auto xin = value_info("x", 1, {2, 3});
  // Reshape-1 with the legacy consumed_inputs hint
  auto r = model(1, {node("Reshape", {"x"}, {"y"}, {attr_ints("shape", {3, -1}), attr_ints("consumed_inputs", {0})})},
                 {xin}, "y");
  EXPECT_EQ(r->outputs()[0]->shape(), Shape::of({3, 2}));
  // Unsqueeze-11 then Squeeze-11 with axes attributes
  auto sq = model(11, {node("Unsqueeze", {"x"}, {"u"}, {attr_ints("axes", {-1, 0})}),
                       node("Squeeze", {"u"}, {"y"}, {attr_ints("axes", {0})})},
                  {xin}, "y");
  EXPECT_EQ(sq->outputs()[0]->shape(), Shape::of({2, 3, 1}));
  // Split-11 with a split attribute
  auto sp = model(11, {node("Split", {"x"}, {"a", "b"}, {attr_int("axis", 1), attr_ints("split", {1, 2})})}, {xin}, "b");
  EXPECT_EQ(run_model(sp, {x}), (std::vector<float>{2, 3, 5, 6}));
  // Slice-1 with starts/ends/axes attributes
  auto sl = model(9, {node("Slice", {"x"}, {"y"}, {attr_ints("starts", {1}), attr_ints("ends", {100}),
                                                   attr_ints("axes", {-1})})},
                  {xin}, "y");
  EXPECT_EQ(run_model(sl, {x}), (std::vector<float>{2, 3, 5, 6}));
  // Pad-2 with pads and a nonzero value; Pad-1 spells it `paddings`
  auto pd = model(2, {node("Pad", {"x"}, {"y"}, {attr_ints("pads", {0, 1, 0, 0}), attr_float("value", 9)})}, {xin}, "y");
  EXPECT_EQ(run_model(pd, {x}), (std::vector<float>{9, 1, 2, 3, 9, 4, 5, 6}));
  auto p1 = model(1, {node("Pad", {"x"}, {"y"}, {attr_ints("paddings", {1, 0, 0, 0})})}, {xin}, "y");
  EXPECT_EQ(run_model(p1, {x}), (std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6}));
}

TEST(RefTensorOnnxConverters, LegacyDefaultsAndLowerings) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  auto xin = value_info("x", 1, {2, 3});
  // Concat-1 without axis concatenates on axis 1
  auto c = model(1, {node("Concat", {"x", "x"}, {"y"})}, {xin}, "y");
  EXPECT_EQ(c->outputs()[0]->shape(), Shape::of({2, 6}));
  // Tile-1 repeats along one axis
  auto t = model(1, {node("Tile", {"x", "tiles", "axis"}, {"y"})}, {xin}, "y",
                 {initializer("tiles", {2}, {}), initializer("axis", {1}, {})});
  EXPECT_EQ(run_model(t, {x}), (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  // Scatter-9 is ScatterElements
  auto s = model(9, {node("Scatter", {"x", "idx", "upd"}, {"y"}, {attr_int("axis", 1)})},
                 {xin, value_info("upd", 1, {1, 1})}, "y", {initializer("idx", {2}, {1, 1})});
  EXPECT_EQ(run_model(s, {x, f32({0}, {1, 1})}), (std::vector<float>{1, 2, 0, 4, 5, 6}));
  // OneHot-9: negative indices give all off_value (from opset 11 they count from the back)
  auto oh = model(9, {node("OneHot", {"i", "depth", "vals"}, {"y"})}, {value_info("i", 7, {3})}, "y",
                  {initializer("depth", {3}, {1}), initializer("vals", {0, 1}, {2})});
  Executor ex(oh, reference_kernels());
  auto y = ex.run({i64({-1, 2, 0})})[0];
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 0, 0}));
  auto oh11 = model(11, {node("OneHot", {"i", "depth", "vals"}, {"y"})}, {value_info("i", 7, {3})}, "y",
                    {initializer("depth", {3}, {1}), initializer("vals", {0, 1}, {2})});
  Executor ex11(oh11);
  EXPECT_EQ(values<int64_t>(ex11.run({i64({-1, 2, 0})})[0]), (std::vector<int64_t>{0, 0, 1, 0, 0, 1, 1, 0, 0}));
}

TEST(RefTensorOnnxConverters, BadLegacyAttributesAreErrors) {
  auto xin = value_info("x", 1, {2, 3});
  EXPECT_CUVIL_ERROR(model(1, {node("Reshape", {"x"}, {"y"})}, {xin}, "y"), "shape");
  EXPECT_CUVIL_ERROR(model(11, {node("Unsqueeze", {"x"}, {"y"})}, {xin}, "y"), "axes");
  EXPECT_CUVIL_ERROR(model(9, {node("Slice", {"x"}, {"y"}, {attr_ints("starts", {0})})}, {xin}, "y"), "ends");
  // From opset 13 axes is an input; the attribute is not part of the op any more.
  EXPECT_CUVIL_ERROR(model(13, {node("Squeeze", {"x"}, {"y"}, {attr_ints("axes", {0})})}, {xin}, "y"), "axes");
  EXPECT_CUVIL_ERROR(model(11, {node("Squeeze", {"x"}, {"y"}, {attr_int("axes", 0)})}, {xin}, "y"), "axes");
}
