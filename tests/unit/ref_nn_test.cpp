// The nn family (convolutions, pools, matrix products, Einsum, Det, quantization): shape inference and reference
// kernels on what the ONNX node suite does not cover: odd sizes, groups, asymmetric pads, every dtype class,
// empty tensors, symbolic dims, special float values, and bad input that must give a cuvil::Error.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "frontend/onnx/onnx_importer.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Ints = std::vector<int64_t>;

Tensor run1(OpKind op, const std::vector<Tensor>& inputs, AttrMap attrs = {}) {
  return run_on_inputs(op, inputs, std::move(attrs))[0];
}

// The output type that inference gives a node on inputs of the given types.
TensorType infer_type(OpKind op, const std::vector<TensorType>& types, AttrMap attrs = {}) {
  Graph g("t");
  std::vector<Value*> ins;
  for (size_t i = 0; i < types.size(); ++i) ins.push_back(g.add_input("in" + std::to_string(i), types[i]));
  Node* n = g.add_node(op, ins, {"out"}, std::move(attrs));
  infer_shapes(g);
  return n->output(0)->type();
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Tensor rand_f32(Ints shape, uint32_t seed) {
  return Tensor::from_vector<float>(random_floats(size_t(shape_numel(shape)), seed), shape);
}

template <class T>
Tensor convert(const Tensor& t) {
  std::vector<T> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = T(float(t.get_f64(i)));
  return Tensor::from_vector<T>(v, t.shape());
}

void expect_close(const Tensor& got, const std::vector<double>& want, Ints shape, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), shape);
  expect_values(got, want, tol);
}

AttrMap attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) { return AttrMap(kv); }

// ---- naive references (double, with bounds checks everywhere)

struct ConvParams {
  Ints strides, dilations, pads;  // pads: begins then ends
  int64_t group = 1;
};

// Forward convolution of any spatial rank, with explicit pads.
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p, Ints& yshape) {
  size_t S = x.rank() - 2;
  int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), cg = C / p.group, mg = M / p.group;
  yshape = {N, M};
  for (size_t i = 0; i < S; ++i) {
    int64_t ek = (w.dim(2 + i) - 1) * p.dilations[i] + 1;
    yshape.push_back((x.dim(2 + i) + p.pads[i] + p.pads[S + i] - ek) / p.strides[i] + 1);
  }
  Ints ostr(yshape.size(), 1), xstr(x.rank(), 1), wstr(w.rank(), 1);
  for (size_t i = yshape.size() - 1; i-- > 0;) ostr[i] = ostr[i + 1] * yshape[i + 1];
  for (size_t i = x.rank() - 1; i-- > 0;) xstr[i] = xstr[i + 1] * x.dim(i + 1);
  for (size_t i = w.rank() - 1; i-- > 0;) wstr[i] = wstr[i + 1] * w.dim(i + 1);
  std::vector<double> y(size_t(shape_numel(yshape)), 0.0);
  int64_t ksz = 1;
  for (size_t i = 0; i < S; ++i) ksz *= w.dim(2 + i);
  for (int64_t o = 0; o < int64_t(y.size()); ++o) {
    Ints idx(yshape.size());
    for (size_t d = 0, r = size_t(o); d < yshape.size(); ++d) idx[d] = int64_t(r) / ostr[d], r %= size_t(ostr[d]);
    int64_t n = idx[0], m = idx[1], grp = m / mg;
    double acc = b ? b->get_f64(m) : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t kf = 0; kf < ksz; ++kf) {
        int64_t xoff = (n * C + grp * cg + ci) * xstr[1], woff = (m * cg + ci) * wstr[1];
        bool inside = true;
        for (size_t i = 0, r = size_t(kf); i < S; ++i) {
          int64_t kk = int64_t(r) / wstr[2 + i];
          r %= size_t(wstr[2 + i]);
          int64_t pos = idx[2 + i] * p.strides[i] + kk * p.dilations[i] - p.pads[i];
          if (pos < 0 || pos >= x.dim(2 + i)) inside = false;
          xoff += pos * xstr[2 + i];
          woff += kk * wstr[2 + i];
        }
        if (inside) acc += x.get_f64(xoff) * w.get_f64(woff);
      }
    }
    y[size_t(o)] = acc;
  }
  return y;
}

AttrMap conv_attrs(const ConvParams& p) {
  return attrs({{"strides", p.strides}, {"dilations", p.dilations}, {"pads", p.pads}, {"group", p.group}});
}

// ---- Conv

TEST(RefNN, ConvMatchesNaiveAcrossShapes) {
  struct Case {
    Ints x, w;
    ConvParams p;
    bool bias;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 9}, {4, 3, 3, 2}, {{2, 1}, {1, 2}, {1, 0, 2, 1}, 1}, true},       // asymmetric pads, dilation
      {{1, 6, 5, 5}, {6, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1, 1, 1}, 6}, true},       // depthwise
      {{1, 4, 6, 5}, {6, 2, 1, 3}, {{1, 2}, {1, 1}, {0, 1, 0, 1}, 2}, false},      // grouped
      {{2, 2, 11}, {3, 2, 4}, {{3}, {2}, {2, 1}, 1}, true},                        // 1-D
      {{1, 2, 4, 5, 3}, {2, 2, 2, 3, 1}, {{1, 2, 1}, {2, 1, 1}, {1, 0, 0, 0, 1, 0}, 1}, true},  // 3-D
      {{1, 1, 1, 1}, {1, 1, 1, 1}, {{1, 1}, {1, 1}, {0, 0, 0, 0}, 1}, false},     // 1x1
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    Tensor x = rand_f32(c.x, seed++), w = rand_f32(c.w, seed++), b = rand_f32({c.w[0]}, seed++);
    Ints yshape;
    std::vector<double> want = naive_conv(x, w, c.bias ? &b : nullptr, c.p, yshape);
    std::vector<Tensor> ins{x, w};
    if (c.bias) ins.push_back(b);
    expect_close(run1(OpKind::Conv, ins, conv_attrs(c.p)), want, yshape);
  }
}

