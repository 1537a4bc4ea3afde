// The reduction family (Reduce*, ArgMax/ArgMin, softmax family, CumSum, TopK, normalizations, losses): shape
// inference, reference kernels and ONNX converters, on the edge cases the ONNX node suite does not cover.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

template <class T>
Tensor make(const std::vector<double>& v, std::vector<int64_t> shape) {
  std::vector<T> data;
  for (double x : v) {
    if constexpr (is_float_v<T>) data.push_back(T(compute_t<T>(x)));
    else data.push_back(T(x));
  }
  return Tensor::from_vector<T>(data, std::move(shape));
}
Tensor f32(const std::vector<double>& v, std::vector<int64_t> shape) { return make<float>(v, std::move(shape)); }
Tensor i64(const std::vector<double>& v, std::vector<int64_t> shape) { return make<int64_t>(v, std::move(shape)); }

Tensor run1(OpKind op, const std::vector<OpArg>& ins, AttrMap attrs = {}) {
  return run_op(op, ins, std::move(attrs))[0];
}

Tensor axes(std::vector<double> a) { return i64(a, {int64_t(a.size())}); }

}  // namespace

// ---- Reduce*

TEST(RefReduction, ReduceOpsOverOneAxis) {
  Tensor x = f32({1, -2, 3, 4, 5, -6}, {2, 3});
  OpArg ax = constant(axes({1}));
  expect_values(run1(OpKind::ReduceSum, {input(x), ax}), {2, 3});
  expect_values(run1(OpKind::ReduceMean, {input(x), ax}), {2.0 / 3, 1});
  expect_values(run1(OpKind::ReduceMax, {input(x), ax}), {3, 5});
  expect_values(run1(OpKind::ReduceMin, {input(x), ax}), {-2, -6});
  expect_values(run1(OpKind::ReduceProd, {input(x), ax}), {-6, -120});
  expect_values(run1(OpKind::ReduceL1, {input(x), ax}), {6, 15});
  expect_values(run1(OpKind::ReduceL2, {input(x), ax}), {std::sqrt(14.0), std::sqrt(77.0)});
  expect_values(run1(OpKind::ReduceSumSquare, {input(x), ax}), {14, 77});
  expect_values(run1(OpKind::ReduceLogSum, {input(x), ax}), {std::log(2.0), std::log(3.0)});
  expect_values(run1(OpKind::ReduceLogSumExp, {input(x), ax}),
                {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
                 std::log(std::exp(4.0) + std::exp(5.0) + std::exp(-6.0))});
  Tensor y = run1(OpKind::ReduceSum, {input(x), ax});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 1}));
}

TEST(RefReduction, ReduceKeepdimsNegativeAndMultipleAxes) {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = i;
  Tensor x = f32(v, {2, 3, 4});
  Tensor y = run1(OpKind::ReduceSum, {input(x), constant(axes({-1, 0}))}, {{"keepdims", int64_t(0)}});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3}));
  // sum over n and k of (n*12 + c*4 + k)
  expect_values(y, {0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 4 * 2 * 4 + 6 * 2 + 48, 8 * 2 * 4 + 6 * 2 + 48});
  Tensor m = run1(OpKind::ReduceMax, {input(x), constant(axes({1}))});
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{2, 1, 4}));
  expect_values(m, {8, 9, 10, 11, 20, 21, 22, 23});
}

TEST(RefReduction, ReduceEmptyAxesReducesAllOrNothing) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  Tensor all = run1(OpKind::ReduceSum, {input(x)});
  EXPECT_EQ(all.shape(), (std::vector<int64_t>{1, 1}));
  expect_values(all, {10});
  Tensor all2 = run1(OpKind::ReduceSum, {input(x), constant(axes({}))}, {{"keepdims", int64_t(0)}});
  EXPECT_EQ(all2.shape(), (std::vector<int64_t>{}));
  expect_values(all2, {10});
  Tensor same = run1(OpKind::ReduceMean, {input(x), constant(axes({}))}, {{"noop_with_empty_axes", int64_t(1)}});
  EXPECT_EQ(same.shape(), (std::vector<int64_t>{2, 2}));
  expect_values(same, {1, 2, 3, 4});
  // noop_with_empty_axes with no axes input at all
  expect_values(run1(OpKind::ReduceProd, {input(x)}, {{"noop_with_empty_axes", int64_t(1)}}), {1, 2, 3, 4});
}

TEST(RefReduction, ReduceOverAnEmptyDimGivesTheIdentity) {
  Tensor x = f32({}, {2, 0});
  OpArg ax = constant(axes({1}));
  expect_values(run1(OpKind::ReduceSum, {input(x), ax}), {0, 0});
  expect_values(run1(OpKind::ReduceProd, {input(x), ax}), {1, 1});
  expect_values(run1(OpKind::ReduceMax, {input(x), ax}), {-kInf, -kInf});
  expect_values(run1(OpKind::ReduceMin, {input(x), ax}), {kInf, kInf});
  expect_values(run1(OpKind::ReduceMean, {input(x), ax}), {kNaN, kNaN});
  expect_values(run1(OpKind::ReduceLogSumExp, {input(x), ax}), {-kInf, -kInf});
  expect_values(run1(OpKind::ReduceL2, {input(x), ax}), {0, 0});
  Tensor xi = make<int32_t>({}, {0, 3});
  Tensor mi = run1(OpKind::ReduceMax, {input(xi), constant(axes({0}))}, {{"keepdims", int64_t(0)}});
  EXPECT_EQ(mi.shape(), (std::vector<int64_t>{3}));
  expect_values(mi, {double(INT32_MIN), double(INT32_MIN), double(INT32_MIN)});
  expect_values(run1(OpKind::ReduceMean, {input(xi), constant(axes({0}))}), {0, 0, 0});
  // reducing the non-empty axis of an empty tensor gives an empty result
  Tensor e = run1(OpKind::ReduceSum, {input(x), constant(axes({0}))});
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{1, 0}));
}

