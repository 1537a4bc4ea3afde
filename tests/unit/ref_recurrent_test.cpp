// Recurrent family (RNN, GRU, LSTM, Resize): shape inference (static and symbolic), reference kernels checked
// against hand-computed values, and the ONNX converters (RNN-1, Resize-10, Upsample-1/7/9). Covers what the ONNX
// node suite misses: reverse/bidirectional directions, sequence_lens with zeros, layout 1, clip, activation
// parameters, every dtype class, empty tensors, special float values, and bad input failing with cuvil::Error.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

Tensor f32(const std::vector<float>& v, std::vector<int64_t> shape) { return tensor<float>(v, std::move(shape)); }
Tensor i64v(const std::vector<int64_t>& v) { return vec<int64_t>(v); }
Tensor scales(const std::vector<float>& v) { return vec<float>(v); }

void expect_near(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), int64_t(want.size())) << t.type_str();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_f64(int64_t(i)), want[i], tol) << "element " << i;
}

// Short names for the node's inputs: run-time inputs (Sym: with a declared, possibly symbolic, shape) and
// constants.
OpArg C(Tensor t) { return constant(std::move(t)); }
OpArg I(Tensor t) { return input(std::move(t)); }
OpArg Sym(Tensor t, Shape s) { return symbolic_input(std::move(t), std::move(s)); }

// ---- RNN family helpers

// Single-direction, single-unit weights for the hand-computed cases: W [1, G, 1], R [1, G, 1].
Tensor col(std::vector<float> v) {
  int64_t n = int64_t(v.size());
  return f32(std::move(v), {1, n, 1});
}

double sigm(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// RNN / GRU / LSTM: shape inference

TEST(RecurrentInfer, SymbolicShapesBothLayouts) {
  Shape xs({Dim::symbol("seq"), Dim::symbol("batch"), 4});
  OneOp a(OpKind::LSTM, {Sym(Tensor::zeros(DType::f32, {1, 1, 4}), xs), I(Tensor::zeros(DType::f32, {2, 20, 4})),
                         I(Tensor::zeros(DType::f32, {2, 20, 5}))},
          {{"hidden_size", int64_t(5)}, {"direction", "bidirectional"}}, 3);
  a.infer();
  EXPECT_EQ(a.type(0).shape, Shape({Dim::symbol("seq"), 2, Dim::symbol("batch"), 5}));
  EXPECT_EQ(a.type(1).shape, Shape({2, Dim::symbol("batch"), 5}));
  EXPECT_EQ(a.type(2).shape, Shape({2, Dim::symbol("batch"), 5}));

  Shape xb({Dim::symbol("batch"), Dim::symbol("seq"), 4});
  // hidden_size omitted: taken from R.
  OneOp b(OpKind::GRU, {Sym(Tensor::zeros(DType::f64, {1, 1, 4}), xb), I(Tensor::zeros(DType::f64, {1, 9, 4})),
                        I(Tensor::zeros(DType::f64, {1, 9, 3}))},
          {{"layout", int64_t(1)}}, 2);
  b.infer();
  EXPECT_EQ(b.type(0).dtype, DType::f64);
  EXPECT_EQ(b.type(0).shape, Shape({Dim::symbol("batch"), Dim::symbol("seq"), 1, 3}));
  EXPECT_EQ(b.type(1).shape, Shape({Dim::symbol("batch"), 1, 3}));
}

TEST(RecurrentInfer, BadInputsAreErrors) {
  auto x = I(Tensor::zeros(DType::f32, {2, 1, 3}));
  auto w = I(Tensor::zeros(DType::f32, {1, 4, 3}));
  auto r = I(Tensor::zeros(DType::f32, {1, 4, 4}));
  auto infer = [&](OpKind op, std::vector<OpArg> args, AttrMap attrs) {
    OneOp o(op, std::move(args), std::move(attrs), 2);
    o.infer();
  };
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r}, {{"hidden_size", int64_t(4)}, {"direction", "sideways"}}),
                     "direction 'sideways'");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r}, {{"hidden_size", int64_t(5)}}), "W has shape");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, I(Tensor::zeros(DType::f32, {1, 4, 2})), r}, {}), "W has shape");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r}, {{"layout", int64_t(2)}}), "layout must be 0 or 1");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r}, {{"activations", std::vector<std::string>{"Swish"}}}),
                     "unknown activation function 'Swish'");
  EXPECT_CUVIL_ERROR(infer(OpKind::GRU, {x, I(Tensor::zeros(DType::f32, {1, 12, 3})),
                                         I(Tensor::zeros(DType::f32, {1, 12, 4}))},
                           {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}}}),
                     "activations lists 3 functions");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r}, {{"clip", -1.0}}), "clip must be positive");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {I(Tensor::zeros(DType::i32, {2, 1, 3})), w, r}, {}), "dtype i32");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r, absent(), I(Tensor::zeros(DType::i64, {1}))}, {}), "dtype i64");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r, I(Tensor::zeros(DType::f32, {1, 7}))}, {}), "B has shape");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, w, r, absent(), absent(), I(Tensor::zeros(DType::f32, {1, 2, 4}))}, {}),
                     "initial_h has shape");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {I(Tensor::zeros(DType::f32, {2, 3})), w, r}, {}), "X must have rank 3");
  EXPECT_CUVIL_ERROR(infer(OpKind::RNN, {x, I(Tensor::zeros(DType::f64, {1, 4, 3})), r}, {}), "same dtype");
}

