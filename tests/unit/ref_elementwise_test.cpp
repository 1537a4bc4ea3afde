// The elementwise family: inference, reference kernels and ONNX legacy converters, on the cases the ONNX node
// suite misses (empty tensors, broadcasting corners, every dtype class, special float values, bad input).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "frontend/onnx/onnx_importer.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<Tensor> run1(OpKind op, const std::vector<Tensor>& ins, AttrMap attrs = {}) {
  return run_on_inputs(op, ins, std::move(attrs));
}

template <class T>
Tensor of_floats(std::vector<float> v) {
  std::vector<T> c;
  for (float f : v) c.push_back(T(f));
  return vec<T>(c);
}

}  // namespace

// ---- unary math

TEST(RefElementwise, UnaryFloatMathOnEveryFloatDtype) {
  std::vector<float> x = {-0.75f, -0.25f, 0.f, 0.5f, 0.9f};
  struct Case {
    OpKind op;
    double (*ref)(double);
  };
  std::vector<Case> cases = {
      {OpKind::Sin, [](double v) { return std::sin(v); }},   {OpKind::Cos, [](double v) { return std::cos(v); }},
      {OpKind::Tan, [](double v) { return std::tan(v); }},   {OpKind::Asin, [](double v) { return std::asin(v); }},
      {OpKind::Acos, [](double v) { return std::acos(v); }}, {OpKind::Atan, [](double v) { return std::atan(v); }},
      {OpKind::Sinh, [](double v) { return std::sinh(v); }}, {OpKind::Cosh, [](double v) { return std::cosh(v); }},
      {OpKind::Asinh, [](double v) { return std::asinh(v); }},
      {OpKind::Atanh, [](double v) { return std::atanh(v); }},
      {OpKind::Tanh, [](double v) { return std::tanh(v); }}, {OpKind::Exp, [](double v) { return std::exp(v); }},
      {OpKind::Erf, [](double v) { return std::erf(v); }},   {OpKind::Ceil, [](double v) { return std::ceil(v); }},
      {OpKind::Floor, [](double v) { return std::floor(v); }},
      {OpKind::Sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {OpKind::Softsign, [](double v) { return v / (1 + std::fabs(v)); }},
      {OpKind::Softplus, [](double v) { return std::log(1 + std::exp(v)); }},
      {OpKind::HardSwish, [](double v) { return v * std::max(0.0, std::min(1.0, v / 6 + 0.5)); }},
  };
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      Tensor in = visit_dtype(dt, [&]<class T>() {
        if constexpr (is_float_v<T>) return of_floats<T>(x);
        else return Tensor();
      });
      auto out = run1(c.op, {in});
      ASSERT_EQ(out[0].dtype(), dt);
      double tol = dt == DType::f32 ? 1e-6 : dt == DType::f64 ? 1e-12 : dt == DType::f16 ? 2e-3 : 1.6e-2;
      for (int64_t i = 0; i < in.numel(); ++i) {
        double want = c.ref(in.get_f64(i));
        EXPECT_NEAR(out[0].get_f64(i), want, tol * std::max(1.0, std::fabs(want)))
            << op_name(c.op) << " " << dtype_name(dt) << " at " << in.get_f64(i);
      }
    }
  }
}

TEST(RefElementwise, UnaryOnEmptyAndScalarTensors) {
  auto out = run1(OpKind::Exp, {Tensor::zeros(DType::f32, {0, 3})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{0, 3}));
  out = run1(OpKind::Neg, {Tensor::scalar<int64_t>(5)});
  EXPECT_EQ(out[0].rank(), 0u);
  EXPECT_EQ(out[0].data<int64_t>()[0], -5);
  out = run1(OpKind::Not, {Tensor::zeros(DType::boolean, {2, 0})});
  EXPECT_EQ(out[0].numel(), 0);
}

TEST(RefElementwise, SpecialFloatValues) {
  Tensor x = vec<float>({kNaN, kInf, -kInf, -0.f, 0.f, 2.5f, -2.5f, 0.5f, 1.5f});
  auto abs = values<float>(run1(OpKind::Abs, {x})[0]);
  EXPECT_TRUE(std::isnan(abs[0]));
  EXPECT_EQ(abs[2], kInf);
  EXPECT_FALSE(std::signbit(abs[3]));  // |-0| = +0
  auto relu = values<float>(run1(OpKind::Relu, {x})[0]);
  EXPECT_TRUE(std::isnan(relu[0]));
  EXPECT_EQ(relu[1], kInf);
  EXPECT_EQ(relu[2], 0.f);
  auto round = values<float>(run1(OpKind::Round, {x})[0]);  // half to even
  EXPECT_EQ(round[5], 2.f);
  EXPECT_EQ(round[6], -2.f);
  EXPECT_EQ(round[7], 0.f);
  EXPECT_EQ(round[8], 2.f);
  EXPECT_TRUE(std::isnan(round[0]));
  auto sign = values<float>(run1(OpKind::Sign, {x})[0]);
  EXPECT_TRUE(std::isnan(sign[0]));
  EXPECT_EQ(sign[1], 1.f);
  EXPECT_EQ(sign[2], -1.f);
  EXPECT_EQ(sign[3], 0.f);
  auto sig = values<float>(run1(OpKind::Sigmoid, {vec<float>({-1000.f, 1000.f, 0.f})})[0]);
  EXPECT_EQ(sig[0], 0.f);
  EXPECT_EQ(sig[1], 1.f);
  EXPECT_EQ(sig[2], 0.5f);
  auto sp = values<float>(run1(OpKind::Softplus, {vec<float>({1000.f, -1000.f})})[0]);
  EXPECT_EQ(sp[0], 1000.f);
  EXPECT_EQ(sp[1], 0.f);
  auto rec = values<float>(run1(OpKind::Reciprocal, {vec<float>({0.f, -0.f})})[0]);
  EXPECT_EQ(rec[0], kInf);
  EXPECT_EQ(rec[1], -kInf);
  auto lg = values<float>(run1(OpKind::Log, {vec<float>({0.f, -1.f})})[0]);
  EXPECT_EQ(lg[0], -kInf);
  EXPECT_TRUE(std::isnan(lg[1]));
}

TEST(RefElementwise, IsInfIsNaN) {
  Tensor x = vec<float>({kNaN, kInf, -kInf, 1.f});
  EXPECT_EQ(values<bool>(run1(OpKind::IsNaN, {x})[0]), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::IsInf, {x})[0]), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::IsInf, {x}, {{"detect_negative", int64_t(0)}})[0]),
            (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::IsInf, {x}, {{"detect_positive", int64_t(0)}})[0]),
            (std::vector<bool>{false, false, true, false}));
  Tensor h = of_floats<f16_t>({kNaN, kInf, 3.f});
  EXPECT_EQ(values<bool>(run1(OpKind::IsNaN, {h})[0]), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::IsInf, {h})[0]), (std::vector<bool>{false, true, false}));
}