TEST(RefReduction, ReduceSpecialFloats) {
  Tensor x = f32({1, kNaN, 3, -kInf, 2, 0}, {2, 3});
  OpArg ax = constant(axes({1}));
  expect_values(run1(OpKind::ReduceMax, {input(x), ax}), {kNaN, 2});
  expect_values(run1(OpKind::ReduceMin, {input(x), ax}), {kNaN, -kInf});
  expect_values(run1(OpKind::ReduceSum, {input(x), ax}), {kNaN, -kInf});
  // LogSumExp is shifted by the maximum: huge inputs do not overflow, +inf stays +inf, all -inf gives -inf.
  Tensor big = f32({1000, 1000, kInf, 1, -kInf, -kInf}, {3, 2});
  expect_values(run1(OpKind::ReduceLogSumExp, {input(big), ax}), {1000 + std::log(2.0), kInf, -kInf});
  // NaN after a number and before it
  Tensor n2 = f32({kNaN, 1, 1, kNaN}, {2, 2});
  expect_values(run1(OpKind::ReduceMax, {input(n2), ax}), {kNaN, kNaN});
}

TEST(RefReduction, ReduceIntegersWrapAndTruncate) {
  Tensor x = make<int32_t>({2147483647, 1, -7, 2}, {2, 2});
  OpArg ax = constant(axes({1}));
  Tensor s = run1(OpKind::ReduceSum, {input(x), ax});
  EXPECT_EQ(s.dtype(), DType::i32);
  expect_values(s, {double(INT32_MIN), -5});  // wraps like int32 arithmetic
  expect_values(run1(OpKind::ReduceMean, {input(x), ax}), {double(INT32_MIN / 2), -2});  // truncates toward 0
  expect_values(run1(OpKind::ReduceL1, {input(make<int32_t>({-3, 4}, {2})), constant(axes({0}))}), {7});
  expect_values(run1(OpKind::ReduceL2, {input(make<int64_t>({3, 4}, {2})), constant(axes({0}))}), {5});
  // log(0) = -inf saturates to the lowest int instead of an undefined conversion
  expect_values(run1(OpKind::ReduceLogSum, {input(make<int32_t>({0, 0}, {2})), constant(axes({0}))}),
                {double(INT32_MIN)});
  // 64-bit maxima are compared exactly, not through double
  Tensor big = Tensor::from_vector<int64_t>({(int64_t(1) << 60) + 1, int64_t(1) << 60}, {2});
  Tensor mx = run1(OpKind::ReduceMax, {input(big)}, {{"keepdims", int64_t(0)}});
  EXPECT_EQ(mx.data<int64_t>()[0], (int64_t(1) << 60) + 1);
  Tensor u = make<uint64_t>({5, 7}, {2});
  expect_values(run1(OpKind::ReduceProd, {input(u)}), {35});
  expect_values(run1(OpKind::ReduceMin, {input(make<uint8_t>({200, 13, 77}, {3}))}), {13});
  expect_values(run1(OpKind::ReduceMax, {input(make<int8_t>({-100, -3, -77}, {3}))}), {-3});
}

TEST(RefReduction, ReduceHalfTypes) {
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    Tensor x = visit_dtype(dt, [&]<class T>() { return make<T>({1, 2, 3, 4.5}, {2, 2}); });
    Tensor y = run1(OpKind::ReduceSum, {input(x), constant(axes({0}))});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, {4, 6.5});
    expect_values(run1(OpKind::ReduceLogSumExp, {input(x), constant(axes({0}))}),
                  {std::log(std::exp(1.0) + std::exp(3.0)), std::log(std::exp(2.0) + std::exp(4.5))}, 1e-2);
  }
}

TEST(RefReduction, ReduceAxesKnownOnlyAtRunTime) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<OpArg> ins = {input(x), input(axes({0}))};
  OneOp op = build_op(OpKind::ReduceSum, ins);
  const Shape& s = op.type().shape;
  ASSERT_TRUE(s.rank_known());
  EXPECT_EQ(s.rank(), 2u);  // keepdims: rank kept, sizes fresh
  Tensor y = run_graph(op.g, op.feeds)[0];
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{1, 3}));
  expect_values(y, {5, 7, 9});
  // without keepdims the rank is input rank minus the axes count
  OneOp op2 = build_op(OpKind::ReduceSum, ins, {{"keepdims", int64_t(0)}});
  EXPECT_EQ(op2.type().shape.rank(), 1u);
  expect_values(run_graph(op2.g, op2.feeds)[0], {5, 7, 9});
}

TEST(RefReduction, ReduceProdOfShapeStaysSymbolic) {
  auto g = std::make_shared<Graph>("main");
  Value* x = g->add_input("x", {DType::f32, Shape({Dim::symbol("batch"), 3, 4})});
  Node* shape = g->add_node(OpKind::Shape, {x}, {"s"});
  Node* numel = g->add_node(OpKind::ReduceProd, {shape->output(0)}, {"n"});
  Node* flat = g->add_node(OpKind::Reshape, {x, numel->output(0)}, {"y"});
  g->add_output(flat->output(0));
  infer_shapes(*g);
  verify(*g);
  ASSERT_EQ(g->outputs()[0]->shape().rank(), 1u);
  EXPECT_EQ(g->outputs()[0]->shape()[0], Dim::symbol("batch") * 12);
}