// ---------------------------------------------------------------------------------------------------------------
// RNN / GRU / LSTM: kernels

TEST(RecurrentKernel, RnnForwardReverseBidirectionalByHand) {
  // One unit: h_t = tanh(0.5 x_t + 0.25 h_{t-1} + 0.1 + 0.2); X = [1, 2], batch 1.
  Tensor x = f32({1, 2}, {2, 1, 1});
  Tensor b = f32({0.1f, 0.2f}, {1, 2});
  auto run = [&](const char* dir) {
    bool bi = std::string(dir) == "bidirectional";
    Tensor w = bi ? f32({0.5f, 0.5f}, {2, 1, 1}) : col({0.5f});
    Tensor r = bi ? f32({0.25f, 0.25f}, {2, 1, 1}) : col({0.25f});
    Tensor bb = bi ? f32({0.1f, 0.2f, 0.1f, 0.2f}, {2, 2}) : b;
    OneOp o(OpKind::RNN, {I(x), I(w), I(r), I(bb)}, {{"hidden_size", int64_t(1)}, {"direction", dir}}, 2);
    return o.run();
  };
  double f1 = std::tanh(0.5 + 0.3), f2 = std::tanh(1.0 + 0.25 * f1 + 0.3);
  double r1 = std::tanh(1.0 + 0.3), r0 = std::tanh(0.5 + 0.25 * r1 + 0.3);
  auto fw = run("forward");
  expect_near(fw[0], {f1, f2});
  expect_near(fw[1], {f2});
  auto rv = run("reverse");
  expect_near(rv[0], {r0, r1});
  expect_near(rv[1], {r0});
  auto bi = run("bidirectional");
  expect_near(bi[0], {f1, r0, f2, r1});  // [seq, dir, batch, hidden]
  expect_near(bi[1], {f2, r0});
}

TEST(RecurrentKernel, SequenceLensZeroPadsAndEmptySequenceGivesZeroState) {
  // Batch 3 with lengths 2, 1, 0; seq 3; initial_h nonzero. Y past each length is zero; Y_h of the empty one too.
  Tensor x = f32({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 1});
  Tensor h0 = f32({0.5f, 0.5f, 0.5f}, {1, 3, 1});
  Tensor lens = tensor<int32_t>({2, 1, 0}, {3});
  OneOp o(OpKind::RNN, {I(x), I(col({1})), I(col({1})), absent(), I(lens), I(h0)}, {{"hidden_size", int64_t(1)}}, 2);
  auto out = o.run();
  double s1 = std::tanh(1.5), s2 = std::tanh(1 + s1);
  expect_near(out[0], {s1, s1, 0, s2, 0, 0, 0, 0, 0});
  expect_near(out[1], {s2, s1, 0});
}

TEST(RecurrentKernel, BadSequenceLensIsAnError) {
  Tensor x = f32({1, 1}, {2, 1, 1});
  for (int32_t bad : {3, -1}) {
    OneOp o(OpKind::RNN, {I(x), I(col({1})), I(col({1})), absent(), I(tensor<int32_t>({bad}, {1}))}, {}, 2);
    EXPECT_CUVIL_ERROR(o.run(), "sequence_lens[0]");
  }
}

TEST(RecurrentKernel, GruBothResetPlacementsByHand) {
  // One unit, one step from h0 = 0.5, x = 1. Gates z, r, h: W = [0.1, 0.2, 0.3], R = [0.4, 0.5, 0.6],
  // Wb = [0.01, 0.02, 0.03], Rb = [0.04, 0.05, 0.06].
  Tensor x = f32({1}, {1, 1, 1});
  Tensor b = f32({0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f}, {1, 6});
  Tensor h0 = f32({0.5f}, {1, 1, 1});
  const double h = 0.5;
  double z = sigm(0.1 + 0.4 * h + 0.05), r = sigm(0.2 + 0.5 * h + 0.07);
  for (int64_t lbr : {0, 1}) {
    OneOp o(OpKind::GRU, {I(x), I(col({0.1f, 0.2f, 0.3f})), I(col({0.4f, 0.5f, 0.6f})), I(b), absent(), I(h0)},
            {{"hidden_size", int64_t(1)}, {"linear_before_reset", lbr}}, 2);
    auto out = o.run();
    double hh = lbr ? std::tanh(0.3 + 0.03 + r * (0.6 * h + 0.06)) : std::tanh(0.3 + 0.03 + 0.6 * (r * h) + 0.06);
    double want = (1 - z) * hh + z * h;
    expect_near(out[0], {want});
    expect_near(out[1], {want});
  }
}