TEST(RefNN, ConvRandomSweep) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 60; ++iter) {
    size_t S = size_t(pick(1, 3));
    int64_t group = pick(1, 3), cg = pick(1, 2), mg = pick(1, 2);
    Ints xs{pick(1, 2), group * cg}, ws{group * mg, cg};
    ConvParams p;
    p.group = group;
    for (size_t i = 0; i < S; ++i) {
      ws.push_back(pick(1, 3));
      p.strides.push_back(pick(1, 3));
      p.dilations.push_back(pick(1, 2));
    }
    for (size_t i = 0; i < 2 * S; ++i) p.pads.push_back(pick(0, 2));
    for (size_t i = 0; i < S; ++i) {
      int64_t ek = (ws[2 + i] - 1) * p.dilations[i] + 1;
      xs.push_back(std::max<int64_t>(1, ek - p.pads[i] - p.pads[S + i]) + pick(0, 5));
    }
    Tensor x = rand_f32(xs, uint32_t(1000 + iter)), w = rand_f32(ws, uint32_t(2000 + iter));
    Tensor b = rand_f32({ws[0]}, uint32_t(3000 + iter));
    Ints ys;
    std::vector<double> want = naive_conv(x, w, &b, p, ys);
    SCOPED_TRACE("x " + shape_str(xs) + " w " + shape_str(ws) + " strides " + shape_str(p.strides) + " dil " +
                 shape_str(p.dilations) + " pads " + shape_str(p.pads) + " group " + std::to_string(group));
    expect_close(run1(OpKind::Conv, {x, w, b}, conv_attrs(p)), want, ys);
  }
}

// Pooling by brute force over the window, with the output size from the same rules the op documents.
std::vector<double> naive_pool(const Tensor& x, const Ints& k, const Ints& s, const Ints& d, const Ints& pads,
                               bool ceil_mode, bool is_max, bool include_pad, Ints& yshape) {
  size_t S = x.rank() - 2;
  yshape = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < S; ++i) {
    int64_t ek = (k[i] - 1) * d[i] + 1, span = x.dim(2 + i) + pads[i] + pads[S + i] - ek;
    int64_t o = ceil_mode ? (span + s[i] - 1) / s[i] + 1 : span / s[i] + 1;
    if (ceil_mode && (o - 1) * s[i] >= x.dim(2 + i) + pads[i]) --o;
    yshape.push_back(o);
  }
  Ints ostr(yshape.size(), 1), xstr(x.rank(), 1);
  for (size_t i = yshape.size() - 1; i-- > 0;) ostr[i] = ostr[i + 1] * yshape[i + 1];
  for (size_t i = x.rank() - 1; i-- > 0;) xstr[i] = xstr[i + 1] * x.dim(i + 1);
  int64_t ksz = shape_numel(k);
  std::vector<double> y(size_t(shape_numel(yshape)));
  for (int64_t o = 0; o < int64_t(y.size()); ++o) {
    Ints idx(yshape.size());
    for (size_t dd = 0, r = size_t(o); dd < yshape.size(); ++dd) idx[dd] = int64_t(r) / ostr[dd], r %= size_t(ostr[dd]);
    double best = -INFINITY, sum = 0;
    int64_t count = 0;
    for (int64_t kf = 0; kf < ksz; ++kf) {
      int64_t off = idx[0] * xstr[0] + idx[1] * xstr[1];
      bool inside = true, in_padded = true;
      for (size_t i = S, r = size_t(kf); i-- > 0;) {
        int64_t kk = int64_t(r) % k[i];
        r /= size_t(k[i]);
        int64_t pos = idx[2 + i] * s[i] + kk * d[i] - pads[i];
        if (pos < 0 || pos >= x.dim(2 + i)) inside = false;
        if (pos < -pads[i] || pos >= x.dim(2 + i) + pads[S + i]) in_padded = false;
        off += pos * xstr[2 + i];
      }
      if (include_pad ? in_padded : inside) ++count;
      if (!inside) continue;
      best = std::max(best, x.get_f64(off));
      sum += x.get_f64(off);
    }
    y[size_t(o)] = is_max ? best : sum / double(count);
  }
  return y;
}

TEST(RefNN, PoolRandomSweep) {
  std::mt19937 rng(8);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 80; ++iter) {
    size_t S = size_t(pick(1, 3));
    bool is_max = iter % 2 == 0, ceil_mode = pick(0, 1) == 1, include_pad = pick(0, 1) == 1;
    Ints xs{pick(1, 2), pick(1, 3)}, k, s, d, pads(2 * S);
    for (size_t i = 0; i < S; ++i) {
      k.push_back(pick(1, 3));
      s.push_back(pick(1, 3));
      d.push_back(is_max ? pick(1, 2) : 1);
    }
    for (size_t i = 0; i < S; ++i) {
      pads[i] = pick(0, k[i] - 1);
      pads[S + i] = pick(0, k[i] - 1);
      xs.push_back((k[i] - 1) * d[i] + 1 + pick(0, 5));
    }
    Tensor x = rand_f32(xs, uint32_t(4000 + iter));
    Ints ys;
    std::vector<double> want = naive_pool(x, k, s, d, pads, ceil_mode, is_max, include_pad, ys);
    AttrMap a = attrs({{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t(ceil_mode)}});
    if (is_max) a["dilations"] = d;
    else a["count_include_pad"] = int64_t(include_pad);
    SCOPED_TRACE(std::string(is_max ? "max" : "avg") + " x " + shape_str(xs) + " k " + shape_str(k) + " s " +
                 shape_str(s) + " d " + shape_str(d) + " pads " + shape_str(pads) + " ceil " +
                 std::to_string(ceil_mode) + " include_pad " + std::to_string(include_pad));
    expect_close(run1(is_max ? OpKind::MaxPool : OpKind::AveragePool, {x}, a), want, ys);
  }
}

TEST(RefNN, ConvAutoPadSame) {
  Tensor x = rand_f32({1, 2, 7, 6}, 11), w = rand_f32({3, 2, 4, 3}, 12);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    Tensor y = run1(OpKind::Conv, {x, w}, attrs({{"auto_pad", mode}, {"strides", Ints{2, 2}}}));
    ASSERT_EQ(y.shape(), (Ints{1, 3, 4, 3}));
    // Total pads: H (4-1)*2+4-7 = 3, W (3-1)*2+3-6 = 1; SAME_UPPER puts the odd one at the end.
    bool upper = std::string(mode) == "SAME_UPPER";
    ConvParams p{{2, 2}, {1, 1}, upper ? Ints{1, 0, 2, 1} : Ints{2, 1, 1, 0}, 1};
    Ints ys;
    std::vector<double> want = naive_conv(x, w, nullptr, p, ys);
    expect_close(y, want, ys);
  }
  Tensor v = run1(OpKind::Conv, {x, w}, attrs({{"auto_pad", "VALID"}, {"strides", Ints{2, 2}}}));
  EXPECT_EQ(v.shape(), (Ints{1, 3, 2, 2}));
}