TEST(RefReduction, ReduceRejectsBadInput) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(x), constant(axes({2}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(x), constant(axes({1, -1}))}), "more than once");
  // run-time axes are checked too
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(x), input(axes({-3}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(make<bool>({1, 0}, {2}))}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(make<int8_t>({1, 0}, {2}))}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::ReduceSum, {input(x), constant(make<int32_t>({0}, {1}))}), "axes");
}

// ---- ArgMax / ArgMin

TEST(RefReduction, ArgMaxArgMinTiesAndNaN) {
  Tensor x = f32({1, 3, 3, 0, 0, -1}, {2, 3});
  Tensor a = run1(OpKind::ArgMax, {input(x)}, {{"axis", int64_t(1)}});
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 1}));
  expect_values(a, {1, 0});
  expect_values(run1(OpKind::ArgMax, {input(x)}, {{"axis", int64_t(-1)}, {"select_last_index", int64_t(1)}}), {2, 1});
  expect_values(run1(OpKind::ArgMin, {input(x)}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}}), {0, 2});
  expect_values(run1(OpKind::ArgMin, {input(x)}, {{"keepdims", int64_t(0)}}), {1, 1, 1});
  // NaN wins for both, first NaN unless select_last_index (numpy's rule)
  Tensor n = f32({1, kNaN, 5, kNaN}, {4});
  expect_values(run1(OpKind::ArgMax, {input(n)}), {1});
  expect_values(run1(OpKind::ArgMin, {input(n)}), {1});
  expect_values(run1(OpKind::ArgMax, {input(n)}, {{"select_last_index", int64_t(1)}}), {3});
  Tensor big = Tensor::from_vector<int64_t>({int64_t(1) << 60, (int64_t(1) << 60) + 1}, {2});
  expect_values(run1(OpKind::ArgMax, {input(big)}), {1});
  expect_values(run1(OpKind::ArgMin, {input(make<uint16_t>({9, 4, 65535}, {3}))}), {1});
  expect_values(run1(OpKind::ArgMax, {input(make<bf16_t>({-1, -0.5, -2}, {3}))}), {1});
}

TEST(RefReduction, ArgMaxRejectsBadInput) {
  EXPECT_CUVIL_ERROR(run1(OpKind::ArgMax, {input(f32({}, {2, 0}))}, {{"axis", int64_t(1)}}), "empty");
  EXPECT_CUVIL_ERROR(run1(OpKind::ArgMax, {input(f32({1}, {1}))}, {{"axis", int64_t(1)}}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::ArgMax, {input(make<bool>({1}, {1}))}), "dtype");
  // reducing an empty tensor along a non-empty axis is fine
  EXPECT_EQ(run1(OpKind::ArgMax, {input(f32({}, {0, 2}))}, {{"axis", int64_t(1)}}).shape(),
            (std::vector<int64_t>{0, 1}));
}

// ---- Softmax family

TEST(RefReduction, SoftmaxFamilyOverInnerAxis) {
  // axis 0 of [2, 2]: columns normalize
  Tensor x = f32({0, 1, std::log(3.0), 1}, {2, 2});
  expect_values(run1(OpKind::Softmax, {input(x)}, {{"axis", int64_t(0)}}), {0.25, 0.5, 0.75, 0.5});
  expect_values(run1(OpKind::LogSoftmax, {input(x)}, {{"axis", int64_t(0)}}),
                {std::log(0.25), std::log(0.5), std::log(0.75), std::log(0.5)});
  expect_values(run1(OpKind::Hardmax, {input(x)}, {{"axis", int64_t(0)}}), {0, 1, 1, 0});  // tie: first wins
  expect_values(run1(OpKind::Hardmax, {input(x)}), {0, 1, 1, 0});
}

TEST(RefReduction, SoftmaxSpecialValues) {
  Tensor x = f32({1000, 1000, 0, -kInf, kNaN, 1}, {3, 2});
  expect_values(run1(OpKind::Softmax, {input(x)}), {0.5, 0.5, 1, 0, kNaN, kNaN});
  expect_values(run1(OpKind::LogSoftmax, {input(x)}), {-std::log(2.0), -std::log(2.0), 0, -kInf, kNaN, kNaN});
  expect_values(run1(OpKind::Hardmax, {input(x)}), {1, 0, 1, 0, 1, 0});
  // empty tensors and an empty softmax axis
  EXPECT_EQ(run1(OpKind::Softmax, {input(f32({}, {0, 3}))}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run1(OpKind::Softmax, {input(f32({}, {3, 0}))}).shape(), (std::vector<int64_t>{3, 0}));
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    Tensor h = visit_dtype(dt, [&]<class T>() { return make<T>({0, std::log(3.0)}, {2}); });
    Tensor y = run1(OpKind::Softmax, {input(h)});
    EXPECT_EQ(y.dtype(), dt);
    expect_values(y, {0.25, 0.75}, 1e-2);
  }
}

TEST(RefReduction, SoftmaxRejectsBadInput) {
  EXPECT_CUVIL_ERROR(run1(OpKind::Softmax, {input(make<int32_t>({1, 2}, {2}))}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::LogSoftmax, {input(f32({1, 2}, {2}))}, {{"axis", int64_t(1)}}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::Hardmax, {input(f32({1}, {}))}), "out of range");
}

// ---- CumSum