TEST(RecurrentKernel, LstmPeepholesAndInputForgetByHand) {
  // One unit, one step; gates i, o, f, c; peepholes i, o, f.
  Tensor x = f32({1}, {1, 1, 1});
  Tensor w = col({0.1f, 0.2f, 0.3f, 0.4f}), r = col({0.5f, 0.6f, 0.7f, 0.8f});
  Tensor h0 = f32({0.5f}, {1, 1, 1}), c0 = f32({-0.3f}, {1, 1, 1}), p = f32({0.9f, -0.8f, 0.7f}, {1, 3});
  const double h = 0.5, c = -0.3;
  for (int64_t couple : {0, 1}) {
    OneOp o(OpKind::LSTM, {I(x), I(w), I(r), absent(), absent(), I(h0), I(c0), I(p)},
            {{"hidden_size", int64_t(1)}, {"input_forget", couple}}, 3);
    auto out = o.run();
    double i = sigm(0.1 + 0.5 * h + 0.9 * c);
    double f = couple ? 1 - i : sigm(0.3 + 0.7 * h + 0.7 * c);
    double cc = std::tanh(0.4 + 0.8 * h);
    double cn = f * c + i * cc;
    double og = sigm(0.2 + 0.6 * h - 0.8 * cn);
    double hn = og * std::tanh(cn);
    expect_near(out[0], {hn});
    expect_near(out[1], {hn});
    expect_near(out[2], {cn});
  }
}

TEST(RecurrentKernel, ClipAndActivationParameters) {
  Tensor x = f32({10, -10}, {1, 2, 1});  // batch 2
  auto run = [&](AttrMap attrs) {
    attrs["hidden_size"] = int64_t(1);
    OneOp o(OpKind::RNN, {I(x), I(col({1})), I(col({1}))}, std::move(attrs), 2);
    return o.run()[1];
  };
  expect_near(run({{"clip", 0.5}}), {std::tanh(0.5), std::tanh(-0.5)});
  expect_near(run({{"activations", std::vector<std::string>{"leakyrelu"}},
                   {"activation_alpha", std::vector<double>{0.1}}}),
              {10, -1});
  expect_near(run({{"activations", std::vector<std::string>{"LeakyRelu"}}}), {10, -0.1});  // default alpha 0.01
  expect_near(run({{"activations", std::vector<std::string>{"Affine"}},
                   {"activation_alpha", std::vector<double>{2}},
                   {"activation_beta", std::vector<double>{1}}}),
              {21, -19});
  expect_near(run({{"activations", std::vector<std::string>{"HardSigmoid"}}}), {1, 0});
  expect_near(run({{"activations", std::vector<std::string>{"Softplus"}}}), {10.0000454, 4.54e-5}, 1e-4);
  expect_near(run({{"activations", std::vector<std::string>{"ThresholdedRelu"}},
                   {"activation_alpha", std::vector<double>{20}}}),
              {0, 0});
}