TEST(RefNN, ConvHalfAndDoubleTypes) {
  Tensor x = rand_f32({1, 2, 5, 5}, 21), w = rand_f32({2, 2, 3, 3}, 22), b = rand_f32({2}, 23);
  ConvParams p{{1, 1}, {1, 1}, {1, 1, 1, 1}, 1};
  Ints ys;
  std::vector<double> want = naive_conv(x, w, &b, p, ys);
  Tensor h = run1(OpKind::Conv, {convert<f16_t>(x), convert<f16_t>(w), convert<f16_t>(b)}, conv_attrs(p));
  EXPECT_EQ(h.dtype(), DType::f16);
  expect_close(h, want, ys, 1e-2);
  Tensor bf = run1(OpKind::Conv, {convert<bf16_t>(x), convert<bf16_t>(w), convert<bf16_t>(b)}, conv_attrs(p));
  expect_close(bf, want, ys, 5e-2);
  Tensor d = run1(OpKind::Conv, {convert<double>(x), convert<double>(w), convert<double>(b)}, conv_attrs(p));
  EXPECT_EQ(d.dtype(), DType::f64);
  expect_close(d, want, ys, 1e-6);
}

TEST(RefNN, ConvEmptyBatchAndNaN) {
  Tensor x = Tensor::zeros(DType::f32, {0, 2, 4, 4}), w = rand_f32({3, 2, 3, 3}, 31);
  EXPECT_EQ(run1(OpKind::Conv, {x, w}).shape(), (Ints{0, 3, 2, 2}));
  // NaN in one input pixel poisons exactly the outputs whose window covers it.
  Tensor x1 = Tensor::from_vector<float>(std::vector<float>(16, 1.0f), {1, 1, 4, 4});
  x1.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  Tensor y = run1(OpKind::Conv, {x1, rand_f32({1, 1, 2, 2}, 32)});
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_FALSE(std::isnan(y.data<float>()[1]));
}

TEST(RefNN, ConvSymbolicShapes) {
  Dim b = Dim::symbol("batch"), h = Dim::symbol("h");
  TensorType x{DType::f32, Shape({b, Dim(3), h, Dim(224)})};
  TensorType w{DType::f32, Shape::of({8, 3, 3, 3})};
  TensorType t = infer_type(OpKind::Conv, {x, w}, attrs({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
  ASSERT_EQ(t.shape.rank(), 4u);
  EXPECT_EQ(t.shape[0], b);
  EXPECT_EQ(t.shape[1], Dim(8));
  EXPECT_EQ(t.shape[2], Dim::floordiv(h - 1, 2) + 1);
  EXPECT_EQ(t.shape[3], Dim(112));
  TensorType same = infer_type(OpKind::Conv, {x, w}, attrs({{"strides", Ints{2, 2}}, {"auto_pad", "SAME_UPPER"}}));
  EXPECT_EQ(same.shape[2], Dim::ceildiv(h, 2));
  // The symbolic output size evaluates to what the run produces.
  SymbolBindings bind{{"batch", 2}, {"h", 9}};
  EXPECT_EQ(t.shape[2].eval(bind), 5);
}

TEST(RefNN, ConvErrors) {
  Tensor x = rand_f32({1, 3, 5, 5}, 41);
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 2, 3, 3}, 42)}), "channels");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 7, 7}, 42)}), "larger than the padded input");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 3, 3}, 42)}, attrs({{"auto_pad", "SAME"}})), "auto_pad");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 3, 3}, 42)}, attrs({{"strides", Ints{1}}})), "strides");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 3, 3}, 42)}, attrs({{"strides", Ints{0, 1}}})), ">= 1");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 3, 3}, 42), rand_f32({3}, 1)}), "bias");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({2, 3, 3}, 42)}), "rank");
  EXPECT_CUVIL_ERROR(
      run1(OpKind::Conv, {Tensor::zeros(DType::i32, {1, 3, 5, 5}), Tensor::zeros(DType::i32, {1, 3, 1, 1})}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::Conv, {x, rand_f32({3, 3, 3, 3}, 42)}, attrs({{"group", int64_t(2)}})), "channels");
}

// ---- ConvTranspose

// Transposed convolution by scattering, with explicit begin pads and output size.
std::vector<double> naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p,
                                         const Ints& yshape) {
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), mg = w.dim(1), M = yshape[1];
  int64_t KH = w.dim(2), KW = w.dim(3), OH = yshape[2], OW = yshape[3], cg = C / p.group;
  std::vector<double> y(size_t(shape_numel(yshape)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < OH * OW; ++i) y[size_t((n * M + m) * OH * OW + i)] = b ? b->get_f64(m) : 0.0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t mo = 0; mo < mg; ++mo)
        for (int64_t ih = 0; ih < H; ++ih)
          for (int64_t iw = 0; iw < W; ++iw)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t oh = ih * p.strides[0] + kh * p.dilations[0] - p.pads[0];
                int64_t ow = iw * p.strides[1] + kw * p.dilations[1] - p.pads[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                int64_t m = (c / cg) * mg + mo;
                y[size_t(((n * M + m) * OH + oh) * OW + ow)] +=
                    x.get_f64(((n * C + c) * H + ih) * W + iw) * w.get_f64(((c * mg + mo) * KH + kh) * KW + kw);
              }
  return y;
}

TEST(RefNN, ConvTransposeMatchesNaive) {
  Tensor x = rand_f32({2, 4, 3, 5}, 51), w = rand_f32({4, 3, 3, 2}, 52), b = rand_f32({6}, 53);
  ConvParams p{{2, 3}, {2, 1}, {1, 0, 2, 1}, 2};
  AttrMap a = conv_attrs(p);
  a["output_padding"] = Ints{1, 2};
  // H: 2*(3-1) + 1 + (3-1)*2+1 - 1 - 2 = 7; W: 3*(5-1) + 2 + 2 - 0 - 1 = 15
  Ints ys{2, 6, 7, 15};
  expect_close(run1(OpKind::ConvTranspose, {x, w, b}, a), naive_conv_transpose(x, w, &b, p, ys), ys);
}