TEST(RefReduction, CumSumDirectionsAndTypes) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  OpArg ax1 = constant(make<int32_t>({1}, {}));
  expect_values(run1(OpKind::CumSum, {input(x), ax1}), {1, 3, 6, 4, 9, 15});
  expect_values(run1(OpKind::CumSum, {input(x), ax1}, {{"exclusive", int64_t(1)}}), {0, 1, 3, 0, 4, 9});
  expect_values(run1(OpKind::CumSum, {input(x), ax1}, {{"reverse", int64_t(1)}}), {6, 5, 3, 15, 11, 6});
  expect_values(run1(OpKind::CumSum, {input(x), ax1}, {{"reverse", int64_t(1)}, {"exclusive", int64_t(1)}}),
                {5, 3, 0, 11, 6, 0});
  expect_values(run1(OpKind::CumSum, {input(x), input(i64({-2}, {1}))}), {1, 2, 3, 5, 7, 9});
  Tensor xi = make<uint32_t>({4294967295.0, 1, 2}, {3});
  expect_values(run1(OpKind::CumSum, {input(xi), constant(i64({0}, {}))}), {4294967295.0, 0, 2});  // wraps
  Tensor h = make<f16_t>({0.5, 0.25}, {2});
  expect_values(run1(OpKind::CumSum, {input(h), constant(i64({0}, {}))}), {0.5, 0.75});
  EXPECT_EQ(run1(OpKind::CumSum, {input(f32({}, {0, 2})), ax1}).shape(), (std::vector<int64_t>{0, 2}));
}