TEST(RefElementwise, IntegerUnaryOps) {
  EXPECT_EQ(values<int8_t>(run1(OpKind::Abs, {vec<int8_t>({-128, -3, 0, 7})})[0]),
            (std::vector<int8_t>{-128, 3, 0, 7}));  // wraps like numpy
  EXPECT_EQ(values<uint16_t>(run1(OpKind::Abs, {vec<uint16_t>({65535, 0})})[0]), (std::vector<uint16_t>{65535, 0}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Neg, {vec<int64_t>({INT64_MIN, -3, 4})})[0]),
            (std::vector<int64_t>{INT64_MIN, 3, -4}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::Relu, {vec<int32_t>({-5, 0, 5})})[0]), (std::vector<int32_t>{0, 0, 5}));
  EXPECT_EQ(values<int16_t>(run1(OpKind::Sign, {vec<int16_t>({-5, 0, 5})})[0]), (std::vector<int16_t>{-1, 0, 1}));
  EXPECT_EQ(values<uint32_t>(run1(OpKind::Sign, {vec<uint32_t>({0, 9})})[0]), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(values<bool>(run1(OpKind::Not, {vec<bool>({true, false})})[0]), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::Erf, {vec<int32_t>({0, 3, -3})})[0]), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run1(OpKind::Shrink, {vec<uint8_t>({0, 1, 5})}, {{"bias", 2.0}, {"lambd", 1.5}})[0]),
            (std::vector<uint8_t>{0, 0, 3}));
}

TEST(RefElementwise, UnaryRejectsWrongDtypes) {
  EXPECT_CUVIL_ERROR(run1(OpKind::Sin, {vec<int32_t>({1})}), "expected one of");
  EXPECT_CUVIL_ERROR(run1(OpKind::Neg, {vec<uint8_t>({1})}), "dtype u8");
  EXPECT_CUVIL_ERROR(run1(OpKind::Not, {vec<float>({1})}), "expected one of bool");
  EXPECT_CUVIL_ERROR(run1(OpKind::Abs, {vec<bool>({true})}), "dtype bool");
  EXPECT_CUVIL_ERROR(run1(OpKind::IsNaN, {vec<int64_t>({1})}), "dtype i64");
}

// ---- activations

TEST(RefElementwise, ActivationsWithAttributes) {
  Tensor x = vec<float>({-2.f, -0.5f, 0.f, 0.5f, 2.f});
  auto elu = values<float>(run1(OpKind::Elu, {x}, {{"alpha", 2.0}})[0]);
  EXPECT_FLOAT_EQ(elu[0], 2.f * std::expm1(-2.f));
  EXPECT_FLOAT_EQ(elu[4], 2.f);
  auto selu = values<float>(run1(OpKind::Selu, {x})[0]);
  EXPECT_NEAR(selu[0], 1.0507010f * (1.6732632f * std::exp(-2.f) - 1.6732632f), 1e-6);
  EXPECT_NEAR(selu[4], 1.0507010f * 2.f, 1e-6);
  EXPECT_CUVIL_ERROR(run1(OpKind::Celu, {x}, {{"alpha", 0.0}}), "alpha");
  auto celu = values<float>(run1(OpKind::Celu, {x}, {{"alpha", 0.5}})[0]);
  EXPECT_NEAR(celu[0], 0.5f * std::expm1(-2.f / 0.5f), 1e-6);
  EXPECT_EQ(celu[3], 0.5f);
  auto lrelu = values<float>(run1(OpKind::LeakyRelu, {x})[0]);
  EXPECT_FLOAT_EQ(lrelu[0], -0.02f);
  auto hs = values<float>(run1(OpKind::HardSigmoid, {x}, {{"alpha", 0.5}, {"beta", 0.25}})[0]);
  EXPECT_EQ(hs, (std::vector<float>{0.f, 0.f, 0.25f, 0.5f, 1.f}));
  auto tr = values<float>(run1(OpKind::ThresholdedRelu, {x}, {{"alpha", 0.5}})[0]);
  EXPECT_EQ(tr, (std::vector<float>{0.f, 0.f, 0.f, 0.f, 2.f}));  // strictly greater than alpha
  auto sh = values<float>(run1(OpKind::Shrink, {x}, {{"lambd", 1.0}, {"bias", 0.5}})[0]);
  EXPECT_EQ(sh, (std::vector<float>{-1.5f, 0.f, 0.f, 0.f, 1.5f}));
  // Integer attribute values are accepted for float attributes by the importer, not by the IR: use doubles.
  EXPECT_CUVIL_ERROR(run1(OpKind::Elu, {x}, {{"alpha", int64_t(1)}}), "alpha");
}

TEST(RefElementwise, PReluBroadcastsSlopeToX) {
  Tensor x = tensor<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  auto out = run1(OpKind::PRelu, {x, vec<float>({0.5f, 1.f, 2.f})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{-0.5f, 2, -6, 4, -5, 6}));
  out = run1(OpKind::PRelu, {x, tensor<float>({0.1f, 0.2f}, {2, 1})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_FLOAT_EQ(out[0].data<float>()[4], -1.f);
  out = run1(OpKind::PRelu, {vec<int32_t>({-4, 4}), Tensor::scalar<int32_t>(3)});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{-12, 4}));
  // The slope may not grow X.
  EXPECT_CUVIL_ERROR(run1(OpKind::PRelu, {vec<float>({1, 2, 3}), tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3})}),
                     "cannot broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::PRelu, {vec<float>({1, 2, 3}), vec<float>({1, 2})}), "cannot broadcast");
}