TEST(RefNN, ConvTransposeOutputShape) {
  Tensor x = rand_f32({1, 1, 3, 3}, 61), w = rand_f32({1, 2, 3, 3}, 62);
  // Full size 7x7; output_shape 6x9: H loses 1 (total 1 -> begin 1, end 0), W gains 2 at the end.
  Tensor y = run1(OpKind::ConvTranspose, {x, w}, attrs({{"strides", Ints{2, 2}}, {"output_shape", Ints{6, 9}}}));
  Ints ys{1, 2, 6, 9};
  expect_close(y, naive_conv_transpose(x, w, nullptr, {{2, 2}, {1, 1}, {1, 0, 0, 0}, 1}, ys), ys);
  // SAME_UPPER: output = input * stride, total 1 -> begin 0.
  Tensor s = run1(OpKind::ConvTranspose, {x, w}, attrs({{"strides", Ints{2, 2}}, {"auto_pad", "SAME_UPPER"}}));
  Ints ss{1, 2, 6, 6};
  expect_close(s, naive_conv_transpose(x, w, nullptr, {{2, 2}, {1, 1}, {0, 0, 0, 0}, 1}, ss), ss);
  EXPECT_CUVIL_ERROR(run1(OpKind::ConvTranspose, {x, w}, attrs({{"output_shape", Ints{6}}})), "output_shape");
}

// ---- ConvInteger / QLinearConv

TEST(RefNN, ConvIntegerPerChannelZeroPoints) {
  std::vector<int8_t> xv{-3, 5, 7, -128, 127, 0, 1, 2, 3};
  Tensor x = Tensor::from_vector<int8_t>(xv, {1, 1, 3, 3});
  Tensor w = Tensor::from_vector<int8_t>({1, -1, 2, 3, 4, 5, -6, 7}, {2, 1, 2, 2});
  Tensor xz = Tensor::scalar<int8_t>(2), wz = Tensor::from_vector<int8_t>({1, -2}, {2});
  Tensor y = run1(OpKind::ConvInteger, {x, w, xz, wz});
  ASSERT_EQ(y.dtype(), DType::i32);
  ASSERT_EQ(y.shape(), (Ints{1, 2, 2, 2}));
  // Reference: (x - 2) * (w - wz[m]) summed.
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t oh = 0; oh < 2; ++oh)
      for (int64_t ow = 0; ow < 2; ++ow) {
        int64_t acc = 0;
        for (int64_t kh = 0; kh < 2; ++kh)
          for (int64_t kw = 0; kw < 2; ++kw)
            acc += (int64_t(xv[size_t((oh + kh) * 3 + ow + kw)]) - 2) *
                   (int64_t(w.data<int8_t>()[m * 4 + kh * 2 + kw]) - wz.data<int8_t>()[m]);
        EXPECT_EQ(y.data<int32_t>()[(m * 2 + oh) * 2 + ow], acc);
      }
}

TEST(RefNN, QLinearConvRequantizes) {
  Tensor x = Tensor::from_vector<uint8_t>({10, 20, 30, 40}, {1, 1, 2, 2});
  Tensor w = Tensor::from_vector<int8_t>({1, 2, 3, 4, -1, -2, -3, -4}, {2, 1, 2, 2});
  Tensor ws = Tensor::from_vector<float>({0.5f, 0.25f}, {2}), wz = Tensor::from_vector<int8_t>({0, 0}, {2});
  Tensor bias = Tensor::from_vector<int32_t>({100, -100}, {2});
  Tensor y = run1(OpKind::QLinearConv, {x, Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(10), w, ws, wz,
                                        Tensor::scalar<float>(0.2f), Tensor::scalar<uint8_t>(128), bias});
  ASSERT_EQ(y.dtype(), DType::u8);
  // acc0 = 0*1+10*2+20*3+30*4 + 100 = 300 -> 300*0.1*0.5/0.2 = 75 -> 203
  // acc1 = -200 - 100 = -300 -> -300*0.1*0.25/0.2 = -37.5 -> -38 (half to even) -> 90
  EXPECT_EQ(int(y.data<uint8_t>()[0]), 203);
  EXPECT_EQ(int(y.data<uint8_t>()[1]), 90);
}

// ---- pools

TEST(RefNN, MaxPoolIndicesNaNAndStorageOrder) {
  std::vector<float> v(20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7) % 11);
  v[13] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>(v, {1, 1, 4, 5});
  AttrMap a = attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  auto out = run_on_inputs(OpKind::MaxPool, {x}, a, 2);
  ASSERT_EQ(out[0].shape(), (Ints{1, 1, 2, 2}));
  // Windows (row-major flat ids): {0,1,5,6} {2,3,7,8} {10,11,15,16} {12,13,17,18}
  std::vector<int64_t> want_idx;
  for (Ints win : {Ints{0, 1, 5, 6}, Ints{2, 3, 7, 8}, Ints{10, 11, 15, 16}}) {
    int64_t best = win[0];
    for (int64_t i : win)
      if (v[size_t(i)] > v[size_t(best)]) best = i;
    want_idx.push_back(best);
  }
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(out[1].data<int64_t>()[k], want_idx[k]);
    EXPECT_EQ(out[0].data<float>()[k], v[size_t(want_idx[k])]);
  }
  EXPECT_TRUE(std::isnan(out[0].data<float>()[3]));
  EXPECT_EQ(out[1].data<int64_t>()[3], 13);
  a["storage_order"] = int64_t(1);
  auto col = run_on_inputs(OpKind::MaxPool, {x}, a, 2);
  EXPECT_EQ(col[1].data<int64_t>()[3], 2 + 3 * 4);  // (h=2, w=3) column-major: h + w * H
}

TEST(RefNN, MaxPoolIntegerDilationAndBatchOffset) {
  std::vector<int8_t> v(2 * 2 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int8_t(int(i * 37 % 23) - 11);
  Tensor x = Tensor::from_vector<int8_t>(v, {2, 2, 5});
  auto out = run_on_inputs(OpKind::MaxPool, {x},
                           attrs({{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 0}}}), 2);
  ASSERT_EQ(out[0].shape(), (Ints{2, 2, 4}));
  for (int64_t p = 0; p < 4; ++p)
    for (int64_t o = 0; o < 4; ++o) {
      int best = -1000;
      int64_t bi = -1;
      for (int64_t k = 0; k < 2; ++k) {
        int64_t i = o - 1 + 2 * k;
        if (i < 0 || i >= 5) continue;
        if (v[size_t(p * 5 + i)] > best) best = v[size_t(p * 5 + i)], bi = p * 5 + i;
      }
      EXPECT_EQ(int(out[0].data<int8_t>()[p * 4 + o]), best);
      EXPECT_EQ(out[1].data<int64_t>()[p * 4 + o], bi);  // includes the (n, c) plane offset
    }
}