TEST(RecurrentKernel, EveryFloatDtypeAndLayoutOneAgree) {
  // The same bidirectional LSTM in f16, f32, f64, and with layout 1 (batch-major), gives the same numbers.
  const int64_t S = 3, N = 2, In = 2, H = 2;
  std::vector<float> xs, ws, rs;
  for (int64_t i = 0; i < S * N * In; ++i) xs.push_back(0.1f * float(i % 7) - 0.3f);
  for (int64_t i = 0; i < 2 * 4 * H * In; ++i) ws.push_back(0.05f * float(i % 5) - 0.1f);
  for (int64_t i = 0; i < 2 * 4 * H * H; ++i) rs.push_back(0.04f * float(i % 3) - 0.05f);
  auto cast = [](const Tensor& t, DType d) {
    Tensor r = Tensor::zeros(d, t.shape());
    visit_dtype(d, [&]<class T>() {
      if constexpr (is_float_v<T>)
        for (int64_t i = 0; i < t.numel(); ++i) r.data<T>()[i] = T(compute_t<T>(t.data<float>()[i]));
    });
    return r;
  };
  Tensor x = f32(xs, {S, N, In}), w = f32(ws, {2, 4 * H, In}), r = f32(rs, {2, 4 * H, H});
  AttrMap attrs{{"hidden_size", H}, {"direction", "bidirectional"}};
  auto ref = OneOp(OpKind::LSTM, {I(x), I(w), I(r)}, attrs, 3).run();
  for (DType d : {DType::f16, DType::f64}) {
    auto got = OneOp(OpKind::LSTM, {I(cast(x, d)), I(cast(w, d)), I(cast(r, d))}, attrs, 3).run();
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(got[size_t(k)].dtype(), d);
      expect_near(got[size_t(k)], as_f64(ref[size_t(k)]), d == DType::f16 ? 2e-3 : 1e-6);
    }
  }
  // Layout 1: X is [batch, seq, in]; Y is [batch, seq, dir, hidden]; Y_h is [batch, dir, hidden].
  Tensor xt = Tensor::zeros(DType::f32, {N, S, In});
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < N; ++b)
      for (int64_t k = 0; k < In; ++k) xt.data<float>()[(b * S + t) * In + k] = x.data<float>()[(t * N + b) * In + k];
  AttrMap attrs1 = attrs;
  attrs1["layout"] = int64_t(1);
  auto got = OneOp(OpKind::LSTM, {I(xt), I(w), I(r)}, attrs1, 3).run();
  ASSERT_EQ(got[0].shape(), (std::vector<int64_t>{N, S, 2, H}));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < N; ++b)
        for (int64_t j = 0; j < H; ++j)
          EXPECT_FLOAT_EQ(got[0].data<float>()[((b * S + t) * 2 + d) * H + j],
                          ref[0].data<float>()[((t * 2 + d) * N + b) * H + j]);
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t b = 0; b < N; ++b)
      for (int64_t j = 0; j < H; ++j) {
        EXPECT_FLOAT_EQ(got[1].data<float>()[(b * 2 + d) * H + j], ref[1].data<float>()[(d * N + b) * H + j]);
        EXPECT_FLOAT_EQ(got[2].data<float>()[(b * 2 + d) * H + j], ref[2].data<float>()[(d * N + b) * H + j]);
      }
}

TEST(RecurrentKernel, EmptyBatchAndEmptySequence) {
  OneOp a(OpKind::GRU, {I(Tensor::zeros(DType::f32, {4, 0, 2})), I(Tensor::zeros(DType::f32, {1, 6, 2})),
                        I(Tensor::zeros(DType::f32, {1, 6, 2}))},
          {}, 2);
  auto out = a.run();
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{4, 1, 0, 2}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{1, 0, 2}));
  OneOp b(OpKind::LSTM, {I(Tensor::zeros(DType::f32, {0, 2, 1})), I(col({1, 1, 1, 1})), I(col({1, 1, 1, 1}))},
          {}, 3);
  auto out2 = b.run();
  EXPECT_EQ(out2[0].numel(), 0);
  expect_near(out2[1], {0, 0});
  expect_near(out2[2], {0, 0});
}

TEST(RecurrentKernel, SpecialValuesPropagate) {
  // NaN in one batch entry stays there; +inf saturates tanh; the other entry is unaffected.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  OneOp o(OpKind::RNN, {I(f32({nan, inf, 0.5f}, {1, 3, 1})), I(col({1})), I(col({1}))}, {}, 2);
  auto out = o.run();
  EXPECT_TRUE(std::isnan(out[1].get_f64(0)));
  EXPECT_EQ(out[1].get_f64(1), 1.0);
  EXPECT_NEAR(out[1].get_f64(2), std::tanh(0.5), 1e-6);
}

// ---------------------------------------------------------------------------------------------------------------
// Resize: shape inference