TEST(RefElementwise, ClipBoundsAreOptionalScalars) {
  Tensor x = vec<float>({-5.f, 0.f, 5.f, kNaN});
  auto r = run_op(OpKind::Clip, {input(x), input(Tensor::scalar<float>(-1.f)), input(Tensor::scalar<float>(1.f))});
  auto v = values<float>(r[0]);
  EXPECT_EQ(v[0], -1.f);
  EXPECT_EQ(v[2], 1.f);
  EXPECT_TRUE(std::isnan(v[3]));
  r = run_op(OpKind::Clip, {input(x), absent(), input(Tensor::scalar<float>(1.f))});
  EXPECT_EQ(r[0].data<float>()[0], -5.f);
  EXPECT_EQ(r[0].data<float>()[2], 1.f);
  r = run_op(OpKind::Clip, {input(x)});
  EXPECT_EQ(r[0].data<float>()[2], 5.f);
  // min > max: everything becomes max.
  r = run_op(OpKind::Clip, {input(x), input(Tensor::scalar<float>(2.f)), input(Tensor::scalar<float>(1.f))});
  EXPECT_EQ(r[0].data<float>()[0], 1.f);
  EXPECT_EQ(r[0].data<float>()[1], 1.f);
  r = run_op(OpKind::Clip, {input(vec<uint8_t>({0, 100, 255})), constant(Tensor::scalar<uint8_t>(10)),
                            constant(Tensor::scalar<uint8_t>(200))});
  EXPECT_EQ(values<uint8_t>(r[0]), (std::vector<uint8_t>{10, 100, 200}));
  EXPECT_CUVIL_ERROR(run_op(OpKind::Clip, {input(x), input(vec<float>({1.f, 2.f}))}), "must be a scalar");
  EXPECT_CUVIL_ERROR(run_op(OpKind::Clip, {input(x), input(Tensor::scalar<double>(1.0))}), "same dtype");
}

// ---- binary with broadcasting

TEST(RefElementwise, BroadcastingShapes) {
  Tensor a = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  Tensor b = tensor<float>({10, 20, 30, 40}, {4, 1});
  auto out = run1(OpKind::Add, {a, b});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4, 3}));
  const float* y = out[0].data<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y[(i * 4 + j) * 3 + k], a.data<float>()[i * 3 + k] + b.data<float>()[j]);
  // Scalar against a tensor, either side.
  out = run1(OpKind::Sub, {Tensor::scalar<float>(1.f), vec<float>({1, 2, 3})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, -1, -2}));
  // Empty broadcast dims.
  out = run1(OpKind::Mul, {Tensor::zeros(DType::f32, {0, 3}), vec<float>({1, 2, 3})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{0, 3}));
  out = run1(OpKind::Mul, {Tensor::zeros(DType::f32, {2, 1}), Tensor::zeros(DType::f32, {0})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 0}));
  // Odd, prime sizes through several dims.
  Tensor p = Tensor::zeros(DType::i32, {7, 1, 5});
  Tensor q = Tensor::zeros(DType::i32, {3, 1});
  for (int64_t i = 0; i < p.numel(); ++i) p.data<int32_t>()[i] = int32_t(i);
  for (int64_t i = 0; i < q.numel(); ++i) q.data<int32_t>()[i] = int32_t(100 * i);
  out = run1(OpKind::Add, {p, q});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{7, 3, 5}));
  EXPECT_EQ(out[0].data<int32_t>()[(6 * 3 + 2) * 5 + 4], 6 * 5 + 4 + 200);
  EXPECT_CUVIL_ERROR(run1(OpKind::Add, {vec<float>({1, 2, 3}), vec<float>({1, 2})}), "cannot be broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::Add, {vec<float>({1}), vec<double>({1})}), "same dtype");
}

TEST(RefElementwise, IntegerArithmeticWrapsAndChecksDivision) {
  auto out = run1(OpKind::Add, {vec<int32_t>({INT32_MAX}), vec<int32_t>({1})});
  EXPECT_EQ(out[0].data<int32_t>()[0], INT32_MIN);
  out = run1(OpKind::Mul, {vec<uint16_t>({65535}), vec<uint16_t>({65535})});
  EXPECT_EQ(out[0].data<uint16_t>()[0], uint16_t(1));
  out = run1(OpKind::Sub, {vec<uint8_t>({1}), vec<uint8_t>({2})});
  EXPECT_EQ(out[0].data<uint8_t>()[0], 255);
  out = run1(OpKind::Div, {vec<int32_t>({7, -7, 7, -7, INT32_MIN}), vec<int32_t>({2, 2, -2, -2, -1})});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{3, -3, -3, 3, INT32_MIN}));  // truncation
  EXPECT_CUVIL_ERROR(run1(OpKind::Div, {vec<int64_t>({1, 2}), vec<int64_t>({1, 0})}), "division by zero");
  out = run1(OpKind::Div, {vec<float>({1.f, -1.f, 0.f}), vec<float>({0.f, 0.f, 0.f})});
  EXPECT_EQ(out[0].data<float>()[0], kInf);
  EXPECT_EQ(out[0].data<float>()[1], -kInf);
  EXPECT_TRUE(std::isnan(out[0].data<float>()[2]));
  out = run1(OpKind::Add, {of_floats<f16_t>({1.f, 65504.f}), of_floats<f16_t>({2.f, 65504.f})});
  EXPECT_EQ(as_f64(out[0]), (std::vector<double>{3.0, INFINITY}));
}

TEST(RefElementwise, ModSignsAndFmod) {
  Tensor a = vec<int32_t>({-4, 7, 5, 4, -7, 8});
  Tensor b = vec<int32_t>({2, -3, 8, -2, 3, 5});
  EXPECT_EQ(values<int32_t>(run1(OpKind::Mod, {a, b})[0]), (std::vector<int32_t>{0, -2, 5, 0, 2, 3}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::Mod, {a, b}, {{"fmod", int64_t(1)}})[0]),
            (std::vector<int32_t>{0, 1, 5, 0, -1, 3}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Mod, {vec<int64_t>({INT64_MIN}), vec<int64_t>({-1})})[0]),
            (std::vector<int64_t>{0}));
  auto f = values<float>(run1(OpKind::Mod, {vec<float>({-4.5f, 7.5f}), vec<float>({2.f, -2.f})}, {{"fmod", int64_t(1)}})[0]);
  EXPECT_EQ(f, (std::vector<float>{-0.5f, 1.5f}));
  // fmod=0 on floats is numpy's mod: the divisor's sign, signed zeros from the divisor, NaN by zero, x % inf.
  const float inf = std::numeric_limits<float>::infinity();
  auto m = values<float>(run1(OpKind::Mod, {vec<float>({-4.5f, 7.5f, 4.f, -4.f, 1.f, -1.f, 2.f}),
                                            vec<float>({2.f, -2.f, -2.f, 2.f, 0.f, inf, inf})})[0]);
  EXPECT_EQ(m[0], 1.5f);
  EXPECT_EQ(m[1], -0.5f);
  EXPECT_TRUE(m[2] == 0 && std::signbit(m[2]));
  EXPECT_TRUE(m[3] == 0 && !std::signbit(m[3]));
  EXPECT_TRUE(std::isnan(m[4]));
  EXPECT_EQ(m[5], inf);  // -1 + inf, as numpy
  EXPECT_EQ(m[6], 2.f);
  EXPECT_CUVIL_ERROR(run1(OpKind::Mod, {vec<uint8_t>({1}), vec<uint8_t>({0})}), "modulo by zero");
}

