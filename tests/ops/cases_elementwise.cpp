// Cases of the element-wise family (src/ir/ops/elementwise.cpp): unary math and activations over special values,
// odd, prime, scalar and empty shapes, other float dtypes and non-contiguous views; binary and variadic ops over
// broadcasting patterns and dtypes; conversions.
//
// Tolerances: generated code and the CPU kernels compute exp, log, tanh, erf, sigmoid and the trigonometric
// functions with vectorized approximations (src/codegen/vector_math, src/kernels/cpu/vec_math.h) whose stated
// bounds are a few 1e-7 relative; the rest is exact.
#include <algorithm>
#include <cmath>

#include "harness.h"

namespace cuvil::optest {
namespace {

constexpr Backend G = Backend::generated, C = Backend::cpu;

// Broadcasting patterns for binary ops.
struct Pair {
  Ints a, b;
  const char* what;
};
const Pair kBroadcast[] = {
    {{37}, {37}, "same shape, odd size"},
    {{3, 5, 7}, {3, 5, 7}, "same shape, rank 3"},
    {{2, 3, 4, 5}, {3, 1, 1}, "per channel"},
    {{4, 33}, {33}, "row broadcast"},
    {{4, 1}, {1, 5}, "outer product"},
    {{6, 17}, {6, 1}, "inner broadcast"},
    {{2, 3, 4}, {}, "scalar"},
    {{}, {}, "scalars only"},
    {{1031}, {1031}, "prime length"},
    {{0, 3}, {3}, "empty"},
};

// Elements of the broadcast of shapes a and b.
int64_t broadcast_numel(const Ints& a, const Ints& b) {
  size_t r = std::max(a.size(), b.size());
  int64_t n = 1;
  for (size_t d = 0; d < r; ++d) {
    auto dim = [&](const Ints& s) { return d + s.size() >= r ? s[d + s.size() - r] : int64_t(1); };
    n *= std::max(dim(a), dim(b));
  }
  return n;
}

struct Unary {
  OpKind op;
  double tol;  // 0: exact; else relative and absolute
  AttrMap attrs = {};
  bool cpu = false;   // Cuvil's CPU kernels have it (f32)
  double lo = -3, hi = 3;
};

void unary_cases(Cases& cs) {
  const Unary ops[] = {
      {OpKind::Abs, 0, {}, true},
      {OpKind::Neg, 0, {}, true},
      {OpKind::Relu, 0, {}, true},
      {OpKind::Sign, 0},
      {OpKind::Floor, 0},
      {OpKind::Ceil, 0},
      {OpKind::Round, 0},
      {OpKind::Sqrt, 0, {}, true},
      {OpKind::Reciprocal, 0, {}, true},
      {OpKind::Exp, 1e-6, {}, true, -110, 95},
      {OpKind::Log, 3e-7},
      {OpKind::Tanh, 1e-6, {}, true, -12, 12},
      {OpKind::Erf, 1e-6, {}, true, -5, 5},
      {OpKind::Sigmoid, 1e-6, {}, true, -110, 110},
      {OpKind::Softplus, 1e-6},
      {OpKind::Softsign, 1e-7},
      {OpKind::Mish, 1e-6, {}, false, -30, 30},
      {OpKind::HardSigmoid, 1e-7, {{"alpha", 0.3}, {"beta", 0.4}}, true},
      {OpKind::HardSwish, 1e-7, {}, true, -8, 8},
      // Gelu's 1 + erf(x) cancels for negative x: the reference itself is good to about 1e-7 absolute there.
      {OpKind::Gelu, 1e-6, {}, true, -8, 8},
      {OpKind::Gelu, 1e-6, {{"approximate", "tanh"}}, true, -8, 8},
      {OpKind::LeakyRelu, 0, {{"alpha", 0.1}}, true},
      {OpKind::Elu, 1e-6, {{"alpha", 1.5}}},
      {OpKind::Celu, 1e-6, {{"alpha", 0.7}}},
      {OpKind::Selu, 1e-6},
      {OpKind::ThresholdedRelu, 0, {{"alpha", 0.5}}},
      {OpKind::Shrink, 0, {{"lambd", 0.5}, {"bias", 0.25}}},
      {OpKind::Sin, 2e-7},
      {OpKind::Cos, 2e-7},
      {OpKind::Tan, 2e-7},
      {OpKind::Atan, 2e-7},
      {OpKind::Asin, 5e-7, {}, false, -1, 1},
      {OpKind::Acos, 5e-7, {}, false, -1, 1},
      {OpKind::Sinh, 1e-6},
      {OpKind::Cosh, 1e-6},
      {OpKind::Asinh, 5e-7},
      {OpKind::Acosh, 5e-7, {}, false, 1, 20},
      {OpKind::Atanh, 5e-7, {}, false, -1, 1},
  };
  for (const Unary& u : ops) {
    Tol t = u.tol == 0 ? kExact : Tol{u.tol, u.tol};
    auto add = [&](const char* label, Input in) -> OpCase& {
      OpCase& c = cs.add(u.op, label).in(std::move(in)).tol(DType::f32, t);
      c.attrs = u.attrs;
      return c;
    };
    std::set<Backend> fast = u.cpu ? std::set<Backend>{G, C} : std::set<Backend>{G};
    std::vector<size_t> over = u.cpu ? std::vector<size_t>{0} : std::vector<size_t>{};
    add("odd sizes, specials", f32({3, 5, 7}, u.lo, u.hi).sp()).needs(fast).in_place(over);
    add("prime length", f32({1031}, u.lo, u.hi)).needs(fast).in_place(over);
    add("4099, specials", f32({4099}, u.lo, u.hi).sp()).needs(fast).in_place(over);
    add("one element", f32({1}, u.lo, u.hi)).needs({G});
    add("scalar", f32({}, u.lo, u.hi)).needs({G});
    add("empty", f32({0, 5}, u.lo, u.hi));
    add("non-contiguous view", f32({7, 9}, u.lo, u.hi).view());
    add("f64", rnd(DType::f64, {37}, u.lo, u.hi).sp());
    add("f16", rnd(DType::f16, {33}, u.lo, u.hi));
  }
  for (OpKind op : {OpKind::Relu, OpKind::Exp, OpKind::Gelu, OpKind::Tanh})
    cs.add(op, "1M, threaded").in(f32({1 << 20}, -6, 6).sp()).tol(DType::f32, op == OpKind::Relu ? kExact : Tol{1e-6, 1e-6})
        .needs({C}).in_place({0});
  // The domain edges of the inverse functions, outside their domains too (NaN).
  for (OpKind op : {OpKind::Asin, OpKind::Acos, OpKind::Atanh, OpKind::Acosh, OpKind::Log, OpKind::Sqrt})
    cs.add(op, "outside the domain").in(f32({41}, -30, 30).sp()).tol(DType::f32, {5e-7, 5e-7}).needs({G});
  // The CPU kernels' approximations give exactly what std:: gives at the edges (0, ±1, infinities, NaN).
  const std::vector<float> edges = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f,
                                    200.0f, -200.0f, 88.8f, -104.5f};
  for (OpKind op : {OpKind::Exp, OpKind::Tanh, OpKind::Erf, OpKind::Sigmoid})
    cs.add(op, "edges").in(val(vec<float>(edges))).tol(DType::f32, {1e-6, 1e-44}).needs({C});