TEST(ResizeInfer, SymbolicDimsStayExactWhereTheyCan) {
  Shape xs({Dim::symbol("batch"), 3, Dim::symbol("h"), Dim::symbol("w")});
  Tensor x = Tensor::zeros(DType::f32, {1, 3, 4, 4});
  OneOp up(OpKind::Resize, {Sym(x, xs), absent(), C(scales({1, 1, 2, 3}))});
  up.infer();
  EXPECT_EQ(up.type().shape, Shape({Dim::symbol("batch"), 3, Dim::symbol("h") * 2, Dim::symbol("w") * 3}));
  OneOp down(OpKind::Resize, {Sym(x, xs), absent(), C(scales({1, 0.5f, 0.5f, 0.25f}))});
  down.infer();
  EXPECT_EQ(down.type().shape, Shape({Dim::symbol("batch"), 1, Dim::floordiv(Dim::symbol("h"), 2),
                                      Dim::floordiv(Dim::symbol("w"), 4)}));
  // A scale with no exact symbolic form gets a fresh dim; the run still knows the size.
  OneOp odd(OpKind::Resize, {Sym(x, xs), absent(), C(scales({1, 1, 1.5f, 1}))});
  odd.infer();
  EXPECT_FALSE(odd.type().shape[2].is_const());
  EXPECT_EQ(odd.type().shape[3], Dim::symbol("w"));
  EXPECT_EQ(odd.run()[0].shape(), (std::vector<int64_t>{1, 3, 6, 4}));
  // Constant sizes win over symbolic input dims.
  OneOp sized(OpKind::Resize, {Sym(x, xs), absent(), absent(), C(i64v({2, 3, 5, 7}))});
  sized.infer();
  EXPECT_EQ(sized.type().shape, Shape({2, 3, 5, 7}));
  // Sizes only known at run time: fresh dims at compile time, exact at run time.
  OneOp dyn(OpKind::Resize, {I(f32({1, 2}, {1, 2})), absent(), absent(), I(i64v({1, 5}))});
  dyn.infer();
  EXPECT_FALSE(dyn.type().shape[1].is_const());
  EXPECT_EQ(dyn.run()[0].shape(), (std::vector<int64_t>{1, 5}));
  // opset-11 style: empty roi and empty scales constants next to sizes.
  OneOp v11(OpKind::Resize,
            {I(f32({1, 2}, {1, 2})), C(Tensor::zeros(DType::f32, {0})), C(Tensor::zeros(DType::f32, {0})),
             C(i64v({2, 4}))});
  v11.infer();
  EXPECT_EQ(v11.type().shape, Shape({2, 4}));
}

TEST(ResizeInfer, BadInputsAreErrors) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  auto infer = [&](std::vector<OpArg> args, AttrMap attrs = {}) {
    OneOp o(OpKind::Resize, std::move(args), std::move(attrs));
    o.run();
  };
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2})), C(i64v({2, 4}))}), "only one of 'scales' and 'sizes'");
  EXPECT_CUVIL_ERROR(infer({I(x)}), "one of 'scales' and 'sizes' must be given");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(Tensor::zeros(DType::f32, {0}))}), "must be given and non-empty");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2, 3}))}), "scales has shape");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), I(scales({1, 2, 3}))}), "scales has shape");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, -2}))}), "must be positive");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), I(scales({1, 0}))}), "must be positive");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), absent(), I(i64v({2, -1}))}), "is negative");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), absent(), C(tensor<int32_t>({2, 2}, {2}))}), "dtype i32");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2}))}, {{"mode", "bilinear"}}), "mode 'bilinear'");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2}))}, {{"coordinate_transformation_mode", "x"}}),
                     "coordinate_transformation_mode 'x'");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2}))}, {{"nearest_mode", "up"}}), "nearest_mode 'up'");
  EXPECT_CUVIL_ERROR(infer({I(x), absent(), C(scales({1, 2}))}, {{"coordinate_transformation_mode",
                                                                 "tf_crop_and_resize"}}),
                     "needs the roi input");
  EXPECT_CUVIL_ERROR(infer({I(Tensor::zeros(DType::f32, {0, 2})), absent(), absent(), C(i64v({3, 2}))}),
                     "cannot resize dim 0 from 0");
}

// ---------------------------------------------------------------------------------------------------------------
// Resize: kernels

TEST(ResizeKernel, NearestModesAndCoordinateModes) {
  Tensor x = f32({10, 20, 30, 40}, {4});
  auto run = [&](std::vector<int64_t> size, AttrMap attrs) {
    OneOp o(OpKind::Resize, {I(x), absent(), absent(), C(i64v(size))}, std::move(attrs));
    return as_f64(o.run()[0]);
  };
  // asymmetric, 4 -> 8: x = 0, .5, 1, 1.5, ...
  using V = std::vector<double>;
  EXPECT_EQ(run({8}, {{"coordinate_transformation_mode", "asymmetric"}}), (V{10, 10, 20, 20, 30, 30, 40, 40}));
  EXPECT_EQ(run({8}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "round_prefer_ceil"}}),
            (V{10, 20, 20, 30, 30, 40, 40, 40}));
  EXPECT_EQ(run({8}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "ceil"}}),
            (V{10, 20, 20, 30, 30, 40, 40, 40}));
  // half_pixel, 4 -> 2: x = 0.5, 2.5
  EXPECT_EQ(run({2}, {}), (V{10, 30}));
  EXPECT_EQ(run({2}, {{"nearest_mode", "round_prefer_ceil"}}), (V{20, 40}));
  EXPECT_EQ(run({2}, {{"nearest_mode", "floor"}}), (V{10, 30}));
  // half_pixel_symmetric with sizes (no flooring to shift about the centre) is half_pixel.
  EXPECT_EQ(run({2}, {{"coordinate_transformation_mode", "half_pixel_symmetric"}}), (V{10, 30}));
  // align_corners, 4 -> 3: x = 0, 1.5, 3
  EXPECT_EQ(run({3}, {{"coordinate_transformation_mode", "align_corners"}}), (V{10, 20, 40}));
  // simple (Resize-10 / Upsample): floor when upsampling, ceil when downsampling; 4 -> 3: x = 0, 4/3, 8/3
  EXPECT_EQ(run({3}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "simple"}}),
            (V{10, 30, 40}));
  EXPECT_EQ(run({6}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "simple"}}),
            (V{10, 10, 20, 30, 30, 40}));
  // tf_half_pixel_for_nn (opset 11): x = (y + 0.5) / scale; 4 -> 2: x = 1, 3
  EXPECT_EQ(run({2}, {{"coordinate_transformation_mode", "tf_half_pixel_for_nn"}}), (V{20, 40}));
}