TEST(RefNN, PoolCeilModeDropsWindowsStartingInPadding) {
  Tensor x = rand_f32({1, 1, 4, 4}, 71);
  // kernel 1, stride 2, ceil: ONNX 1.12's formula gives 3, but the third window starts past the input.
  TensorType t = infer_type(OpKind::MaxPool, {TensorType{DType::f32, Shape::of({1, 1, 4, 4})}},
                            attrs({{"kernel_shape", Ints{1, 1}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}}));
  EXPECT_EQ(t.shape, Shape::of({1, 1, 2, 2}));
  // kernel 3, stride 2, pad 1, ceil on 6: windows start at -1, 1, 3, 5 -> 4 outputs, the last one partial.
  Tensor y = run1(OpKind::AveragePool, {rand_f32({1, 1, 6, 6}, 72)},
                  attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                         {"ceil_mode", int64_t(1)}}));
  EXPECT_EQ(y.shape(), (Ints{1, 1, 4, 4}));
  // Symbolic input keeps a symbolic output.
  Dim h = Dim::symbol("h");
  TensorType s = infer_type(OpKind::MaxPool, {TensorType{DType::f32, Shape({Dim(1), Dim(1), h, Dim(8)})}},
                            attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                                   {"ceil_mode", int64_t(1)}}));
  EXPECT_FALSE(s.shape[2].is_const());
  EXPECT_EQ(s.shape[2].eval({{"h", 6}}), 4);
  EXPECT_EQ(s.shape[3], Dim(5));
}

TEST(RefNN, AveragePoolCountIncludePad) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3});
  AttrMap a = attrs({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 0, 0}}});
  Tensor y = run1(OpKind::AveragePool, {x}, a);
  ASSERT_EQ(y.shape(), (Ints{1, 1, 2, 3}));
  expect_close(y, {1, 1.5, 2.5, 2.5, 3, 4}, {1, 1, 2, 3});
  a["count_include_pad"] = int64_t(1);
  expect_close(run1(OpKind::AveragePool, {x}, a), {0.25, 0.75, 1.25, 1.25, 3, 4}, {1, 1, 2, 3});
  Tensor h = run1(OpKind::AveragePool, {convert<f16_t>(x)}, a);
  EXPECT_EQ(h.dtype(), DType::f16);
  expect_close(h, {0.25, 0.75, 1.25, 1.25, 3, 4}, {1, 1, 2, 3}, 1e-3);
}

TEST(RefNN, GlobalPools) {
  std::vector<float> v{1, -2, 3, 4, std::numeric_limits<float>::quiet_NaN(), 0, -1, -5};
  Tensor x = Tensor::from_vector<float>(v, {2, 2, 2});
  Tensor avg = run1(OpKind::GlobalAveragePool, {x});
  EXPECT_EQ(avg.shape(), (Ints{2, 2, 1}));
  EXPECT_EQ(avg.data<float>()[0], -0.5f);
  EXPECT_TRUE(std::isnan(avg.data<float>()[2]));
  Tensor mx = run1(OpKind::GlobalMaxPool, {x});
  EXPECT_EQ(mx.data<float>()[1], 4.0f);
  EXPECT_TRUE(std::isnan(mx.data<float>()[2]));
  EXPECT_EQ(mx.data<float>()[3], -1.0f);
  Tensor d = run1(OpKind::GlobalMaxPool, {convert<double>(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}))});
  EXPECT_EQ(d.shape(), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(d.data<double>()[0], 6.0);
  EXPECT_EQ(run1(OpKind::GlobalAveragePool, {Tensor::zeros(DType::f32, {0, 3, 4, 4})}).shape(), (Ints{0, 3, 1, 1}));
  EXPECT_CUVIL_ERROR(run1(OpKind::GlobalAveragePool, {Tensor::zeros(DType::i32, {1, 3, 4, 4})}), "dtype");
}

TEST(RefNN, MaxUnpoolRoundTripAndBadIndex) {
  Tensor x = rand_f32({2, 3, 4, 6}, 81);
  AttrMap a = attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  auto pooled = run_on_inputs(OpKind::MaxPool, {x}, a, 2);
  Tensor u = run1(OpKind::MaxUnpool, {pooled[0], pooled[1]}, a);
  ASSERT_EQ(u.shape(), x.shape());
  int64_t nonzero = 0;
  for (int64_t i = 0; i < u.numel(); ++i) {
    if (u.data<float>()[i] == 0) continue;
    ++nonzero;
    EXPECT_EQ(u.data<float>()[i], x.data<float>()[i]);
  }
  EXPECT_EQ(nonzero, pooled[0].numel());
  // An explicit larger output_shape pads at the end.
  Tensor os = Tensor::from_vector<int64_t>({2, 3, 5, 7}, {4});
  Tensor big = run_op(OpKind::MaxUnpool, {input(pooled[0]), input(pooled[1]), constant(os)}, a)[0];
  ASSERT_EQ(big.shape(), (Ints{2, 3, 5, 7}));
  EXPECT_EQ(big.data<float>()[(1 * 3 + 2) * 35 + 3 * 7 + 5], u.data<float>()[(1 * 3 + 2) * 24 + 3 * 6 + 5]);
  // output_shape as a graph input (unknown at compile time) still works.
  Tensor big2 = run1(OpKind::MaxUnpool, {pooled[0], pooled[1], os}, a);
  EXPECT_TRUE(big2.same_bytes(big));
  Tensor bad = pooled[1].clone();
  bad.data<int64_t>()[3] = x.numel();
  EXPECT_CUVIL_ERROR(run1(OpKind::MaxUnpool, {pooled[0], bad}, a), "out of range");
  bad.data<int64_t>()[3] = -1;
  EXPECT_CUVIL_ERROR(run1(OpKind::MaxUnpool, {pooled[0], bad}, a), "out of range");
  EXPECT_CUVIL_ERROR(
      run1(OpKind::MaxUnpool, {pooled[0], pooled[1], Tensor::from_vector<int64_t>({2, 3, 3, 6}, {4})}, a), "smaller");
}

// ---- Gemm / MatMul