  // Integer and boolean unary ops.
  cs.add(OpKind::Abs, "i32").in(rnd(DType::i32, {37}, -100, 100));
  cs.add(OpKind::Neg, "i64").in(i64({37}, -100, 100));
  cs.add(OpKind::Sign, "i64").in(i64({37}));
  cs.add(OpKind::Not, "odd size").in(rnd(DType::boolean, {3, 7}, -1, 1)).needs({G});
  cs.add(OpKind::Not, "empty").in(rnd(DType::boolean, {0}, -1, 1));
  cs.add(OpKind::BitwiseNot, "i32").in(rnd(DType::i32, {37}, -1000, 1000));
  cs.add(OpKind::BitwiseNot, "u8").in(rnd(DType::u8, {3, 11}, 0, 255));
  cs.add(OpKind::IsNaN, "specials").in(f32({37}).sp()).needs({G});
  cs.add(OpKind::IsNaN, "f64").in(rnd(DType::f64, {2, 9}).sp());
  for (int64_t pos : {0, 1})
    for (int64_t neg : {0, 1})
      cs.add(OpKind::IsInf, "detect " + std::to_string(pos) + std::to_string(neg))
          .in(f32({2, 9}).sp())
          .attr("detect_positive", pos)
          .attr("detect_negative", neg)
          .needs({G});
}

void binary_cases(Cases& cs) {
  const OpKind numeric[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min,
                            OpKind::Less, OpKind::LessOrEqual, OpKind::Greater, OpKind::GreaterOrEqual,
                            OpKind::Equal};
  for (const Pair& p : kBroadcast) {
    bool empty = !p.a.empty() && p.a[0] == 0;
    for (OpKind op : numeric) {
      bool arith = op == OpKind::Add || op == OpKind::Sub || op == OpKind::Mul;
      std::set<Backend> fast = empty ? std::set<Backend>{}
                                            : arith ? std::set<Backend>{G, C}
                                                    : std::set<Backend>{G};
      cs.add(op, p.what).in(f32(p.a).sp()).in(f32(p.b).sp()).exact().needs(fast);
      // (Integer results of at most 8 elements are shape arithmetic, which fusion leaves alone.)
      bool fused_int = !empty && ((!arith && op != OpKind::Max && op != OpKind::Min) || broadcast_numel(p.a, p.b) > 8);
      std::set<Backend> gen = fused_int ? std::set<Backend>{G} : std::set<Backend>{};
      cs.add(op, std::string(p.what) + ", i32").in(rnd(DType::i32, p.a)).in(rnd(DType::i32, p.b)).needs(gen);
      cs.add(op, std::string(p.what) + ", i64").in(i64(p.a)).in(i64(p.b)).needs(gen);
    }
    cs.add(OpKind::Div, p.what).in(f32(p.a).sp()).in(f32(p.b).sp()).exact().needs(empty ? std::set<Backend>{} : std::set<Backend>{G, C});
    std::set<Backend> gen = empty ? std::set<Backend>{} : std::set<Backend>{G};
    for (OpKind op : {OpKind::And, OpKind::Or, OpKind::Xor, OpKind::Equal})
      cs.add(op, std::string(p.what) + ", bool").in(rnd(DType::boolean, p.a, -1, 1)).in(rnd(DType::boolean, p.b, -1, 1))
          .needs(gen);
    cs.add(OpKind::Where, p.what).in(rnd(DType::boolean, p.a, -1, 1)).in(f32(p.b).sp()).in(f32(p.a)).exact().needs(gen);
  }
  // The CPU kernels' broadcast patterns, in place or not (kernels/cpu/binary.cpp).
  const Pair cpu_patterns[] = {
      {{2, 3, 768}, {768}, "row broadcast, wide"},       {{2, 4, 5, 5}, {2, 1, 1, 5}, "attention mask"},
      {{2, 6, 5, 3}, {1, 6, 1, 1}, "per channel"},        {{5}, {3, 1, 5}, "b has more dims"},
      {{2, 1, 3, 1, 5}, {1, 4, 1, 6, 1}, "interleaved"}, {{1, 1, 7}, {7, 1}, "rank 3 by 2"},
      {{4, 256, 1024}, {1024}, "large, threaded"}};
  for (const Pair& p : cpu_patterns)
    for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
      // In place over an input of the output's size.
      int64_t na = broadcast_numel(p.a, {}), nb = broadcast_numel(p.b, {}), no = broadcast_numel(p.a, p.b);
      std::vector<size_t> over;
      if (na == no) over.push_back(0);
      if (nb == no) over.push_back(1);
      cs.add(op, p.what).in(f32(p.a).sp()).in(f32(p.b).sp()).exact().needs({C, G}).in_place(over);
    }
  cs.add(OpKind::Mul, "1M, mid broadcast").in(f32({4, 256, 1024})).in(f32({4, 1, 1024})).exact().needs({C}).in_place({0});
  cs.add(OpKind::Div, "1M, same shape").in(f32({4, 256, 1024})).in(f32({4, 256, 1024})).exact().needs({C}).in_place({0, 1});
  cs.add(OpKind::Add, "non-contiguous views").in(f32({6, 17}).view()).in(f32({6, 17}).view()).exact();
  // Integer division and remainder: signs, divisors that are not zero.
  cs.add(OpKind::Div, "i32").in(rnd(DType::i32, {5, 13}, -1000, 1000)).in(rnd(DType::i32, {13}, 1, 9));
  cs.add(OpKind::Div, "i64 negative divisors").in(i64({5, 13}, -1000, 1000)).in(i64({13}, -9, -1));
  cs.add(OpKind::Div, "f64").in(rnd(DType::f64, {37}).sp()).in(rnd(DType::f64, {37}));
  for (int64_t fmod : {0, 1}) {
    cs.add(OpKind::Mod, "i64 fmod " + std::to_string(fmod)).in(i64({41}, -100, 100)).in(i64({41}, 1, 9)).attr("fmod", fmod);
    cs.add(OpKind::Mod, "i32 negative divisors, fmod " + std::to_string(fmod))
        .in(rnd(DType::i32, {3, 17}, -100, 100))
        .in(rnd(DType::i32, {17}, -9, -1))
        .attr("fmod", fmod);
  }
  cs.add(OpKind::Mod, "f32 fmod").in(f32({41}, -10, 10).sp()).in(f32({41}, 0.5, 3)).attr("fmod", int64_t(1));
  cs.add(OpKind::BitShift, "left").in(rnd(DType::u32, {37}, 0, 1000)).in(rnd(DType::u32, {37}, 0, 20)).attr("direction", "LEFT");
  cs.add(OpKind::BitShift, "right, broadcast").in(rnd(DType::u8, {4, 9}, 0, 255)).in(cst(scalar<uint8_t>(3))).attr("direction", "RIGHT");
  for (OpKind op : {OpKind::BitwiseAnd, OpKind::BitwiseOr, OpKind::BitwiseXor}) {
    cs.add(op, "i32").in(rnd(DType::i32, {37}, -1000, 1000)).in(rnd(DType::i32, {37}, -1000, 1000));
    cs.add(op, "u8 broadcast").in(rnd(DType::u8, {3, 11}, 0, 255)).in(rnd(DType::u8, {11}, 0, 255));
    cs.add(op, "i64 empty").in(i64({0, 4})).in(i64({4}));
  }
  cs.add(OpKind::PRelu, "per channel").in(f32({2, 3, 4, 5}).sp()).in(f32({3, 1, 1})).exact().needs({G});
  cs.add(OpKind::PRelu, "scalar slope").in(f32({37})).in(cst(scalar<float>(0.25f))).exact();
}