TEST(RefElementwise, PowMixedDtypes) {
  EXPECT_EQ(values<float>(run1(OpKind::Pow, {vec<float>({2, 3}), vec<int64_t>({3, -1})})[0]),
            (std::vector<float>{8.f, 1.f / 3.f}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::Pow, {vec<int32_t>({2, 3, -2}), vec<float>({3.f, 0.5f, 2.f})})[0]),
            (std::vector<int32_t>{8, 1, 4}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::Pow, {vec<int64_t>({3, 2, -1, 1, 5}), vec<int64_t>({39, 64, 3, -5, -1})})[0]),
            (std::vector<int64_t>{4052555153018976267LL, 0, -1, 1, 0}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::Pow, {vec<int32_t>({2}), vec<uint64_t>({10})})[0]), (std::vector<int32_t>{1024}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Pow, {vec<int32_t>({0}), vec<int32_t>({-1})}), "negative integer power");
  EXPECT_CUVIL_ERROR(run1(OpKind::Pow, {vec<uint8_t>({2}), vec<uint8_t>({2})}), "dtype u8");
  auto out = run1(OpKind::Pow, {of_floats<f16_t>({2.f}), Tensor::scalar<float>(10.f)});
  EXPECT_EQ(out[0].dtype(), DType::f16);
  EXPECT_EQ(out[0].get_f64(0), 1024.0);
}

TEST(RefElementwise, BitShiftDirectionsAndWidths) {
  auto l = run1(OpKind::BitShift, {vec<uint8_t>({1, 255, 1, 1}), vec<uint8_t>({7, 1, 8, 200})}, {{"direction", "LEFT"}});
  EXPECT_EQ(values<uint8_t>(l[0]), (std::vector<uint8_t>{128, 254, 0, 0}));
  auto r = run1(OpKind::BitShift, {vec<uint64_t>({~0ULL, 8}), vec<uint64_t>({63, 64})}, {{"direction", "RIGHT"}});
  EXPECT_EQ(values<uint64_t>(r[0]), (std::vector<uint64_t>{1, 0}));
  auto w = run1(OpKind::BitShift, {vec<uint16_t>({65535}), vec<uint16_t>({15})}, {{"direction", "LEFT"}});
  EXPECT_EQ(w[0].data<uint16_t>()[0], 32768);
  EXPECT_CUVIL_ERROR(run1(OpKind::BitShift, {vec<uint8_t>({1}), vec<uint8_t>({1})}, {{"direction", "UP"}}), "direction");
  // Signed types (opset 28): arithmetic right shifts, left shifts wrap, negative or too-wide amounts give 0
  // (-1 for a negative value shifted right).
  EXPECT_EQ(values<int8_t>(run1(OpKind::BitShift, {vec<int8_t>({-128, 64, 3, 1, -5, 5}), vec<int8_t>({1, 1, -1, 8, 9, 9})},
                                {{"direction", "LEFT"}})[0]),
            (std::vector<int8_t>{0, -128, 0, 0, 0, 0}));
  EXPECT_EQ(values<int32_t>(run1(OpKind::BitShift, {vec<int32_t>({-8, 8, -1, -5, 5, -7}), vec<int32_t>({1, 2, 31, 32, -1, -3})},
                                 {{"direction", "RIGHT"}})[0]),
            (std::vector<int32_t>{-4, 2, -1, -1, 0, -1}));
  EXPECT_EQ(values<int64_t>(run1(OpKind::BitShift, {vec<int64_t>({1}), vec<int64_t>({63})}, {{"direction", "LEFT"}})[0]),
            (std::vector<int64_t>{INT64_MIN}));
  EXPECT_CUVIL_ERROR(run1(OpKind::BitShift, {vec<float>({1}), vec<float>({1})}, {{"direction", "LEFT"}}), "dtype f32");
  EXPECT_CUVIL_ERROR(run1(OpKind::BitShift, {vec<uint8_t>({1}), vec<uint8_t>({1})}), "direction");
}

TEST(RefElementwise, LogicAndComparisons) {
  Tensor t = tensor<bool>({true, false, true, false}, {2, 2});
  Tensor u = vec<bool>({true, false});
  EXPECT_EQ(values<bool>(run1(OpKind::And, {t, u})[0]), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::Or, {t, u})[0]), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::Xor, {t, u})[0]), (std::vector<bool>{false, false, false, false}));
  Tensor x = vec<float>({1.f, kNaN, -0.f, 2.f});
  Tensor y = vec<float>({1.f, kNaN, 0.f, 3.f});
  EXPECT_EQ(values<bool>(run1(OpKind::Equal, {x, y})[0]), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::Less, {x, y})[0]), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(values<bool>(run1(OpKind::LessOrEqual, {x, y})[0]), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(values<bool>(run1(OpKind::Greater, {x, y})[0]), (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::GreaterOrEqual, {x, y})[0]), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::Equal, {u, Tensor::scalar<bool>(true)})[0]), (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(run1(OpKind::Greater, {vec<uint64_t>({~0ULL, 0}), vec<uint64_t>({1, 1})})[0]),
            (std::vector<bool>{true, false}));
  EXPECT_CUVIL_ERROR(run1(OpKind::And, {vec<int32_t>({1}), vec<int32_t>({1})}), "dtype i32");
  EXPECT_CUVIL_ERROR(run1(OpKind::Less, {u, u}), "dtype bool");
}

TEST(RefElementwise, WhereBroadcastsAllThree) {
  Tensor c = tensor<bool>({true, false}, {2, 1});
  Tensor x = vec<int64_t>({1, 2, 3});
  Tensor y = Tensor::scalar<int64_t>(-1);
  auto out = run1(OpKind::Where, {c, x, y});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Where, {vec<int32_t>({1}), x, y}), "dtype i32");
  EXPECT_CUVIL_ERROR(run1(OpKind::Where, {c, x, Tensor::scalar<int32_t>(1)}), "same dtype");
}