std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k,
                                 int64_t n) {
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[size_t(i * n + j)] += a[size_t(i * k + p)] * b[size_t(p * n + j)];
  return c;
}

TEST(RefNN, GemmTransposesAndBroadcastC) {
  int64_t m = 3, k = 5, n = 4;
  Tensor a = rand_f32({m, k}, 91), b = rand_f32({k, n}, 92);
  std::vector<double> ab = naive_matmul(as_f64(a), as_f64(b), m, k, n);
  // Transposed copies of a and b.
  std::vector<float> at(size_t(m * k)), bt(size_t(k * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) at[size_t(p * m + i)] = a.data<float>()[i * k + p];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + p)] = b.data<float>()[p * n + j];
  Tensor aT = Tensor::from_vector<float>(at, {k, m}), bT = Tensor::from_vector<float>(bt, {n, k});
  for (Ints cshape : {Ints{}, Ints{n}, Ints{m, 1}, Ints{1, n}, Ints{m, n}}) {
    Tensor c = rand_f32(cshape, 93);
    std::vector<double> want(size_t(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t ci = cshape.empty() ? 0 : cshape.size() == 1 ? j : (cshape[0] == 1 ? 0 : i) * cshape[1] + (cshape[1] == 1 ? 0 : j);
        want[size_t(i * n + j)] = 0.5 * ab[size_t(i * n + j)] + 2.0 * c.get_f64(ci);
      }
    AttrMap at_attrs = attrs({{"alpha", 0.5}, {"beta", 2.0}, {"transA", int64_t(1)}, {"transB", int64_t(1)}});
    expect_close(run1(OpKind::Gemm, {aT, bT, c}, at_attrs), want, {m, n});
  }
  expect_close(run1(OpKind::Gemm, {a, b}), ab, {m, n});
  EXPECT_CUVIL_ERROR(run1(OpKind::Gemm, {a, b, rand_f32({2, n}, 1)}), "cannot broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::Gemm, {a, a}), "inner dims");
}

TEST(RefNN, GemmIntegers) {
  Tensor a = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<int32_t>({1, -1, 2, 0, -2, 1}, {3, 2});
  Tensor c = Tensor::from_vector<int32_t>({10, 20}, {2});
  Tensor y = run1(OpKind::Gemm, {a, b, c}, attrs({{"alpha", 2.0}, {"beta", -1.0}}));
  // a@b = [[-1, 2], [2, 2]] -> 2*ab - c
  EXPECT_EQ(as_f64(y), (std::vector<double>{-12, -16, -6, -16}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Gemm, {a, b, c}, attrs({{"alpha", 0.5}})), "integral");
  Tensor u = run1(OpKind::Gemm, {Tensor::from_vector<uint64_t>({1ull << 63, 3}, {1, 2}),
                                 Tensor::from_vector<uint64_t>({2, 5}, {2, 1})});
  EXPECT_EQ(u.data<uint64_t>()[0], 15u);  // 2^64 wraps to 0
}

TEST(RefNN, MatMulNumpySemantics) {
  Tensor v = rand_f32({4}, 101), w = rand_f32({4}, 102);
  Tensor dot = run1(OpKind::MatMul, {v, w});
  EXPECT_EQ(dot.rank(), 0u);
  expect_close(dot, naive_matmul(as_f64(v), as_f64(w), 1, 4, 1), {});
  // [2, 1, 3, 4] x [5, 4, 2] -> [2, 5, 3, 2]
  Tensor a = rand_f32({2, 1, 3, 4}, 103), b = rand_f32({5, 4, 2}, 104);
  Tensor y = run1(OpKind::MatMul, {a, b});
  ASSERT_EQ(y.shape(), (Ints{2, 5, 3, 2}));
  auto av = as_f64(a), bv = as_f64(b);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      std::vector<double> as(av.begin() + i * 12, av.begin() + (i + 1) * 12), bs(bv.begin() + j * 8, bv.begin() + (j + 1) * 8);
      auto want = naive_matmul(as, bs, 3, 4, 2);
      for (size_t e = 0; e < 6; ++e) EXPECT_NEAR(y.data<float>()[(i * 5 + j) * 6 + int64_t(e)], want[e], 1e-5);
    }
  // 1-D on either side of a batch.
  EXPECT_EQ(run1(OpKind::MatMul, {v, rand_f32({3, 4, 2}, 105)}).shape(), (Ints{3, 2}));
  EXPECT_EQ(run1(OpKind::MatMul, {rand_f32({3, 2, 4}, 106), v}).shape(), (Ints{3, 2}));
  // Empty K gives zeros; empty M gives an empty result.
  Tensor z = run1(OpKind::MatMul, {Tensor::zeros(DType::f32, {2, 0}), Tensor::zeros(DType::f32, {0, 3})});
  EXPECT_EQ(as_f64(z), std::vector<double>(6, 0.0));
  EXPECT_EQ(run1(OpKind::MatMul, {Tensor::zeros(DType::f32, {0, 4}), rand_f32({4, 3}, 1)}).shape(), (Ints{0, 3}));
  Tensor h = run1(OpKind::MatMul, {convert<f16_t>(a), convert<f16_t>(b)});
  EXPECT_EQ(h.dtype(), DType::f16);
  Tensor i = run1(OpKind::MatMul, {Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}),
                                   Tensor::from_vector<int64_t>({-1, 0, 0, -1}, {2, 2})});
  EXPECT_EQ(as_f64(i), (std::vector<double>{-1, -2, -3, -4}));
  EXPECT_CUVIL_ERROR(run1(OpKind::MatMul, {rand_f32({2, 3}, 1), rand_f32({4, 2}, 2)}), "inner dims");
  EXPECT_CUVIL_ERROR(run1(OpKind::MatMul, {rand_f32({2, 2, 3}, 1), rand_f32({3, 3, 2}, 2)}), "broadcast");
  EXPECT_CUVIL_ERROR(run1(OpKind::MatMul, {Tensor::scalar<float>(1), v}), "rank");
  // Symbolic batch.
  TensorType t = infer_type(OpKind::MatMul, {TensorType{DType::f32, Shape({Dim::symbol("b"), Dim(7), Dim(3)})},
                                             TensorType{DType::f32, Shape::of({3, 5})}});
  EXPECT_EQ(t.shape, Shape({Dim::symbol("b"), Dim(7), Dim(5)}));
}