void variadic_and_clip_cases(Cases& cs) {
  for (OpKind op : {OpKind::Max, OpKind::Min, OpKind::Sum, OpKind::Mean}) {
    cs.add(op, "three, broadcast").in(f32({4, 7}).sp()).in(f32({7})).in(f32({4, 1})).tol(DType::f32, {1e-7, 1e-7}).needs({G});
    cs.add(op, "one").in(f32({3, 5}));
    if (op == OpKind::Max || op == OpKind::Min) cs.add(op, "i64").in(i64({9})).in(i64({9}));
  }
  auto f = [](float v) { return scalar<float>(v); };
  cs.add(OpKind::Clip, "const bounds").in(f32({1000}).sp()).in(cst(f(-1))).in(cst(f(0.5))).exact().needs({C, G}).in_place({0});
  cs.add(OpKind::Clip, "runtime bounds").in(f32({1000}).sp()).in(val(f(-1))).in(val(f(0.5))).exact().needs({C, G}).in_place({0});
  cs.add(OpKind::Clip, "runtime min only").in(f32({4, 7}).sp()).in(val(f(-0.5f))).in(none()).exact().needs({G});
  cs.add(OpKind::Clip, "max only").in(f32({1000}).sp()).in(none()).in(cst(f(0.5))).exact().needs({C});
  cs.add(OpKind::Clip, "min only").in(f32({1000}).sp()).in(cst(f(-0.5))).exact().needs({C});
  cs.add(OpKind::Clip, "no bounds").in(f32({1000}).sp()).exact().needs({C});
  cs.add(OpKind::Clip, "min > max").in(f32({1000}).sp()).in(cst(f(1))).in(cst(f(-1))).exact().needs({C});
  cs.add(OpKind::Clip, "NaN bound").in(f32({1000}).sp()).in(cst(f(NAN))).in(cst(f(2))).exact().needs({C});
  cs.add(OpKind::Clip, "i64").in(i64({9})).in(none()).in(cst(scalar<int64_t>(2)));

  // Pow: constant exponents the kernels special-case, tensor exponents, special values on both sides.
  for (float e : {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, -2.5f, 7.0f, 0.0f})
    cs.add(OpKind::Pow, "constant exponent " + std::to_string(e))
        .in(f32({4, 7}).sp())
        .in(cst(f(e)))
        .tol(DType::f32, {2e-7, 2e-7})
        .needs({G});
  for (float e : {2.0f, 0.5f}) {
    cs.add(OpKind::Pow, "cpu exponent").in(f32({4099}).sp()).in(cst(f(e))).exact().needs({C}).in_place({0});
    cs.add(OpKind::Pow, "cpu exponent, edges")
        .in(val(vec<float>({-0.0f, 0.0f, -INFINITY, INFINITY, NAN, -1.0f, 1e-40f, 1e20f, 1e-30f})))
        .in(cst(f(e)))
        .exact()
        .needs({C})
        .in_place({0});
  }
  cs.add(OpKind::Pow, "f64 exponent 2").in(f32({4099}).sp()).in(cst(vec<double>({2.0}))).exact().needs({C});
  cs.add(OpKind::Pow, "i64 exponent 2").in(f32({4099}).sp()).in(cst(vec<int64_t>({2}))).exact().needs({C});
  cs.add(OpKind::Pow, "tensor exponent").in(f32({5, 13}).sp()).in(f32({13})).tol(DType::f32, {2e-7, 2e-7}).needs({G});
  cs.add(OpKind::Pow, "broadcast base").in(f32({13})).in(f32({5, 13})).tol(DType::f32, {2e-7, 2e-7}).needs({G});
  cs.add(OpKind::Pow, "special values")
      .in(val(tensor<float>({NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1, -1, 2, -2, 0.5f, -0.5f, 1e-40f}, {12, 1})))
      .in(val(tensor<float>({NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1, -1, 2, 3, -3, 0.5f, -0.5f}, {1, 12})))
      .tol(DType::f32, {2e-7, 2e-7})
      .needs({G});
  cs.add(OpKind::Pow, "i64 tensor exponent").in(f32({4, 7})).in(i64({7})).exact().needs({G});
  cs.add(OpKind::Pow, "2^24 + 1").in(f32({4, 7})).in(cst(scalar<int64_t>((1 << 24) + 1))).exact().needs({G});
  cs.add(OpKind::Pow, "i64 constant exponent -3").in(f32({4, 7})).in(cst(scalar<int64_t>(-3))).tol(DType::f32, {2e-7, 2e-7})
      .needs({G});
  for (DType dt : {DType::i32, DType::i64}) {
      for (int64_t p : {0, 1, 2, 3, 5, 13, 31, 64})  // overflowing powers wrap as the reference's
        cs.add(OpKind::Pow, std::string(dtype_name(dt)) + " ^ " + std::to_string(p))
            .in(rnd(dt, {41}, -20000, 20000))
            .in(cst(scalar<int64_t>(p)))
            .needs({G});
      cs.add(OpKind::Pow, std::string(dtype_name(dt)) + " ^ f32 tensor").in(rnd(dt, {41}, -20000, 20000))
          .in(f32({41}, -2, 4).sp()).needs({G});
      cs.add(OpKind::Pow, std::string(dtype_name(dt)) + " ^ 2.5").in(rnd(dt, {41}, -20000, 20000))
          .in(cst(scalar<double>(2.5))).needs({G});
  }
}