TEST(RefElementwise, VariadicMaxMinSumMean) {
  Tensor a = tensor<float>({1, 5, kNaN, 0}, {2, 2});
  Tensor b = vec<float>({3, 2});
  Tensor c = Tensor::scalar<float>(4.f);
  auto mx = values<float>(run1(OpKind::Max, {a, b, c})[0]);
  EXPECT_EQ(mx[0], 4.f);
  EXPECT_EQ(mx[1], 5.f);
  EXPECT_TRUE(std::isnan(mx[2]));  // NaN propagates, like numpy.maximum
  EXPECT_EQ(mx[3], 4.f);
  auto mn = values<float>(run1(OpKind::Min, {a, b})[0]);
  EXPECT_EQ(mn[0], 1.f);
  EXPECT_TRUE(std::isnan(mn[2]));
  EXPECT_EQ(values<float>(run1(OpKind::Sum, {a, b, c})[0])[1], 11.f);
  EXPECT_EQ(values<float>(run1(OpKind::Mean, {a, b, c})[0])[0], 8.f / 3.f);
  EXPECT_EQ(values<float>(run1(OpKind::Sum, {b})[0]), (std::vector<float>{3, 2}));
  EXPECT_EQ(values<uint32_t>(run1(OpKind::Max, {vec<uint32_t>({1, 4000000000u}), vec<uint32_t>({2, 3})})[0]),
            (std::vector<uint32_t>{2, 4000000000u}));
  EXPECT_EQ(values<int8_t>(run1(OpKind::Min, {vec<int8_t>({-128, 127})})[0]), (std::vector<int8_t>{-128, 127}));
  auto h = run1(OpKind::Mean, {of_floats<bf16_t>({1.f, 2.f}), of_floats<bf16_t>({2.f, 4.f})});
  EXPECT_EQ(as_f64(h[0]), (std::vector<double>{1.5, 3.0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Sum, {vec<int32_t>({1}), vec<int32_t>({1})}), "dtype i32");
  EXPECT_CUVIL_ERROR(run1(OpKind::Max, {vec<float>({1}), vec<double>({1})}), "same dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::Max, {vec<float>({1, 2}), vec<float>({1, 2, 3})}), "cannot be broadcast");
}

// ---- Cast, CastLike, Identity, Dropout

TEST(RefElementwise, CastFloatToIntegerTruncatesAndNeverHitsUB) {
  Tensor x = vec<float>({2.9f, -2.9f, kNaN, 1e30f, -1e30f, 300.f, -1.f});
  AttrMap to_i32 = {{"to", int64_t(6)}};
  auto out = values<int32_t>(run1(OpKind::Cast, {x}, to_i32)[0]);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], -2);
  EXPECT_EQ(out[2], 0);
  auto i64 = values<int64_t>(run1(OpKind::Cast, {x}, {{"to", int64_t(7)}})[0]);
  EXPECT_EQ(i64[3], INT64_MAX);
  EXPECT_EQ(i64[4], INT64_MIN);
  auto u8 = values<uint8_t>(run1(OpKind::Cast, {x}, {{"to", int64_t(2)}})[0]);
  EXPECT_EQ(u8[5], uint8_t(300 % 256));  // modular, like numpy's astype
  EXPECT_EQ(u8[6], 255);
  auto u64 = values<uint64_t>(run1(OpKind::Cast, {vec<double>({1.8446744073709550e19, 1e300})}, {{"to", int64_t(13)}})[0]);
  EXPECT_EQ(u64[0], 18446744073709549568ULL);
  EXPECT_EQ(u64[1], ~0ULL);
}

TEST(RefElementwise, CastBetweenFloatsBoolsAndIntegers) {
  auto b = values<bool>(run1(OpKind::Cast, {vec<float>({0.f, -0.f, 0.5f, kNaN})}, {{"to", int64_t(9)}})[0]);
  EXPECT_EQ(b, (std::vector<bool>{false, false, true, true}));
  auto f = values<float>(run1(OpKind::Cast, {vec<bool>({true, false})}, {{"to", int64_t(1)}})[0]);
  EXPECT_EQ(f, (std::vector<float>{1.f, 0.f}));
  auto w = values<int8_t>(run1(OpKind::Cast, {vec<int32_t>({200, -129})}, {{"to", int64_t(3)}})[0]);
  EXPECT_EQ(w, (std::vector<int8_t>{-56, 127}));
  auto h = run1(OpKind::Cast, {vec<double>({1.0 / 3, 70000.0, -kInf})}, {{"to", int64_t(10)}})[0];
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_NEAR(h.get_f64(0), 1.0 / 3, 1e-3);
  EXPECT_EQ(h.get_f64(1), INFINITY);
  EXPECT_EQ(h.get_f64(2), -INFINITY);
  // To bf16 the low mantissa bits are cut (ONNX's Cast through opset 17); NaN stays NaN.
  auto bf = run1(OpKind::Cast, {vec<float>({0.48033667f, kNaN, -kInf})}, {{"to", int64_t(16)}})[0];
  EXPECT_EQ(bf.data<bf16_t>()[0].bits, uint16_t(std::bit_cast<uint32_t>(0.48033667f) >> 16));
  EXPECT_TRUE(std::isnan(bf.get_f64(1)));
  EXPECT_EQ(bf.get_f64(2), -INFINITY);
  // round_bf16 (opset 19+ imports, ONNX Runtime): to nearest even; 0x3ef5eeb0 rounds up, NaN stays NaN.
  auto rn = run1(OpKind::Cast, {vec<float>({0.48033667f, kNaN, 1.0f + 1.0f / 256})},
                 {{"to", int64_t(16)}, {"round_bf16", int64_t(1)}})[0];
  EXPECT_EQ(rn.data<bf16_t>()[0].bits, uint16_t(0x3ef6));
  EXPECT_TRUE(std::isnan(rn.get_f64(1)));
  EXPECT_EQ(rn.get_f64(2), 1.0);  // a tie goes to the even mantissa
  auto back = run1(OpKind::Cast, {bf}, {{"to", int64_t(11)}})[0];
  EXPECT_EQ(back.dtype(), DType::f64);
  EXPECT_NEAR(back.get_f64(0), 0.4785, 1e-4);
  // Same-type casts and empty tensors.
  EXPECT_EQ(run1(OpKind::Cast, {Tensor::zeros(DType::u16, {0, 2})}, {{"to", int64_t(4)}})[0].shape(),
            (std::vector<int64_t>{0, 2}));
  // Strings: numbers as NumPy writes them, text read whole (cases_strings.cpp has more).
  Tensor text = run1(OpKind::Cast, {vec<float>({1.5f, 100.f, 1e-5f})}, {{"to", int64_t(8)}})[0];
  EXPECT_EQ(text.str_values(), (std::vector<std::string>{"1.5", "100.0", "1e-05"}));
  EXPECT_EQ(run1(OpKind::Cast, {text}, {{"to", int64_t(1)}})[0].get_f64(2), double(1e-5f));
  EXPECT_CUVIL_ERROR(run1(OpKind::Cast, {Tensor::strings({"1.5", "x"}, {2})}, {{"to", int64_t(7)}}),
                     "is not a i64 value");
  EXPECT_CUVIL_ERROR(run1(OpKind::Cast, {vec<float>({1})}, {{"to", int64_t(99)}}), "not a supported data type");
  EXPECT_CUVIL_ERROR(run1(OpKind::Cast, {vec<float>({1})}), "'to'");
}