TEST(RefReduction, CumSumRejectsBadAxis) {
  Tensor x = f32({1, 2}, {2});
  EXPECT_CUVIL_ERROR(run1(OpKind::CumSum, {input(x), constant(i64({1}, {}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::CumSum, {input(x), input(i64({-2}, {}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::CumSum, {input(x), constant(i64({0, 0}, {2}))}), "scalar");
  EXPECT_CUVIL_ERROR(run1(OpKind::CumSum, {input(x), constant(f32({0}, {}))}), "dtype");
}

// ---- TopK

TEST(RefReduction, TopKLargestSmallestTies) {
  Tensor x = f32({3, 1, 3, 2, 0, 5, 5, 4}, {2, 4});
  auto r = run_op(OpKind::TopK, {input(x), constant(i64({2}, {1}))}, {}, 2);
  EXPECT_EQ(r[0].shape(), (std::vector<int64_t>{2, 2}));
  expect_values(r[0], {3, 3, 5, 5});
  expect_values(r[1], {0, 2, 1, 2});  // ties: lower index first
  auto s = run_op(OpKind::TopK, {input(x), constant(i64({3}, {1}))}, {{"largest", int64_t(0)}}, 2);
  expect_values(s[0], {1, 2, 3, 0, 4, 5});
  expect_values(s[1], {1, 3, 0, 0, 3, 1});
  // along axis 0 of [2, 4]
  auto c = run_op(OpKind::TopK, {input(x), constant(i64({1}, {1}))}, {{"axis", int64_t(0)}}, 2);
  expect_values(c[0], {3, 5, 5, 4});
  expect_values(c[1], {0, 1, 1, 1});
}

TEST(RefReduction, TopKSpecialCases) {
  Tensor x = f32({1, kNaN, 3, -kInf}, {4});
  auto l = run_op(OpKind::TopK, {input(x), constant(i64({4}, {1}))}, {}, 2);
  expect_values(l[0], {kNaN, 3, 1, -kInf});
  auto s = run_op(OpKind::TopK, {input(x), constant(i64({4}, {1}))}, {{"largest", int64_t(0)}}, 2);
  expect_values(s[0], {-kInf, 1, 3, kNaN});
  auto z = run_op(OpKind::TopK, {input(x), constant(i64({0}, {1}))}, {}, 2);
  EXPECT_EQ(z[0].shape(), (std::vector<int64_t>{0}));
  // K known only at run time
  std::vector<OpArg> ins = {input(make<int64_t>({7, -1, 9}, {3})), input(i64({2}, {1}))};
  OneOp op = build_op(OpKind::TopK, ins, {}, 2);
  EXPECT_FALSE(op.type().shape[0].is_const());
  auto r = run_graph(op.g, op.feeds);
  expect_values(r[0], {9, 7});
  expect_values(r[1], {2, 0});
}

TEST(RefReduction, TopKRejectsBadK) {
  Tensor x = f32({1, 2, 3}, {3});
  EXPECT_CUVIL_ERROR(run_op(OpKind::TopK, {input(x), constant(i64({4}, {1}))}, {}, 2), "larger");
  EXPECT_CUVIL_ERROR(run_op(OpKind::TopK, {input(x), input(i64({4}, {1}))}, {}, 2), "larger");  // checked at run time
  EXPECT_CUVIL_ERROR(run_op(OpKind::TopK, {input(x), constant(i64({-1}, {1}))}, {}, 2), ">= 0");
  EXPECT_CUVIL_ERROR(run_op(OpKind::TopK, {input(x), constant(i64({1, 1}, {2}))}, {}, 2), "one value");
  EXPECT_CUVIL_ERROR(run_op(OpKind::TopK, {input(x), constant(make<int32_t>({1}, {1}))}, {}, 2), "dtype");
}

// ---- Normalizations

TEST(RefReduction, LayerNormalizationWithBroadcastScaleAndStats) {
  Tensor x = f32({1, 2, 3, 4, 6, 8}, {2, 3});
  Tensor scale = f32({1, 2, 1}, {3});
  Tensor bias = f32({0, 0, 1}, {1, 3});
  auto r = run_op(OpKind::LayerNormalization, {input(x), input(scale), input(bias)}, {{"epsilon", 0.0}}, 3);
  double s1 = 1 / std::sqrt(2.0 / 3), s2 = 1 / std::sqrt(8.0 / 3);
  expect_values(r[0], {-s1, 0, s1 + 1, -2 * s2, 0, 2 * s2 + 1});
  EXPECT_EQ(r[1].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r[1].dtype(), DType::f32);
  expect_values(r[1], {2, 6});
  expect_values(r[2], {s1, s2});
  // axis 0 normalizes everything; no B
  auto a0 = run_op(OpKind::LayerNormalization, {input(f32({1, 3}, {2, 1})), input(f32({1}, {1}))},
                {{"axis", int64_t(0)}, {"epsilon", 0.0}}, 1);
  expect_values(a0[0], {-1, 1});
  // f16 input: f32 statistics
  auto h = run_op(OpKind::LayerNormalization, {input(make<f16_t>({1, 3}, {2})), input(make<f16_t>({1, 1}, {2}))},
               {{"epsilon", 0.0}}, 2);
  EXPECT_EQ(h[0].dtype(), DType::f16);
  EXPECT_EQ(h[1].dtype(), DType::f32);
  expect_values(h[0], {-1, 1}, 1e-3);
}

TEST(RefReduction, LayerNormalizationRejectsBadInput) {
  Tensor x = f32({1, 2, 3, 4, 6, 8}, {2, 3});
  EXPECT_CUVIL_ERROR(run1(OpKind::LayerNormalization, {input(x), input(f32({1, 2}, {2}))}), "broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::LayerNormalization, {input(x), input(make<double>({1, 2, 3}, {3}))}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::LayerNormalization, {input(x), input(f32({1}, {1}))}, {{"axis", int64_t(2)}}),
                     "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::LayerNormalization, {input(x), input(f32({1}, {1}))}, {{"stash_type", int64_t(7)}}),
                     "stash_type");
}

TEST(RefReduction, InstanceNormalization) {
  Tensor x = f32({1, 3, 10, 10, 0, 4, 2, 2}, {2, 2, 2});
  Tensor y = run1(OpKind::InstanceNormalization, {input(x), input(f32({1, 2}, {2})), input(f32({0, 1}, {2}))},
                  {{"epsilon", 0.0}});
  // the [10, 10] instance has zero variance: 0/0 -> NaN with epsilon 0
  expect_values(y, {-1, 1, kNaN, kNaN, -1, 1, kNaN, kNaN});
  EXPECT_CUVIL_ERROR(
      run1(OpKind::InstanceNormalization, {input(x), input(f32({1}, {1})), input(f32({0, 1}, {2}))}), "channel");
}

TEST(RefReduction, BatchNormalizationInferenceAndTraining) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});  // N=2, C=2, 2 spatial
  Tensor scale = f32({1, 2}, {2}), bias = f32({0, 1}, {2}), mean = f32({1, 2}, {2}), var = f32({4, 1}, {2});
  Tensor y = run1(OpKind::BatchNormalization, {input(x), input(scale), input(bias), input(mean), input(var)},
                  {{"epsilon", 0.0}});
  expect_values(y, {0, 0.5, 1 + 2, 1 + 4, 2, 2.5, 1 + 10, 1 + 12});
  auto t = run_op(OpKind::BatchNormalization, {input(x), input(scale), input(bias), input(mean), input(var)},
               {{"epsilon", 0.0}, {"training_mode", int64_t(1)}, {"momentum", 0.5}}, 3);
  // channel 0 values 1,2,5,6: mean 3.5, var 4.25; channel 1 values 3,4,7,8: mean 5.5, var 4.25
  double s = 1 / std::sqrt(4.25);
  expect_values(t[0], {-2.5 * s, -1.5 * s, 1 - 5 * s, 1 - 3 * s, 1.5 * s, 2.5 * s, 1 + 3 * s, 1 + 5 * s});
  expect_values(t[1], {0.5 * 1 + 0.5 * 3.5, 0.5 * 2 + 0.5 * 5.5});
  expect_values(t[2], {0.5 * 4 + 0.5 * 4.25, 0.5 * 1 + 0.5 * 4.25});
  // mixed dtypes: f16 X with f32 statistics, f64 running stats
  auto h = run_op(OpKind::BatchNormalization,
               {input(make<f16_t>({1, 2}, {1, 2})), input(scale), input(bias),
                input(make<double>({1, 2}, {2})), input(make<double>({4, 1}, {2}))},
               {{"epsilon", 0.0}});
  EXPECT_EQ(h[0].dtype(), DType::f16);
  expect_values(h[0], {0, 1}, 1e-3);
}

TEST(RefReduction, BatchNormalizationRejectsBadInput) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  Tensor p = f32({1, 1}, {2});
  EXPECT_CUVIL_ERROR(run_op(OpKind::BatchNormalization, {input(x), input(p), input(p), input(p), input(p)}, {}, 3),
                     "training_mode");
  EXPECT_CUVIL_ERROR(
      run1(OpKind::BatchNormalization, {input(x), input(f32({1, 1, 1}, {3})), input(p), input(p), input(p)}),
      "channel");
}

TEST(RefReduction, LRNWindowIsAsymmetricForEvenSizes) {
  // C = 4, size 2: window [c, c + 1]; size 3: [c - 1, c + 1]
  Tensor x = f32({1, 2, 3, 4}, {1, 4, 1});
  auto want = [](const std::vector<double>& v, int64_t size, double alpha, double beta, double bias) {
    std::vector<double> r;
    int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
    for (int64_t c = 0; c < 4; ++c) {
      double sq = 0;
      for (int64_t k = std::max<int64_t>(0, c - lo_off); k <= std::min<int64_t>(3, c + hi_off); ++k)
        sq += v[size_t(k)] * v[size_t(k)];
      r.push_back(v[size_t(c)] / std::pow(bias + alpha / double(size) * sq, beta));
    }
    return r;
  };
  for (int64_t size : {1, 2, 3, 4}) {
    Tensor y = run1(OpKind::LRN, {input(x)},
                    {{"size", size}, {"alpha", 0.5}, {"beta", 0.75}, {"bias", 2.0}});
    expect_values(y, want({1, 2, 3, 4}, size, 0.5, 0.75, 2.0));
  }
  EXPECT_CUVIL_ERROR(run1(OpKind::LRN, {input(x)}, {{"size", int64_t(0)}}), "size");
  EXPECT_CUVIL_ERROR(build_op(OpKind::LRN, {input(x)}), "size");
}

TEST(RefReduction, MeanVarianceNormalization) {
  Tensor x = f32({1, 3, 5, 7}, {2, 2});
  Tensor y = run1(OpKind::MeanVarianceNormalization, {input(x)}, {{"axes", std::vector<int64_t>{1}}});
  expect_values(y, {-1, 1, -1, 1});
  // default axes [0, 2, 3] need rank 4
  EXPECT_CUVIL_ERROR(run1(OpKind::MeanVarianceNormalization, {input(x)}), "out of range");
  Tensor x4 = f32({1, 3, 2, 2}, {2, 2, 1, 1});
  expect_values(run1(OpKind::MeanVarianceNormalization, {input(x4)}), {-1, 1, 1, -1});
}

// ---- Losses

TEST(RefReduction, NegativeLogLikelihoodLoss) {
  Tensor lp = f32({-1, -2, -3, -4, -5, -6}, {2, 3});  // [N=2, C=3]
  Tensor t = i64({2, 0}, {2});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(t)}, {{"reduction", "none"}}), {3, 4});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(t)}), {3.5});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(t)}, {{"reduction", "sum"}}), {7});
  Tensor w = f32({1, 0.5, 3}, {3});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(t), input(w)}), {(9 + 4) / 4.0});
  // ignored targets weigh nothing; they may be out of range
  Tensor ti = make<int32_t>({-100, 0}, {2});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(ti), input(w)},
                     {{"ignore_index", int64_t(-100)}}),
                {4});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(ti)},
                     {{"ignore_index", int64_t(-100)}, {"reduction", "none"}}),
                {0, 4});
  // everything ignored: mean of nothing
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(make<int32_t>({1, 1}, {2}))},
                     {{"ignore_index", int64_t(1)}}),
                {kNaN});
  // [N, C, d1]: class axis is 1
  Tensor lp3 = f32({-1, -2, -3, -4}, {1, 2, 2});
  expect_values(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp3), input(i64({1, 0}, {1, 2}))},
                     {{"reduction", "none"}}),
                {3, 2});
}