TEST(RefNN, MatMulIntegerZeroPoints) {
  Tensor a = Tensor::from_vector<uint8_t>({0, 255, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<int8_t>({-128, 127, 2, -3, 4, 5}, {3, 2});
  Tensor az = Tensor::from_vector<uint8_t>({1, 2}, {2});  // per row of A
  Tensor bz = Tensor::from_vector<int8_t>({-1, 1}, {2});  // per column of B
  Tensor y = run1(OpKind::MatMulInteger, {a, b, az, bz});
  ASSERT_EQ(y.dtype(), DType::i32);
  std::vector<double> av{0 - 1., 255 - 1., 3 - 1., 4 - 2., 5 - 2., 6 - 2.};
  std::vector<double> bv{-128 + 1., 127 - 1., 2 + 1., -3 - 1., 4 + 1., 5 - 1.};
  EXPECT_EQ(as_f64(y), naive_matmul(av, bv, 2, 3, 2));
  Tensor y0 = run1(OpKind::MatMulInteger, {a, b});
  EXPECT_EQ(as_f64(y0), naive_matmul(as_f64(a), as_f64(b), 2, 3, 2));
}

TEST(RefNN, QLinearMatMulMatchesFloatMath) {
  Tensor a = Tensor::from_vector<uint8_t>({10, 200, 31, 40}, {2, 2});
  Tensor b = Tensor::from_vector<uint8_t>({5, 6, 71, 80}, {2, 2});
  Tensor y = run1(OpKind::QLinearMatMul, {a, Tensor::scalar<float>(0.05f), Tensor::scalar<uint8_t>(20), b,
                                          Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(50),
                                          Tensor::scalar<float>(0.5f), Tensor::scalar<uint8_t>(100)});
  auto acc = naive_matmul({-10, 180, 11, 20}, {-45, -44, 21, 30}, 2, 2, 2);  // no rounding ties
  for (size_t i = 0; i < 4; ++i) {
    double q = std::nearbyint(acc[i] * 0.05 * 0.1 / 0.5) + 100;
    EXPECT_EQ(double(y.data<uint8_t>()[i]), std::clamp(q, 0.0, 255.0)) << i;
  }
}

// ---- Einsum

TEST(RefNN, EinsumForms) {
  Tensor a = rand_f32({2, 3, 4}, 111), b = rand_f32({2, 4, 5}, 112);
  Tensor bmm = run1(OpKind::Einsum, {a, b}, attrs({{"equation", "bij,bjk->bik"}}));
  expect_close(bmm, as_f64(run1(OpKind::MatMul, {a, b})), {2, 3, 5});
  // Implicit output: letters appearing once, in order ('B' sorts before 'a').
  Tensor t = run1(OpKind::Einsum, {rand_f32({3, 2}, 113)}, attrs({{"equation", "aB"}}));
  EXPECT_EQ(t.shape(), (Ints{2, 3}));
  Tensor sq = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_EQ(as_f64(run1(OpKind::Einsum, {sq}, attrs({{"equation", "ii"}}))), (std::vector<double>{15}));
  EXPECT_EQ(as_f64(run1(OpKind::Einsum, {sq}, attrs({{"equation", "ii->i"}}))), (std::vector<double>{1, 5, 9}));
  // Ellipsis broadcasting: [2, 1, 3] and [4, 3] -> [2, 4]
  Tensor e = run1(OpKind::Einsum, {rand_f32({2, 1, 3}, 114), rand_f32({4, 3}, 115)},
                  attrs({{"equation", "...j,...j->..."}}));
  EXPECT_EQ(e.shape(), (Ints{2, 4}));
  // Outer product, integer dtype, three operands.
  Tensor i1 = Tensor::from_vector<int32_t>({1, 2}, {2}), i2 = Tensor::from_vector<int32_t>({3, 4, 5}, {3});
  EXPECT_EQ(as_f64(run1(OpKind::Einsum, {i1, i2, i1}, attrs({{"equation", "i,j,i->j"}}))),
            (std::vector<double>{15, 20, 25}));
  Tensor s8 = run1(OpKind::Einsum, {Tensor::from_vector<int8_t>({100, 100}, {2})}, attrs({{"equation", "i->"}}));
  EXPECT_EQ(int(s8.data<int8_t>()[0]), int(int8_t(200 - 256)));  // wraps like int8 arithmetic
  // Sum over an empty dim.
  EXPECT_EQ(as_f64(run1(OpKind::Einsum, {Tensor::zeros(DType::f32, {3, 0})}, attrs({{"equation", "ij->i"}}))),
            (std::vector<double>{0, 0, 0}));
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a, b}, attrs({{"equation", "bij,bkj->bik"}})), "size");
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a}, attrs({{"equation", "ij->ij"}})), "does not match");
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a}, attrs({{"equation", "ijk->l"}})), "does not appear");
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a}, attrs({{"equation", "i.k->i"}})), "ellipsis");
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a}, attrs({{"equation", "...k->k"}})), "...");
  EXPECT_CUVIL_ERROR(run1(OpKind::Einsum, {a, b}, attrs({{"equation", "bij->bi"}})), "input terms");
}

// ---- Det

TEST(RefNN, Det) {
  Tensor x = Tensor::from_vector<float>({4, 3, 6, 3, 2, 1, 1, 2, 3,  // det = 4*(6-2) - 3*(9-1) + 6*(6-2) = 16
                                         1, 2, 3, 2, 4, 6, 0, 1, 1},  // singular
                                        {2, 3, 3});
  Tensor d = run1(OpKind::Det, {x});
  ASSERT_EQ(d.shape(), (Ints{2}));
  EXPECT_NEAR(d.data<float>()[0], 16.0f, 1e-4);
  EXPECT_EQ(d.data<float>()[1], 0.0f);
  Tensor one = run1(OpKind::Det, {Tensor::zeros(DType::f64, {0, 0})});
  EXPECT_EQ(one.data<double>()[0], 1.0);
  Tensor swap = run1(OpKind::Det, {convert<f16_t>(Tensor::from_vector<float>({0, 1, 1, 0}, {2, 2}))});
  EXPECT_EQ(float(swap.data<f16_t>()[0]), -1.0f);
  EXPECT_CUVIL_ERROR(run1(OpKind::Det, {rand_f32({2, 3}, 1)}), "square");
  EXPECT_CUVIL_ERROR(run1(OpKind::Det, {rand_f32({3}, 1)}), "rank");
}

// ---- quantization