TEST(RefElementwise, CastLikeTakesTheSecondInputsDtype) {
  auto out = run1(OpKind::CastLike, {vec<float>({1.5f, -2.5f}), Tensor::zeros(DType::i64, {0})});
  EXPECT_EQ(out[0].dtype(), DType::i64);
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, -2}));
}

TEST(RefElementwise, IdentityCopies) {
  Tensor x = tensor<int16_t>({1, 2, 3, 4}, {2, 2});
  auto out = run1(OpKind::Identity, {x});
  EXPECT_TRUE(out[0].same_bytes(x));
  EXPECT_NE(out[0].raw(), x.raw());
}

TEST(RefElementwise, DropoutIsIdentityInInference) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = run_op(OpKind::Dropout, {input(x)}, {}, 2);
  EXPECT_TRUE(out[0].same_bytes(x));
  EXPECT_EQ(out[1].dtype(), DType::boolean);
  EXPECT_EQ(values<bool>(out[1]), std::vector<bool>(6, true));
  out = run_op(OpKind::Dropout, {input(x), input(Tensor::scalar<float>(0.5f)), input(Tensor::scalar<bool>(false))},
               {}, 2);
  EXPECT_TRUE(out[0].same_bytes(x));
  out = run_op(OpKind::Dropout, {input(x), input(Tensor::scalar<float>(0.f)), input(Tensor::scalar<bool>(true))},
               {}, 2);
  EXPECT_TRUE(out[0].same_bytes(x));
  EXPECT_EQ(values<bool>(out[1]), std::vector<bool>(6, true));
  EXPECT_CUVIL_ERROR(
      run_op(OpKind::Dropout, {input(x), input(Tensor::scalar<float>(0.3f)), input(Tensor::scalar<bool>(true))}),
      "random");
  EXPECT_CUVIL_ERROR(run_op(OpKind::Dropout, {input(x), absent(), input(Tensor::scalar<bool>(true))}), "random");
  EXPECT_CUVIL_ERROR(run_op(OpKind::Dropout, {input(vec<int32_t>({1}))}), "dtype i32");
  EXPECT_CUVIL_ERROR(
      run_op(OpKind::Dropout, {input(x), input(Tensor::scalar<float>(0.f)), input(Tensor::scalar<int32_t>(1))}),
      "dtype i32");
}

// ---- shape inference with symbolic dims and shape values

TEST(RefElementwise, SymbolicBroadcastAndInplaceChain) {
  auto g = std::make_shared<Graph>();
  Dim batch = Dim::symbol("batch");
  Value* x = g->add_input("x", TensorType{DType::f32, Shape({batch, Dim(3)})});
  Value* b = g->add_constant("b", vec<float>({1, 2, 3}));
  Node* add = g->add_node(OpKind::Add, {x, b}, {"a"});
  Node* relu = g->add_node(OpKind::Relu, {add->output(0)}, {"r"});
  Node* neg = g->add_node(OpKind::Neg, {relu->output(0)}, {"n"});
  Value* lim = g->add_constant("lim", Tensor::scalar<float>(-1.f));
  Node* cmp = g->add_node(OpKind::Less, {neg->output(0), lim}, {"c"});
  g->add_output(neg->output(0));
  g->add_output(cmp->output(0));
  infer_shapes(*g);
  verify(*g);
  EXPECT_EQ(neg->output(0)->type().str(), "f32[batch, 3]");
  EXPECT_EQ(cmp->output(0)->type().str(), "bool[batch, 3]");
  Executor exec(g, reference_kernels());
  Tensor in = tensor<float>({-5, 0, 1, 2, -3, -4}, {2, 3});
  auto out = exec.run({in});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{-0.f, -2, -4, -3, -0.f, 0}));
  EXPECT_EQ(values<bool>(out[1]), (std::vector<bool>{false, true, true, true, false, false}));
  EXPECT_GE(exec.stats().inplace_reuses, 1);
}

// An output of the same byte size as a broadcast input must not be written over it: Less(i64[8], i64[2, 1]) is
// bool[2, 8], 16 bytes like its [2, 1] operand, which the kernel still reads (a found wrong answer, -O0 only:
// the Cast makes the Less's result an arena value).
TEST(RefElementwise, BroadcastInputOfEqualBytesIsNotOverwritten) {
  auto g = std::make_shared<Graph>();
  Value* n = g->add_input("n", TensorType{DType::i64, Shape({Dim(2)})});
  Value* r = g->add_constant("r", vec<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}));
  Value* axes = g->add_constant("axes", vec<int64_t>({1}));
  Node* col = g->add_node(OpKind::Unsqueeze, {n, axes}, {"col"});
  Node* lt = g->add_node(OpKind::Less, {r, col->output(0)}, {"lt"});
  Node* cast = g->add_node(OpKind::Cast, {lt->output(0)}, {"y"}, {{"to", int64_t(1)}});
  g->add_output(cast->output(0));
  infer_shapes(*g);
  verify(*g);
  for (const ExecutorOptions& kernels : {reference_kernels(), ExecutorOptions{}}) {
    Executor exec(g, kernels);
    auto out = exec.run({tensor<int64_t>({3, 6}, {2})});
    EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0}));
  }
}

namespace {
// Runs an op's inference with the given dims values on its inputs (as for a Shape output at compile time).
std::optional<std::vector<Dim>> infer_dims(OpKind op, std::vector<TensorType> types,
                                           std::vector<std::optional<std::vector<Dim>>> dims, AttrMap attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < types.size(); ++i) ins.push_back(g.add_input("i" + std::to_string(i), types[i]));
  Node* n = g.add_node(op, ins, {"o"}, std::move(attrs));
  std::vector<const TensorType*> tp;
  std::vector<const std::vector<Dim>*> dp;
  for (size_t i = 0; i < types.size(); ++i) {
    tp.push_back(&types[i]);
    dp.push_back(dims[i] ? &*dims[i] : nullptr);
  }
  int64_t fresh = 0;
  InferContext c(*n, tp, {}, dp, &fresh);
  op_schema(op).infer(c);
  return c.output_dims_values()[0];
}
}  // namespace