void conversion_cases(Cases& cs) {
  const DType types[] = {DType::f32, DType::i32, DType::i64, DType::boolean, DType::f16, DType::f64, DType::u8};
  for (DType from : types)
    for (DType to : types) {
      Input in = rnd(from, {2, 9}, -300, 300);
      if (is_float(from)) in.sp();
      cs.add(OpKind::Cast, std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)))
          .in(in)
          .attr("to", int64_t(dtype_onnx_id(to)))
          .exact();
    }
  cs.add(OpKind::Cast, "empty").in(f32({0, 3})).attr("to", int64_t(dtype_onnx_id(DType::i64)));
  // Saturation at i64's ends (the generated kernel clamps, converts and selects: values/cast of values.cpp),
  // 16 lanes and a tail, floats and doubles, to i64 and (modular after) to i32.
  {
    const double big[] = {9.2233715e18, 9223372036854775808.0, -9223372036854775808.0, 1e19, -1e19, 3e38, -3e38,
                          1e10, -1e10, 4294967296.5, -2147483649.0, 0.5, -0.5, 2.5, -0.0, 255.49};
    std::vector<float> f;
    std::vector<double> d;
    for (int i = 0; i < 3; ++i)
      for (double v : big) f.push_back(float(v)), d.push_back(i == 2 ? std::nextafter(9223372036854775808.0, 0.0) : v);
    for (DType to : {DType::i64, DType::i32}) {
      cs.add(OpKind::Cast, "f32 near i64's ends -> " + std::string(dtype_name(to)))
          .in(val(tensor<float>(f, {int64_t(f.size())}))).attr("to", int64_t(dtype_onnx_id(to))).exact();
      cs.add(OpKind::Cast, "f64 near i64's ends -> " + std::string(dtype_name(to)))
          .in(val(tensor<double>(d, {int64_t(d.size())}))).attr("to", int64_t(dtype_onnx_id(to))).exact();
    }
  }
  cs.add(OpKind::CastLike, "f32 like i64").in(f32({37}, -100, 100)).in(i64({1})).exact();
  cs.add(OpKind::CastLike, "i32 like f16").in(rnd(DType::i32, {37}, -100, 100)).in(rnd(DType::f16, {1})).exact();
  cs.add(OpKind::Identity, "f32").in(f32({3, 5}).sp()).exact();
  cs.add(OpKind::Identity, "bool, view").in(rnd(DType::boolean, {4, 6}, -1, 1).view());
  cs.add(OpKind::Dropout, "inference").in(f32({5, 33}).sp()).exact().needs({G});
  cs.add(OpKind::Dropout, "inference with its mask")
      .in(f32({5, 33}))
      .in(cst(scalar<float>(0.3f)))
      .in(cst(scalar<bool>(false)))
      .outs(2)
      .exact()
      .needs({G});
  cs.add(OpKind::Dropout, "training with ratio 0")
      .in(f32({5, 33}))
      .in(cst(scalar<float>(0.0f)))
      .in(cst(scalar<bool>(true)))
      .outs(2)
      .exact()
      .needs({G});
}

}  // namespace

void add_elementwise_cases(Cases& cs) {
  unary_cases(cs);
  binary_cases(cs);
  variadic_and_clip_cases(cs);
  conversion_cases(cs);
}

}  // namespace cuvil::optest