TEST(RefReduction, LossesRejectBadInput) {
  Tensor lp = f32({-1, -2, -3, -4, -5, -6}, {2, 3});
  EXPECT_CUVIL_ERROR(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(i64({3, 0}, {2}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(i64({-1, 0}, {2}))}), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(i64({0, 0, 0}, {3}))}), "target");
  EXPECT_CUVIL_ERROR(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(i64({0, 0}, {2}))},
                          {{"reduction", "avg"}}),
                     "reduction");
  EXPECT_CUVIL_ERROR(run1(OpKind::NegativeLogLikelihoodLoss, {input(lp), input(f32({0, 0}, {2}))}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::SoftmaxCrossEntropyLoss, {input(lp), input(i64({0, 0}, {2})), input(f32({1}, {1}))}),
                     "weight");
  EXPECT_CUVIL_ERROR(run1(OpKind::SoftmaxCrossEntropyLoss, {input(f32({1}, {1})), input(i64({0}, {}))}), "rank");
}

TEST(RefReduction, SoftmaxCrossEntropyLoss) {
  Tensor s = f32({0, std::log(3.0), 1000, 1000}, {2, 2});
  auto r = run_op(OpKind::SoftmaxCrossEntropyLoss, {input(s), input(i64({1, 0}, {2}))}, {{"reduction", "none"}}, 2);
  expect_values(r[0], {-std::log(0.75), std::log(2.0)});
  expect_values(r[1], {std::log(0.25), std::log(0.75), -std::log(2.0), -std::log(2.0)});
  auto m = run_op(OpKind::SoftmaxCrossEntropyLoss, {input(s), input(i64({1, 0}, {2})), input(f32({2, 1}, {2}))}, {}, 1);
  expect_values(m[0], {(-std::log(0.75) * 1 + std::log(2.0) * 2) / 3});
  auto h = run_op(OpKind::SoftmaxCrossEntropyLoss, {input(make<f16_t>({0, 0}, {1, 2})), input(i64({1}, {1}))}, {}, 1);
  EXPECT_EQ(h[0].dtype(), DType::f16);
  expect_values(h[0], {std::log(2.0)}, 1e-3);
}

// ---- ONNX converters (older opsets)