TEST(RefElementwise, ShapeValuesFlowThroughArithmeticAndCasts) {
  Dim b = Dim::symbol("batch"), s = Dim::symbol("seq");
  TensorType v2{DType::i64, Shape::of({2})}, sc{DType::i64, Shape()};
  auto r = infer_dims(OpKind::Mul, {v2, sc}, {std::vector<Dim>{b, s}, std::vector<Dim>{Dim(2)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<Dim>{b * 2, s * 2}));
  r = infer_dims(OpKind::Add, {v2, v2}, {std::vector<Dim>{b, Dim(1)}, std::vector<Dim>{s, Dim(2)}});
  EXPECT_EQ(*r, (std::vector<Dim>{b + s, Dim(3)}));
  r = infer_dims(OpKind::Sub, {v2, v2}, {std::vector<Dim>{b, Dim(1)}, std::vector<Dim>{Dim(1), Dim(2)}});
  EXPECT_EQ(*r, (std::vector<Dim>{b - 1, Dim(-1)}));
  r = infer_dims(OpKind::Div, {v2, sc}, {std::vector<Dim>{b, Dim(-7)}, std::vector<Dim>{Dim(2)}});
  EXPECT_EQ(*r, (std::vector<Dim>{Dim::floordiv(b, 2), Dim(-3)}));  // constants truncate like the kernel
  r = infer_dims(OpKind::Div, {v2, sc}, {std::vector<Dim>{b, Dim(7)}, std::vector<Dim>{Dim(0)}});
  EXPECT_FALSE(r);
  r = infer_dims(OpKind::Add, {v2, v2}, {std::vector<Dim>{b, s}, std::nullopt});
  EXPECT_FALSE(r);
  r = infer_dims(OpKind::Cast, {v2}, {std::vector<Dim>{b, s}}, {{"to", int64_t(6)}});
  EXPECT_EQ(*r, (std::vector<Dim>{b, s}));
  r = infer_dims(OpKind::Cast, {v2}, {std::vector<Dim>{b, s}}, {{"to", int64_t(1)}});
  EXPECT_FALSE(r);  // float copies are not shape values
  r = infer_dims(OpKind::Identity, {v2}, {std::vector<Dim>{b, s}});
  EXPECT_EQ(*r, (std::vector<Dim>{b, s}));
  r = infer_dims(OpKind::Max, {v2, sc}, {std::vector<Dim>{b, Dim(0)}, std::vector<Dim>{Dim(1)}});
  EXPECT_EQ(*r, (std::vector<Dim>{Dim::max(b, 1), Dim(1)}));
  TensorType c2{DType::boolean, Shape::of({2})};
  r = infer_dims(OpKind::Where, {c2, v2, v2},
                 {std::vector<Dim>{Dim(1), Dim(0)}, std::vector<Dim>{b, s}, std::vector<Dim>{Dim(4), Dim(5)}});
  EXPECT_EQ(*r, (std::vector<Dim>{b, Dim(5)}));
  r = infer_dims(OpKind::Equal, {v2, v2}, {std::vector<Dim>{b, Dim(0)}, std::vector<Dim>{b, Dim(3)}});
  EXPECT_EQ(*r, (std::vector<Dim>{Dim(1), Dim(0)}));
  r = infer_dims(OpKind::Equal, {v2, v2}, {std::vector<Dim>{b, Dim(0)}, std::vector<Dim>{Dim(0), Dim(0)}});
  EXPECT_FALSE(r);  // batch may or may not be 0
  // Only rank <= 1 results carry shape values.
  TensorType m12{DType::i64, Shape::of({1, 2})};
  r = infer_dims(OpKind::Add, {v2, m12}, {std::vector<Dim>{b, s}, std::vector<Dim>{Dim(1), Dim(2)}});
  EXPECT_FALSE(r);
}

// ---- ONNX legacy forms

namespace {

void float_attr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void ints_attr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

onnx::ModelProto model(int opset) { return onnx_model(3, opset); }

}  // namespace

TEST(RefElementwiseOnnx, LegacyBroadcastWithAxis) {
  // opset 6: y = Relu(x) + b with b aligned at axis 1 of a rank-4 value; z = x * c aligned at axis 0 (c an input).
  auto m = model(6);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 2, 2});
  set_type(g->add_input(), "c", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3, 2, 2});
  set_type(g->add_output(), "z", onnx::TensorProto::FLOAT, {2, 3, 2, 2});
  auto* bias = g->add_initializer();
  bias->set_name("b");
  bias->set_data_type(onnx::TensorProto::FLOAT);
  bias->add_dims(3);
  for (float f : {10.f, 20.f, 30.f}) bias->add_float_data(f);
  auto* relu = onnx_node(g, "Relu", {"x"}, {"r"});
  ints_attr(relu, "consumed_inputs", {0});  // opset 1-5 form, still seen in old files
  auto* add = onnx_node(g, "Add", {"r", "b"}, {"y"});
  int_attr(add, "broadcast", 1);
  int_attr(add, "axis", 1);
  auto* mul = onnx_node(g, "Mul", {"x", "c"}, {"z"});
  int_attr(mul, "broadcast", 1);
  int_attr(mul, "axis", 0);
  m.mutable_opset_import(0)->set_version(5);  // consumed_inputs needs opset < 6; broadcast works there too
  auto graph = import(m);
  Executor exec(graph, reference_kernels());
  Tensor x = Tensor::zeros(DType::f32, {2, 3, 2, 2});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 7) - 3;
  Tensor c = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = exec.run({x, c});
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t n = i / 12, ch = (i / 4) % 3;
    float xv = x.data<float>()[i];
    EXPECT_EQ(out[0].data<float>()[i], std::max(0.f, xv) + 10.f * float(ch + 1));
    EXPECT_EQ(out[1].data<float>()[i], xv * float(n * 3 + ch + 1));
  }
}

TEST(RefElementwiseOnnx, LegacyPReluSlopeIsPerChannel) {
  auto m = model(6);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 2, 3});
  set_type(g->add_input(), "s", onnx::TensorProto::FLOAT, {2});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 2, 3});
  onnx_node(g, "Relu", {"x"}, {"r"});
  onnx_node(g, "Neg", {"r"}, {"n"});
  onnx_node(g, "PRelu", {"n", "s"}, {"y"});
  auto graph = import(m);
  auto out = Executor(graph, reference_kernels()).run({tensor<float>({1, 2, 3, 4, 5, 6}, {1, 2, 3}), vec<float>({0.5f, 2.f})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{-0.5f, -1, -1.5f, -8, -10, -12}));
}