TEST(ResizeKernel, LinearAndCubicByHand) {
  Tensor x = f32({1, 2}, {2});
  auto run = [&](int64_t n, AttrMap attrs) {
    OneOp o(OpKind::Resize, {I(x), absent(), absent(), C(i64v({n}))}, std::move(attrs));
    return o.run()[0];
  };
  expect_near(run(4, {{"mode", "linear"}}), {1, 1.25, 1.75, 2});
  expect_near(run(4, {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
              {1, 4.0 / 3, 5.0 / 3, 2});
  expect_near(run(4, {{"mode", "linear"}, {"coordinate_transformation_mode", "asymmetric"}}), {1, 1.5, 2, 2});
  // Cubic at the exact samples reproduces the input; with a = -0.75 at x = 0.5 of [0, 0, 1, 1]-like data:
  expect_near(run(2, {{"mode", "cubic"}}), {1, 2});
  Tensor step = f32({0, 0, 1, 1}, {4});
  OneOp c(OpKind::Resize, {I(step), absent(), absent(), C(i64v({7}))},
          {{"mode", "cubic"}, {"coordinate_transformation_mode", "align_corners"}});
  auto y = c.run()[0];
  // x = 1.5: weights for d = 1.5, 0.5, 0.5, 1.5 -> (0 * w1 + 0 * w0) + (1 * w0 + 1 * w1) = 0.5 by symmetry
  EXPECT_NEAR(y.get_f64(3), 0.5, 1e-6);
  EXPECT_NEAR(y.get_f64(0), 0, 1e-6);
  EXPECT_NEAR(y.get_f64(6), 1, 1e-6);
  // exclude_outside renormalizes the in-range weights: at x = 0.5 of [1, 2] both taps outside are dropped.
  OneOp e(OpKind::Resize, {I(x), absent(), absent(), C(i64v({1}))},
          {{"mode", "cubic"}, {"exclude_outside", int64_t(1)}, {"coordinate_transformation_mode", "half_pixel"}});
  expect_near(e.run()[0], {1.5});
}

TEST(ResizeKernel, CropAndResizeExtrapolates) {
  Tensor x = f32({0, 1, 2, 3}, {4});
  // roi [0.5, 1.5]: x = 1.5 + y * 3 / 2 -> 1.5, 3, 4.5 (outside -> extrapolation_value)
  OneOp o(OpKind::Resize, {I(x), I(f32({0.5f, 1.5f}, {2})), absent(), C(i64v({3}))},
          {{"mode", "linear"}, {"coordinate_transformation_mode", "tf_crop_and_resize"},
           {"extrapolation_value", -7.0}});
  expect_near(o.run()[0], {1.5, 3, -7});
}

TEST(ResizeKernel, IntegerBoolAndHalfDtypes) {
  // u8: linear rounds to nearest and saturates; nearest copies exactly.
  OneOp u8(OpKind::Resize, {I(tensor<uint8_t>({0, 255}, {2})), absent(), absent(), C(i64v({4}))}, {{"mode", "linear"}});
  EXPECT_EQ(as_f64(u8.run()[0]), (std::vector<double>{0, 64, 191, 255}));
  OneOp u8c(OpKind::Resize, {I(tensor<uint8_t>({0, 255, 255, 0}, {4})), absent(), absent(), C(i64v({8}))},
            {{"mode", "cubic"}});
  for (double v : as_f64(u8c.run()[0])) EXPECT_TRUE(v >= 0 && v <= 255);  // overshoot saturates
  // i64 beyond double precision survives nearest exactly.
  const int64_t big = (int64_t(1) << 60) + 1;
  OneOp i64n(OpKind::Resize, {I(tensor<int64_t>({big, -big}, {2})), absent(), C(scales({2}))});
  auto yi = i64n.run()[0];
  EXPECT_EQ(yi.data<int64_t>()[0], big);
  EXPECT_EQ(yi.data<int64_t>()[3], -big);
  // bool: nearest copies; linear rounds the blend.
  OneOp bn(OpKind::Resize, {I(tensor<bool>({true, false}, {2})), absent(), C(scales({2}))});
  EXPECT_EQ(as_f64(bn.run()[0]), (std::vector<double>{1, 1, 0, 0}));
  OneOp bl(OpKind::Resize, {I(tensor<bool>({true, false}, {2})), absent(), C(scales({2}))}, {{"mode", "linear"}});
  EXPECT_EQ(as_f64(bl.run()[0]), (std::vector<double>{1, 1, 0, 0}));
  // i8 linear: negative values round half away from zero.
  OneOp i8(OpKind::Resize, {I(tensor<int8_t>({-1, -2}, {2})), absent(), C(scales({2}))}, {{"mode", "linear"}});
  EXPECT_EQ(as_f64(i8.run()[0]), (std::vector<double>{-1, -1, -2, -2}));
  // f16, bf16 and f64 agree with f32.
  for (DType d : {DType::f16, DType::bf16, DType::f64}) {
    Tensor x = Tensor::zeros(d, {2});
    visit_dtype(d, [&]<class T>() {
      if constexpr (is_float_v<T>) {
        x.data<T>()[0] = T(compute_t<T>(1));
        x.data<T>()[1] = T(compute_t<T>(2));
      }
    });
    OneOp o(OpKind::Resize, {I(x), absent(), C(scales({2}))}, {{"mode", "linear"}});
    auto y = o.run()[0];
    EXPECT_EQ(y.dtype(), d);
    expect_near(y, {1, 1.25, 1.75, 2}, 1e-2);
  }
}

TEST(ResizeKernel, SpecialValuesStayWhereTheyAre) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Identity scale, linear: every output is an exact sample, so inf and NaN do not leak into neighbours.
  OneOp o(OpKind::Resize, {I(f32({1, inf, nan, -0.0f}, {4})), absent(), C(scales({1}))}, {{"mode", "linear"}});
  auto y = o.run()[0];
  EXPECT_EQ(y.get_f64(0), 1);
  EXPECT_EQ(y.get_f64(1), inf);
  EXPECT_TRUE(std::isnan(y.get_f64(2)));
  EXPECT_TRUE(std::signbit(y.get_f64(3)));
  // Upsampling between 1 and inf gives inf; nearest copies NaN bit-for-bit.
  OneOp u(OpKind::Resize, {I(f32({1, inf}, {2})), absent(), C(scales({2}))}, {{"mode", "linear"}});
  EXPECT_EQ(u.run()[0].get_f64(2), inf);
  OneOp n(OpKind::Resize, {I(f32({nan, 2}, {2})), absent(), C(scales({2}))});
  EXPECT_TRUE(std::isnan(n.run()[0].get_f64(1)));
}

TEST(ResizeKernel, EmptyTensorsAndHigherRanks) {
  OneOp e(OpKind::Resize, {I(Tensor::zeros(DType::f32, {0, 3})), absent(), C(scales({1, 2}))}, {{"mode", "cubic"}});
  EXPECT_EQ(e.run()[0].shape(), (std::vector<int64_t>{0, 6}));
  OneOp z(OpKind::Resize, {I(f32({1, 2}, {1, 2})), absent(), absent(), C(i64v({1, 0}))});
  EXPECT_EQ(z.run()[0].numel(), 0);
  // 5-D trilinear: a linear ramp in every axis is reproduced exactly by N-linear interpolation (align_corners).
  std::vector<float> v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) v.push_back(float(4 * a + 2 * b + c));
  OneOp t(OpKind::Resize, {I(f32(v, {1, 2, 1, 2, 2})), absent(), absent(), C(i64v({1, 3, 1, 3, 3}))},
          {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
  auto y = t.run()[0];
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(y.get_f64((a * 3 + b) * 3 + c), 2.0 * a + b + 0.5 * c, 1e-6);
}

// ---------------------------------------------------------------------------------------------------------------
// ONNX converters

namespace {

// A model with one node `op` (opset `opset`) reading x: f32[1, 1, 2, 2] and, when given, a scales initializer.
onnx::ModelProto upsample_model(const std::string& op, int opset, std::vector<float> init_scales,
                                std::function<void(onnx::NodeProto*)> attrs) {
  onnx::ModelProto m = onnx_model(7, opset);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {});
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto* n = g->add_node();
  n->set_op_type(op);
  n->add_input("x");
  if (!init_scales.empty()) {
    auto* s = g->add_initializer();
    s->set_name("s");
    s->set_data_type(onnx::TensorProto::FLOAT);
    s->add_dims(int64_t(init_scales.size()));
    for (float f : init_scales) s->add_float_data(f);
    n->add_input("s");
  }
  n->add_output("y");
  attrs(n);
  return m;
}

std::vector<double> run_model(const std::shared_ptr<Graph>& g) {
  Executor ex(g, reference_kernels());
  return as_f64(ex.run({f32({1, 2, 3, 4}, {1, 1, 2, 2})})[0]);
}

void set_attr(onnx::NodeProto* n, const std::string& name, const std::string& s) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(s);
}

}  // namespace