namespace {

struct OnnxCase {
  int opset;
  std::string op;
  std::vector<std::pair<std::string, Tensor>> inputs;        // graph inputs
  std::vector<std::pair<std::string, Tensor>> initializers;  // constants
  std::vector<std::string> node_inputs, node_outputs;
  std::vector<onnx::AttributeProto> attrs;
};

onnx::AttributeProto attr_i(const std::string& n, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(n);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}
onnx::AttributeProto attr_ints(const std::string& n, std::vector<int64_t> v) {
  onnx::AttributeProto a;
  a.set_name(n);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

void fill_tensor(onnx::TensorProto* tp, const std::string& name, const Tensor& t) {
  tp->set_name(name);
  tp->set_data_type(dtype_onnx_id(t.dtype()));
  for (int64_t d : t.shape()) tp->add_dims(d);
  tp->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

std::vector<Tensor> run_onnx(const OnnxCase& c) {
  onnx::ModelProto m = onnx_model(7, c.opset);
  auto* g = m.mutable_graph();
  for (auto& [name, t] : c.inputs) set_type(g->add_input(), name, dtype_onnx_id(t.dtype()), t.shape());
  for (auto& [name, t] : c.initializers) fill_tensor(g->add_initializer(), name, t);
  auto* n = g->add_node();
  n->set_op_type(c.op);
  n->set_name("n");
  for (auto& s : c.node_inputs) n->add_input(s);
  for (auto& s : c.node_outputs) n->add_output(s);
  for (auto& a : c.attrs) *n->add_attribute() = a;
  for (auto& s : c.node_outputs)
    if (!s.empty()) g->add_output()->set_name(s);
  std::vector<Tensor> feeds;
  for (auto& [name, t] : c.inputs) feeds.push_back(t);
  return run_graph(import(m), feeds);
}

}  // namespace

TEST(RefReductionOnnx, ReduceAxesAttributeBecomesAnInput) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = run_onnx({11, "ReduceMean", {{"x", x}}, {}, {"x"}, {"y"}, {attr_ints("axes", {-1}), attr_i("keepdims", 0)}});
  expect_values(r[0], {2, 5});
  auto s = run_onnx({11, "ReduceSum", {{"x", x}}, {}, {"x"}, {"y"}, {attr_ints("axes", {0})}});
  EXPECT_EQ(s[0].shape(), (std::vector<int64_t>{1, 3}));
  expect_values(s[0], {5, 7, 9});
  auto all = run_onnx({13, "ReduceMax", {{"x", x}}, {}, {"x"}, {"y"}, {attr_i("keepdims", 0)}});
  expect_values(all[0], {6});
  auto s13 = run_onnx({13, "ReduceSum", {{"x", x}}, {{"a", i64({1}, {1})}}, {"x", "a"}, {"y"}, {}});
  expect_values(s13[0], {6, 15});
}

TEST(RefReductionOnnx, LegacySoftmaxFlattensAtAxis) {
  // opset 11, axis 1 on [2, 2, 2]: each batch row of 4 values is one softmax
  std::vector<double> v = {0, 1, 2, 3, 0, 0, 0, 0};
  Tensor x = f32(v, {2, 2, 2});
  double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  auto r = run_onnx({11, "Softmax", {{"x", x}}, {}, {"x"}, {"y"}, {}});
  EXPECT_EQ(r[0].shape(), (std::vector<int64_t>{2, 2, 2}));
  expect_values(r[0], {1 / z, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 0.25, 0.25, 0.25, 0.25});
  auto h = run_onnx({11, "Hardmax", {{"x", x}}, {}, {"x"}, {"y"}, {attr_i("axis", 0)}});
  expect_values(h[0], {0, 0, 0, 1, 0, 0, 0, 0});
  auto l = run_onnx({11, "LogSoftmax", {{"x", x}}, {}, {"x"}, {"y"}, {attr_i("axis", -1)}});
  expect_values(l[0], {-std::log(1 + std::exp(1.0)), 1 - std::log(1 + std::exp(1.0)), -std::log(1 + std::exp(1.0)),
                       1 - std::log(1 + std::exp(1.0)), -std::log(2.0), -std::log(2.0), -std::log(2.0),
                       -std::log(2.0)});
  // opset 13: axis is the one dim, default -1
  auto s13 = run_onnx({13, "Softmax", {{"x", x}}, {}, {"x"}, {"y"}, {attr_i("axis", 1)}});
  expect_values(s13[0], {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(2.0)), std::exp(2.0) / (1 + std::exp(2.0)),
                         std::exp(2.0) / (1 + std::exp(2.0)), 0.5, 0.5, 0.5, 0.5});
}

TEST(RefReductionOnnx, TopKAttributeKBecomesAnInput) {
  Tensor x = f32({1, 4, 2, 3}, {4});
  auto r = run_onnx({1, "TopK", {{"x", x}}, {}, {"x"}, {"v", "i"}, {attr_i("k", 2)}});
  expect_values(r[0], {4, 3});
  expect_values(r[1], {1, 3});
}