TEST(RefElementwiseOnnx, LegacyAttributesRejectedInNewOpsets) {
  auto m = model(13);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {3});
  auto* add = onnx_node(g, "Add", {"x", "x"}, {"y"});
  int_attr(add, "broadcast", 1);
  EXPECT_CUVIL_ERROR(import(m), "'broadcast' is not supported");
  auto m2 = model(6);
  auto* g2 = m2.mutable_graph();
  set_type(g2->add_input(), "x", onnx::TensorProto::FLOAT, {3});
  set_type(g2->add_output(), "y", onnx::TensorProto::FLOAT, {3});
  auto* add2 = onnx_node(g2, "Add", {"x", "x"}, {"y"});
  int_attr(add2, "broadcast", 1);
  int_attr(add2, "axis", 1);
  EXPECT_CUVIL_ERROR(import(m2), "does not fit");
}

TEST(RefElementwiseOnnx, LegacyClipCastAndDropout) {
  auto m = model(6);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::DOUBLE, {4});
  set_type(g->add_output(), "y", onnx::TensorProto::DOUBLE, {4});
  set_type(g->add_output(), "k", onnx::TensorProto::INT32, {4});
  set_type(g->add_output(), "d", onnx::TensorProto::DOUBLE, {4});
  auto* clip = onnx_node(g, "Clip", {"x"}, {"y"});
  float_attr(clip, "min", -1.f);
  float_attr(clip, "max", 2.5f);
  auto* cast = onnx_node(g, "Cast", {"x"}, {"k"});
  int_attr(cast, "to", 6);
  auto* drop = onnx_node(g, "Dropout", {"x"}, {"d"});
  int_attr(drop, "is_test", 1);
  float_attr(drop, "ratio", 0.3f);
  auto graph = import(m);
  Executor exec(graph, reference_kernels());
  auto out = exec.run({vec<double>({-3, 0.5, 2, 9})});
  EXPECT_EQ(values<double>(out[0]), (std::vector<double>{-1, 0.5, 2, 2.5}));
  EXPECT_EQ(values<int32_t>(out[1]), (std::vector<int32_t>{-3, 0, 2, 9}));
  EXPECT_EQ(values<double>(out[2]), (std::vector<double>{-3, 0.5, 2, 9}));

  // Opset 1 Cast names its target type; opset 7 Dropout's mask has the data's type.
  auto m1 = model(7);
  auto* g1 = m1.mutable_graph();
  set_type(g1->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  set_type(g1->add_output(), "y", onnx::TensorProto::FLOAT, {2});
  set_type(g1->add_output(), "mask", onnx::TensorProto::FLOAT, {2});
  auto* d = onnx_node(g1, "Dropout", {"x"}, {"y", "mask"});
  float_attr(d, "ratio", 0.5f);
  auto graph1 = import(m1);
  auto out1 = Executor(graph1, reference_kernels()).run({vec<float>({1, 2})});
  EXPECT_EQ(out1[1].dtype(), DType::f32);
  EXPECT_EQ(values<float>(out1[1]), (std::vector<float>{1, 1}));

  auto m0 = model(1);
  auto* g0 = m0.mutable_graph();
  set_type(g0->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  set_type(g0->add_output(), "y", onnx::TensorProto::INT64, {2});
  auto* c0 = onnx_node(g0, "Cast", {"x"}, {"y"});
  auto* a = c0->add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("int64");
  auto graph0 = import(m0);
  EXPECT_EQ(values<int64_t>(Executor(graph0, reference_kernels()).run({vec<float>({1.5f, -2.5f})})[0]), (std::vector<int64_t>{1, -2}));
}

// Integer tensors wrap as ONNX's integer arithmetic does, however short: shape inference tracks the values of
// small integer tensors as dims, and an overflow there is no error (it stops tracking), where it once made
// "dimension arithmetic overflows int64" of a short tensor while a long one wrapped. Every backend and the -O1
// pipeline (constant folding included) agree.
TEST(RefElementwise, IntegerOverflowWrapsInEveryPathAndLength) {
  const int64_t big = int64_t(1) << 32, max = std::numeric_limits<int64_t>::max();
  for (int64_t n : {int64_t(2), int64_t(3), int64_t(40)}) {
    SCOPED_TRACE("length " + std::to_string(n));
    std::string a = "[", b = "[";
    for (int64_t i = 0; i < n; ++i) {
      a += (i ? ", " : "") + std::to_string(i % 2 ? big : max);
      b += (i ? ", " : "") + std::to_string(i % 2 ? big : int64_t(1));
    }
    a += "]", b += "]";
    std::string len = std::to_string(n);
    std::string text = "graph @main(%x: i64[" + len + "]) {\n  %a: i64[" + len + "] = constant " + a +
                       "\n  %b: i64[" + len + "] = constant " + b + "\n  %s: i64[" + len +
                       "] = Add(%a, %b)\n  %p: i64[" + len + "] = Mul(%a, %b)\n  %two: i64[] = constant [2]\n" +
                       "  %q: i64[" + len + "] = Pow(%b, %two)\n  %y: i64[" + len + "] = Add(%p, %x)\n" +
                       "  return %s, %p, %q, %y\n}\n";
    std::shared_ptr<Graph> g = parse_checked(text);  // inference must not refuse the values
    std::vector<int64_t> s(static_cast<size_t>(n)), p(s), q(s), y(s);
    auto wrap_add = [](int64_t u, int64_t v) { return int64_t(uint64_t(u) + uint64_t(v)); };
    auto wrap_mul = [](int64_t u, int64_t v) { return int64_t(uint64_t(u) * uint64_t(v)); };
    for (int64_t i = 0; i < n; ++i) {
      int64_t ai = i % 2 ? big : max, bi = i % 2 ? big : 1;
      s[size_t(i)] = wrap_add(ai, bi);  // max + 1 wraps to min
      p[size_t(i)] = wrap_mul(ai, bi);  // 2^32 * 2^32 wraps to 0
      q[size_t(i)] = wrap_mul(bi, bi);
      y[size_t(i)] = wrap_add(p[size_t(i)], 5);
    }
    Tensor x = Tensor::zeros(DType::i64, {n});
    for (int64_t i = 0; i < n; ++i) x.data<int64_t>()[i] = 5;
    std::shared_ptr<Graph> opt = parse_checked(text);
    optimize(*opt, 1);
    for (auto [graph, options, what] : {std::tuple{g, reference_kernels(), "reference"},
                                        std::tuple{g, ExecutorOptions{}, "fast"},
                                        std::tuple{opt, ExecutorOptions{}, "-O1"}}) {
      SCOPED_TRACE(what);
      Executor e(graph, options);
      std::vector<Tensor> out = e.run({x});
      ASSERT_EQ(out.size(), 4u);
      EXPECT_EQ(out[0].to_i64_vector(), s);
      EXPECT_EQ(out[1].to_i64_vector(), p);
      EXPECT_EQ(out[2].to_i64_vector(), q);
      EXPECT_EQ(out[3].to_i64_vector(), y);
    }
  }
}