TEST(RefNN, QuantizeLinearRoundingSaturationAndNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1000, -1000, nan, inf, -inf}, {10});
  Tensor u = run1(OpKind::QuantizeLinear, {x, Tensor::scalar<float>(1.0f), Tensor::scalar<uint8_t>(10)});
  EXPECT_EQ(as_f64(u), (std::vector<double>{10, 12, 12, 10, 8, 255, 0, 10, 255, 0}));
  Tensor s = run1(OpKind::QuantizeLinear, {x, Tensor::scalar<float>(1.0f), Tensor::scalar<int8_t>(-1)});
  EXPECT_EQ(s.dtype(), DType::i8);
  EXPECT_EQ(as_f64(s), (std::vector<double>{-1, 1, 1, -1, -3, 127, -128, -1, 127, -128}));
  // No zero point: u8 with zero point 0.
  Tensor d = run1(OpKind::QuantizeLinear, {x, Tensor::scalar<float>(2.0f)});
  EXPECT_EQ(d.dtype(), DType::u8);
  Tensor i = run1(OpKind::QuantizeLinear, {Tensor::from_vector<int32_t>({5, -7, 300}, {3}), Tensor::scalar<float>(2.0f),
                                           Tensor::scalar<int8_t>(0)});
  EXPECT_EQ(as_f64(i), (std::vector<double>{2, -4, 127}));  // 2.5 -> 2, -3.5 -> -4
}

TEST(RefNN, QuantizeDequantizePerAxis) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor scale = Tensor::from_vector<float>({1, 0.5f, 2}, {3});
  Tensor zp = Tensor::from_vector<int8_t>({0, 1, -1}, {3});
  Tensor q = run1(OpKind::QuantizeLinear, {x, scale, zp}, attrs({{"axis", int64_t(-1)}}));
  EXPECT_EQ(as_f64(q), (std::vector<double>{1, 5, 1, 4, 11, 2}));
  Tensor dq = run1(OpKind::DequantizeLinear, {q, scale, zp}, attrs({{"axis", int64_t(1)}}));
  EXPECT_EQ(dq.dtype(), DType::f32);
  EXPECT_EQ(as_f64(dq), (std::vector<double>{1, 2, 4, 4, 5, 6}));
  // Per axis 0.
  Tensor s0 = Tensor::from_vector<float>({1, 10}, {2});
  Tensor q0 = run1(OpKind::QuantizeLinear, {x, s0, Tensor::from_vector<uint8_t>({0, 0}, {2})}, attrs({{"axis", int64_t(0)}}));
  EXPECT_EQ(as_f64(q0), (std::vector<double>{1, 2, 3, 0, 0, 1}));  // 0.4 -> 0, 0.5 -> 0, 0.6 -> 1
  Tensor i32 = run1(OpKind::DequantizeLinear, {Tensor::from_vector<int32_t>({-4, 6}, {2}), Tensor::scalar<float>(0.5f)});
  EXPECT_EQ(as_f64(i32), (std::vector<double>{-2, 3}));
  EXPECT_CUVIL_ERROR(run1(OpKind::QuantizeLinear, {x, Tensor::from_vector<float>({1, 2}, {2})}), "axis");
  EXPECT_CUVIL_ERROR(run1(OpKind::QuantizeLinear, {x, scale, zp}, attrs({{"axis", int64_t(2)}})), "out of range");
  EXPECT_CUVIL_ERROR(run1(OpKind::QuantizeLinear, {x, scale, Tensor::scalar<int32_t>(0)}), "dtype");
  EXPECT_CUVIL_ERROR(run1(OpKind::DequantizeLinear, {x, scale}), "dtype");
}

TEST(RefNN, DynamicQuantizeLinear) {
  auto out = run_on_inputs(OpKind::DynamicQuantizeLinear, {Tensor::from_vector<float>({-1, 0, 2, 3}, {2, 2})}, {}, 3);
  float scale = 4.0f / 255.0f;
  EXPECT_FLOAT_EQ(out[1].data<float>()[0], scale);
  uint8_t zp = out[2].data<uint8_t>()[0];
  EXPECT_EQ(int(zp), int(std::nearbyint(1.0f / scale)));
  EXPECT_EQ(int(out[0].data<uint8_t>()[1]), int(zp));  // 0 is exact
  EXPECT_EQ(int(out[0].data<uint8_t>()[3]), 255);
  // All zeros (and an empty tensor): scale 0, zero point 0, no NaN anywhere.
  auto z = run_on_inputs(OpKind::DynamicQuantizeLinear, {Tensor::zeros(DType::f32, {3})}, {}, 3);
  EXPECT_EQ(z[1].data<float>()[0], 0.0f);
  EXPECT_EQ(as_f64(z[0]), (std::vector<double>{0, 0, 0}));
  auto e = run_on_inputs(OpKind::DynamicQuantizeLinear, {Tensor::zeros(DType::f32, {0, 2})}, {}, 3);
  EXPECT_EQ(e[0].shape(), (Ints{0, 2}));
  // Positive-only input: the range still includes 0, so the zero point is 0.
  auto p = run_on_inputs(OpKind::DynamicQuantizeLinear, {Tensor::from_vector<float>({2, 4}, {2})}, {}, 3);
  EXPECT_EQ(int(p[2].data<uint8_t>()[0]), 0);
  EXPECT_EQ(int(p[0].data<uint8_t>()[1]), 255);
}

// ---- ONNX converter

TEST(RefNN, OnnxGemmOpset6BroadcastAttributeIsDropped) {
  onnx::ModelProto m = onnx_model(3, 6);
  auto* g = m.mutable_graph();
  for (auto [name, dims] : {std::pair<const char*, Ints>{"a", {2, 3}}, {"b", {3, 4}}, {"c", {4}}})
    set_type(g->add_input(), name, onnx::TensorProto::FLOAT, dims);
  g->add_output()->set_name("y");
  auto* n = g->add_node();
  n->set_op_type("Gemm");
  for (const char* i : {"a", "b", "c"}) n->add_input(i);
  n->add_output("y");
  auto* attr = n->add_attribute();
  attr->set_name("broadcast");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(1);
  auto graph = import(m);
  ASSERT_EQ(graph->nodes().size(), 1u);
  EXPECT_FALSE(graph->nodes()[0]->has_attr("broadcast"));
  EXPECT_EQ(graph->outputs()[0]->shape(), Shape::of({2, 4}));
}

}  // namespace