TEST(RefReductionOnnx, LegacyNormalizations) {
  Tensor x = f32({1, 2, 3, 4}, {1, 2, 2});
  Tensor one = f32({1, 1}, {2}), zero = f32({0, 0}, {2});
  auto in = run_onnx({1, "InstanceNormalization", {{"x", x}}, {{"s", one}, {"b", zero}}, {"x", "s", "b"}, {"y"},
                      {attr_ints("consumed_inputs", {0, 0, 0})}});
  expect_values(in[0], {-1, 1, -1, 1}, 1e-4);
  // opset 6 with is_test and consumed_inputs: inference
  auto bn = run_onnx({6, "BatchNormalization", {{"x", x}}, {{"s", one}, {"b", zero}, {"m", zero}, {"v", one}},
                      {"x", "s", "b", "m", "v"}, {"y"}, {attr_i("is_test", 1)}});
  expect_values(bn[0], {1, 2, 3, 4}, 1e-4);
  // opset 7 spatial=0: statistics per activation, shaped like X[1:]
  Tensor pm = f32({1, 2, 3, 4}, {2, 2}), pv = f32({1, 1, 4, 4}, {2, 2}), ps = f32({1, 1, 1, 1}, {2, 2}),
         pb = f32({0, 0, 0, 1}, {2, 2});
  auto sp = run_onnx({7, "BatchNormalization", {{"x", f32({2, 2, 5, 4}, {1, 2, 2})}},
                      {{"s", ps}, {"b", pb}, {"m", pm}, {"v", pv}}, {"x", "s", "b", "m", "v"}, {"y"},
                      {attr_i("spatial", 0)}});
  EXPECT_EQ(sp[0].shape(), (std::vector<int64_t>{1, 2, 2}));
  expect_values(sp[0], {1, 0, 1, 1}, 1e-4);
  // opset 9 training outputs: running mean/var
  auto tr = run_onnx({9, "BatchNormalization", {{"x", x}}, {{"s", one}, {"b", zero}, {"m", zero}, {"v", one}},
                      {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"}, {}});
  ASSERT_EQ(tr.size(), 3u);
  expect_values(tr[1], {0.1 * 1.5, 0.1 * 3.5}, 1e-4);
  expect_values(tr[2], {0.9 + 0.1 * 0.25, 0.9 + 0.1 * 0.25}, 1e-4);
  EXPECT_CUVIL_ERROR(run_onnx({9, "BatchNormalization", {{"x", x}}, {{"s", one}, {"b", zero}, {"m", zero}, {"v", one}},
                               {"x", "s", "b", "m", "v"}, {"y", "rm", "rv", "sm"}, {}}),
                     "saved_mean");
}

// Reference kernels stay linear: ResNet-sized tensors take milliseconds, not minutes.
TEST(RefReduction, LargeInputsStayFast) {
  std::vector<double> v(size_t(64) * 112 * 112);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 97) * 0.01;
  Tensor x = f32(v, {1, 64, 112, 112});
  EXPECT_EQ(run1(OpKind::ReduceMean, {input(x), constant(axes({2, 3}))}).numel(), 64);
  EXPECT_EQ(run1(OpKind::ReduceLogSumExp, {input(x), constant(axes({1}))}).numel(), 112 * 112);
  EXPECT_EQ(run1(OpKind::Softmax, {input(x)}, {{"axis", int64_t(1)}}).numel(), x.numel());
  EXPECT_EQ(run1(OpKind::MeanVarianceNormalization, {input(x)}).numel(), x.numel());
  Tensor p = f32(std::vector<double>(64, 1.0), {64});
  EXPECT_EQ(run1(OpKind::BatchNormalization, {input(x), input(p), input(p), input(p), input(p)}).numel(), x.numel());
  EXPECT_EQ(run1(OpKind::InstanceNormalization, {input(x), input(p), input(p)}).numel(), x.numel());
  EXPECT_EQ(run1(OpKind::LRN, {input(x)}, {{"size", int64_t(5)}}).numel(), x.numel());
  Tensor flat = x.reshaped({784, 1024});
  EXPECT_EQ(run1(OpKind::LayerNormalization, {input(flat), input(f32(std::vector<double>(1024, 1.0), {1024}))}).numel(),
            flat.numel());
  EXPECT_EQ(run_op(OpKind::TopK, {input(x.reshaped({1, 802816})), constant(i64({100}, {1}))}, {}, 2)[0].numel(), 100);
  EXPECT_EQ(run1(OpKind::CumSum, {input(x), constant(i64({3}, {}))}).numel(), x.numel());
}

TEST(RefReduction, UnknownRankPassesThroughInference) {
  auto g = std::make_shared<Graph>("main");
  Value* x = g->add_input("x", {DType::f32, Shape::unknown_rank()});
  Value* ax = g->add_constant("axes", axes({0}));
  Node* sm = g->add_node(OpKind::Softmax, {x}, {"s"});
  Node* rs = g->add_node(OpKind::ReduceSum, {sm->output(0), ax}, {"r"}, {{"keepdims", int64_t(0)}});
  g->add_output(rs->output(0));
  infer_shapes(*g);
  verify(*g);
  EXPECT_FALSE(g->outputs()[0]->shape().rank_known());
  Executor exec(g, reference_kernels());
  Tensor y = exec.run({f32({0, 0, 1, 1}, {2, 2})})[0];
  expect_values(y, {1, 1});
}

TEST(RefReduction, BatchNormalizationRunsInPlace) {
  auto g = std::make_shared<Graph>("main");
  Value* x = g->add_input("x", {DType::f32, Shape({2, 2})});
  Value* s = g->add_constant("s", f32({2, 2}, {2}));
  Value* b = g->add_constant("b", f32({1, 1}, {2}));
  Value* m = g->add_constant("m", f32({0, 0}, {2}));
  Value* v = g->add_constant("v", f32({1, 1}, {2}));
  Node* bn1 = g->add_node(OpKind::BatchNormalization, {x, s, b, m, v}, {"y1"}, {{"epsilon", 0.0}});
  Node* bn2 = g->add_node(OpKind::BatchNormalization, {bn1->output(0), s, b, m, v}, {"y2"}, {{"epsilon", 0.0}});
  Node* bn3 = g->add_node(OpKind::BatchNormalization, {bn2->output(0), s, b, m, v}, {"y3"}, {{"epsilon", 0.0}});
  g->add_output(bn3->output(0));
  infer_shapes(*g);
  verify(*g);
  Executor exec(g, reference_kernels());
  Tensor y = exec.run({f32({0, 1, 2, 3}, {2, 2})})[0];
  EXPECT_GT(exec.stats().inplace_reuses, 0);
  // y = 2x + 1 three times: 8x + 7
  expect_values(y, {7, 15, 23, 31});
}