TEST(RecurrentConvert, UpsampleAndResize10LowerToResize) {
  const std::vector<double> want = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};  // nearest, 2x2
  // Upsample-9: scales input.
  auto g9 = import(upsample_model("Upsample", 9, {1, 1, 2, 2}, [](onnx::NodeProto*) {}));
  const Node& n9 = *g9->nodes()[0];
  EXPECT_EQ(n9.op(), OpKind::Resize);
  EXPECT_EQ(n9.attr("coordinate_transformation_mode").s(), "asymmetric");
  EXPECT_EQ(n9.attr("nearest_mode").s(), "floor");
  EXPECT_EQ(g9->outputs()[0]->shape(), Shape({1, 1, 4, 4}));
  EXPECT_EQ(run_model(g9), want);
  // Upsample-7: scales attribute.
  auto g7 = import(upsample_model("Upsample", 7, {}, [](onnx::NodeProto* n) {
    auto* a = n->add_attribute();
    a->set_name("scales");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float f : {1.f, 1.f, 2.f, 2.f}) a->add_floats(f);
  }));
  EXPECT_EQ(run_model(g7), want);
  // Upsample-1: height_scale / width_scale, "bilinear".
  auto g1 = import(upsample_model("Upsample", 1, {}, [](onnx::NodeProto* n) {
    for (const char* name : {"height_scale", "width_scale"}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(2.f);
    }
    set_attr(n, "mode", "bilinear");
  }));
  EXPECT_EQ(run_model(g1), (std::vector<double>{1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4}));
  // Resize-10 downsampling rounds up (asymmetric, ceil): 2 -> 1 picks x = 0 -> index 0 either way; use 0.6.
  auto g10 = import(upsample_model("Resize", 10, {1, 1, 0.6f, 1}, [](onnx::NodeProto*) {}));
  EXPECT_EQ(g10->nodes()[0]->attr("nearest_mode").s(), "ceil");
  EXPECT_EQ(run_model(g10), (std::vector<double>{1, 2}));
  // Mixed directions keep Resize-10's per-axis rule.
  auto gm = import(upsample_model("Resize", 10, {1, 1, 0.6f, 2}, [](onnx::NodeProto*) {}));
  EXPECT_EQ(gm->nodes()[0]->attr("nearest_mode").s(), "simple");
  EXPECT_EQ(run_model(gm), (std::vector<double>{1, 1, 2, 2}));
  // Unknown modes and attributes are errors naming the op.
  EXPECT_CUVIL_ERROR(import(upsample_model("Upsample", 9, {1, 1, 2, 2}, [](onnx::NodeProto* n) {
                       set_attr(n, "mode", "cubic");
                     })),
                     "mode 'cubic'");
  EXPECT_CUVIL_ERROR(import(upsample_model("Upsample", 9, {1, 1, 2, 2}, [](onnx::NodeProto* n) {
                       set_attr(n, "bogus", "x");
                     })),
                     "attribute 'bogus'");
}

TEST(RecurrentConvert, OldRnnDropsOutputSequence) {
  onnx::ModelProto m = onnx_model(3, 1);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 1, 1});
  set_type(g->add_output(), "yh", onnx::TensorProto::FLOAT, {1, 1, 1});
  for (const char* name : {"w", "r"}) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int k = 0; k < 3; ++k) t->add_dims(1);
    t->add_float_data(1.f);
  }
  auto* n = g->add_node();
  n->set_op_type("RNN");
  for (const char* in : {"x", "w", "r"}) n->add_input(in);
  n->add_output("");
  n->add_output("yh");
  auto* a = n->add_attribute();
  a->set_name("output_sequence");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(0);
  auto gr = import(m);
  Executor ex(gr, reference_kernels());
  auto y = ex.run({f32({1, 1}, {2, 1, 1})});
  expect_near(y[0], {std::tanh(1 + std::tanh(1.0))});
}
