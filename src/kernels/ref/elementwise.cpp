// Reference kernels of the elementwise family.
//
// Conventions: 16-bit floats compute in float and round once when stored. Integer arithmetic wraps (two's
// complement) instead of hitting C++'s undefined signed overflow; integer division or modulo by zero is an error.
// Float-to-integer conversion truncates toward zero; NaN becomes 0 and out-of-range values saturate to int64
// before wrapping to narrower types (what numpy's astype does on x86 for in-range values).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ir/low_precision.h"
#include "kernels/ref/indexing.h"
#include "kernels/ref/number_text.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// ---- dtype classes and dispatch

template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

enum class Cls { Float, Numeric, SignedNumeric, UnsignedInt, Integer, Bool, All };

template <class T, Cls C>
constexpr bool in_class() {
  switch (C) {
    case Cls::Float: return is_float_v<T>;
    case Cls::Numeric: return is_float_v<T> || is_int_v<T>;
    case Cls::SignedNumeric: return is_float_v<T> || (is_int_v<T> && std::is_signed_v<T>);
    case Cls::UnsignedInt: return is_int_v<T> && std::is_unsigned_v<T>;
    case Cls::Integer: return is_int_v<T>;
    case Cls::Bool: return std::is_same_v<T, bool>;
    case Cls::All: return true;
  }
  return false;
}

// Calls fn.template operator()<T>() for dtype t when it is in class C; otherwise a clear error (inference
// rejects such nodes first, so this only guards kernels called directly).
template <Cls C, class Fn>
void dispatch(const KernelContext& ctx, DType t, Fn&& fn) {
  visit_dtype(t, [&]<class T>() {
    if constexpr (in_class<T, C>()) fn.template operator()<T>();
    else ctx.error("dtype ", dtype_name(t), " is not supported by this op");
  });
}

// ---- conversions

template <class To>
To float_to_int(double v) {
  if (std::isnan(v)) return To(0);
  constexpr double two63 = 9223372036854775808.0;
  if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= 2 * two63) return std::numeric_limits<uint64_t>::max();
    if (v >= two63) return uint64_t(v);
  }
  int64_t i = v >= two63 ? std::numeric_limits<int64_t>::max()
              : v < -two63 ? std::numeric_limits<int64_t>::min()
                           : int64_t(v);
  return static_cast<To>(i);  // modular for narrower types
}

// Cast to bf16 truncates the float's low mantissa bits, as ONNX's Cast (through opset 17) and its test data
// specify; NaN stays NaN.
bf16_t bf16_truncate(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  bf16_t r;
  r.bits = uint16_t(x >> 16);
  if ((x & 0x7fffffffu) > 0x7f800000u) r.bits |= 0x40u;
  return r;
}

// A value as the type arithmetic sees it: float for the 16-bit floats, int for bool, itself otherwise.
template <class T>
auto widen(T v) {
  if constexpr (std::is_same_v<T, bool>) return int(v);
  else return static_cast<compute_t<T>>(v);
}

// One element converted the way Cast does it.
template <class To, class From>
To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return widen(v) != 0;  // NaN is true, as in numpy
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return bf16_truncate(float(widen(v)));
  } else if constexpr (is_float_v<To>) {
    return To(static_cast<compute_t<To>>(widen(v)));
  } else if constexpr (is_float_v<From>) {
    return float_to_int<To>(double(widen(v)));
  } else {
    return static_cast<To>(v);  // integer to integer: modular
  }
}

// ---- wrapping integer arithmetic

// Unsigned type of at least int's width, so the arithmetic neither promotes to signed int nor overflows UB.
template <class T>
using wide_unsigned_t = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

template <class T> T wrap_add(T a, T b) { return T(wide_unsigned_t<T>(a) + wide_unsigned_t<T>(b)); }
template <class T> T wrap_sub(T a, T b) { return T(wide_unsigned_t<T>(a) - wide_unsigned_t<T>(b)); }
template <class T> T wrap_mul(T a, T b) { return T(wide_unsigned_t<T>(a) * wide_unsigned_t<T>(b)); }
template <class T> T wrap_neg(T a) { return T(wide_unsigned_t<T>(0) - wide_unsigned_t<T>(a)); }

// ---- iteration

// Calls fn(i, offsets) for every element i of a row-major output of shape `out`, with offsets[k] the element of
// ins[k] that broadcasts to it (numpy rules). Inputs that do not broadcast to `out` are an error.
template <class Fn>
void for_each_broadcast(const KernelContext& ctx, const std::vector<int64_t>& out, const std::vector<const Tensor*>& ins,
                        Fn&& fn) {
  for (size_t k = 0; k < ins.size(); ++k) {
    const auto& s = ins[k]->shape();
    bool ok = s.size() <= out.size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      int64_t o = out[out.size() - s.size() + d];
      ok = s[d] == o || s[d] == 1;
    }
    if (!ok) ctx.error("input ", k, " of shape ", shape_str(s), " does not broadcast to the output shape ", shape_str(out));
  }
  int64_t n = shape_numel(out);
  if (n == 0) return;
  std::vector<int64_t> offs(ins.size(), 0);
  if (out.empty()) {
    fn(int64_t(0), offs.data());
    return;
  }
  // The innermost dim runs as a plain strided loop; a MultiIndex walks the dims outside it.
  size_t r = out.size();
  std::vector<int64_t> outer(out.begin(), out.end() - 1);
  std::vector<std::vector<int64_t>> outer_strides;
  std::vector<int64_t> inner_stride;
  for (const Tensor* t : ins) {
    std::vector<int64_t> st = ref::broadcast_strides(t->shape(), out);
    inner_stride.push_back(st[r - 1]);
    st.pop_back();
    outer_strides.push_back(std::move(st));
  }
  int64_t inner = out[r - 1], rows = n / inner;
  ref::MultiIndex it(outer, outer_strides);
  int64_t i = 0;
  for (int64_t row = 0; row < rows; ++row, it.next()) {
    for (size_t k = 0; k < offs.size(); ++k) offs[k] = it.offset(k);
    for (int64_t j = 0; j < inner; ++j, ++i) {
      fn(i, offs.data());
      for (size_t k = 0; k < offs.size(); ++k) offs[k] += inner_stride[k];
    }
  }
}

// out[i] = fn(x[i]) over one input of type T; fn sees and returns the compute type (or R for other outputs).
template <class T, class R = T, class Fn>
void map_unary(KernelContext& ctx, Fn&& fn) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.numel() != y.numel()) ctx.internal_error("output size ", y.numel(), " != input size ", x.numel());
  const T* in = x.data<T>();
  R* out = y.data<R>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = R(fn(widen(in[i])));
}

// Unary float math: fn is generic over float/double.
template <class Fn>
void float_unary(KernelContext& ctx, Fn&& fn) {
  dispatch<Cls::Float>(ctx, ctx.input(0).dtype(), [&]<class T>() { map_unary<T>(ctx, fn); });
}

// out = fn(a, b) with broadcasting; a and b of type T, the output of fn's result type R (T or bool).
template <class T, class R, class Fn>
void map_binary(KernelContext& ctx, Fn&& fn) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* py = y.data<R>();
  for_each_broadcast(ctx, y.shape(), {&a, &b}, [&](int64_t i, const int64_t* o) { py[i] = fn(pa[o[0]], pb[o[1]]); });
}

// Binary ops whose output has the inputs' dtype; fn(a, b) works on storage values of type T.
template <Cls C, class Fn>
void same_type_binary(KernelContext& ctx, Fn&& fn) {
  dispatch<C>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_binary<T, T>(ctx, [&](T a, T b) { return fn.template operator()<T>(a, b); });
  });
}

// Comparisons: bool output; floats compare in their compute type (NaN compares false).
template <Cls C, class Fn>
void compare(KernelContext& ctx, Fn&& fn) {
  dispatch<C>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_binary<T, bool>(ctx, [&](T a, T b) { return bool(fn(widen(a), widen(b))); });
  });
}

void copy_input_to_output(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.nbytes() != y.nbytes()) ctx.internal_error("output size differs from the input's");
  if (y.raw() != x.raw() && x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
}

// A scalar input (Clip's bounds, Dropout's ratio) must hold exactly one element.
const Tensor& scalar_input(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.error(what, " must be a scalar, got ", t.type_str());
  return t;
}

}  // namespace

// ---- unary math

CUVIL_REF_KERNEL(Abs) {
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [](auto x) {
      if constexpr (is_float_v<T>) return std::fabs(x);
      else if constexpr (std::is_unsigned_v<T>) return x;
      else return x < 0 ? wrap_neg<T>(T(x)) : T(x);
    });
  });
}

CUVIL_REF_KERNEL(Acos) { float_unary(ctx, [](auto x) { return std::acos(x); }); }
CUVIL_REF_KERNEL(Acosh) { float_unary(ctx, [](auto x) { return std::acosh(x); }); }
CUVIL_REF_KERNEL(Asin) { float_unary(ctx, [](auto x) { return std::asin(x); }); }
CUVIL_REF_KERNEL(Asinh) { float_unary(ctx, [](auto x) { return std::asinh(x); }); }
CUVIL_REF_KERNEL(Atan) { float_unary(ctx, [](auto x) { return std::atan(x); }); }
CUVIL_REF_KERNEL(Atanh) { float_unary(ctx, [](auto x) { return std::atanh(x); }); }
CUVIL_REF_KERNEL(Ceil) { float_unary(ctx, [](auto x) { return std::ceil(x); }); }
CUVIL_REF_KERNEL(Cos) { float_unary(ctx, [](auto x) { return std::cos(x); }); }
CUVIL_REF_KERNEL(Cosh) { float_unary(ctx, [](auto x) { return std::cosh(x); }); }

// Integer inputs: erf of the value, truncated back to the integer type.
CUVIL_REF_KERNEL(Erf) {
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [](auto x) {
      if constexpr (is_float_v<T>) return std::erf(x);
      else return float_to_int<T>(std::erf(double(x)));
    });
  });
}

CUVIL_REF_KERNEL(Exp) { float_unary(ctx, [](auto x) { return std::exp(x); }); }
CUVIL_REF_KERNEL(Floor) { float_unary(ctx, [](auto x) { return std::floor(x); }); }
CUVIL_REF_KERNEL(Log) { float_unary(ctx, [](auto x) { return std::log(x); }); }

CUVIL_REF_KERNEL(Neg) {
  dispatch<Cls::SignedNumeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [](auto x) {
      if constexpr (is_float_v<T>) return -x;
      else return wrap_neg<T>(T(x));
    });
  });
}

CUVIL_REF_KERNEL(Reciprocal) {
  float_unary(ctx, [](auto x) { return decltype(x)(1) / x; });
}

// Halves go to the even neighbour: nearbyint under the default rounding mode.
CUVIL_REF_KERNEL(Round) { float_unary(ctx, [](auto x) { return std::nearbyint(x); }); }

CUVIL_REF_KERNEL(Sign) {
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [](auto x) {
      using C = decltype(x);
      if constexpr (is_float_v<T>) return x > 0 ? C(1) : x < 0 ? C(-1) : x == 0 ? C(0) : x;  // NaN stays NaN
      else if constexpr (std::is_unsigned_v<T>) return C(x > 0 ? 1 : 0);
      else return C(x > 0 ? 1 : x < 0 ? -1 : 0);
    });
  });
}

CUVIL_REF_KERNEL(Sin) { float_unary(ctx, [](auto x) { return std::sin(x); }); }
CUVIL_REF_KERNEL(Sinh) { float_unary(ctx, [](auto x) { return std::sinh(x); }); }
CUVIL_REF_KERNEL(Sqrt) { float_unary(ctx, [](auto x) { return std::sqrt(x); }); }
CUVIL_REF_KERNEL(Tan) { float_unary(ctx, [](auto x) { return std::tan(x); }); }
CUVIL_REF_KERNEL(Tanh) { float_unary(ctx, [](auto x) { return std::tanh(x); }); }

CUVIL_REF_KERNEL(Not) {
  dispatch<Cls::Bool>(ctx, ctx.input(0).dtype(), [&]<class T>() { map_unary<T>(ctx, [](int x) { return !x; }); });
}

CUVIL_REF_KERNEL(IsInf) {
  bool neg = ctx.i("detect_negative") != 0, pos = ctx.i("detect_positive") != 0;
  dispatch<Cls::Float>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T, bool>(ctx, [&](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); });
  });
}

CUVIL_REF_KERNEL(IsNaN) {
  dispatch<Cls::Float>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T, bool>(ctx, [](auto x) { return std::isnan(x); });
  });
}

// ---- activations

CUVIL_REF_KERNEL(Relu) {
  dispatch<Cls::SignedNumeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [](auto x) { return x < 0 ? decltype(x)(0) : x; });  // NaN stays NaN
  });
}

// Written so that neither branch overflows exp for large |x|.
CUVIL_REF_KERNEL(Sigmoid) {
  float_unary(ctx, [](auto x) {
    using C = decltype(x);
    if (x >= 0) return C(1) / (C(1) + std::exp(-x));
    C e = std::exp(x);
    return e / (C(1) + e);
  });
}

// log(1 + exp(x)) without overflow for large x.
CUVIL_REF_KERNEL(Softplus) {
  float_unary(ctx, [](auto x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
}

// x * tanh(softplus(x)), softplus written as above.
CUVIL_REF_KERNEL(Mish) {
  float_unary(ctx, [](auto x) {
    auto sp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    return x * std::tanh(sp);
  });
}

CUVIL_REF_KERNEL(Softsign) {
  float_unary(ctx, [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
}

CUVIL_REF_KERNEL(Elu) {
  float alpha = ctx.f("alpha");
  float_unary(ctx, [&](auto x) {
    using C = decltype(x);
    return x < 0 ? C(alpha) * std::expm1(x) : x;
  });
}

CUVIL_REF_KERNEL(Selu) {
  float alpha = ctx.f("alpha"), gamma = ctx.f("gamma");
  float_unary(ctx, [&](auto x) {
    using C = decltype(x);
    return x <= 0 ? C(gamma) * (C(alpha) * std::exp(x) - C(alpha)) : C(gamma) * x;
  });
}

// max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
CUVIL_REF_KERNEL(Celu) {
  float alpha = ctx.f("alpha");
  if (alpha == 0) ctx.error("attribute 'alpha' must not be 0");
  float_unary(ctx, [&](auto x) {
    using C = decltype(x);
    return x > 0 ? x : C(alpha) * std::expm1(x / C(alpha));
  });
}

CUVIL_REF_KERNEL(LeakyRelu) {
  float alpha = ctx.f("alpha");
  float_unary(ctx, [&](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; });
}

namespace {
// max(0, min(1, v)), keeping NaN.
template <class C>
C clamp01(C v) {
  return v < 0 ? C(0) : v > 1 ? C(1) : v;
}
}  // namespace

CUVIL_REF_KERNEL(HardSigmoid) {
  float alpha = ctx.f("alpha"), beta = ctx.f("beta");
  float_unary(ctx, [&](auto x) {
    using C = decltype(x);
    return clamp01(C(alpha) * x + C(beta));
  });
}

CUVIL_REF_KERNEL(HardSwish) {
  float_unary(ctx, [](auto x) {
    using C = decltype(x);
    return x * clamp01(x / C(6) + C(0.5));
  });
}

CUVIL_REF_KERNEL(Gelu) {
  bool tanh_form = ctx.s("approximate") == "tanh";
  float_unary(ctx, [&](auto x) {
    using C = decltype(x);
    if (tanh_form) {
      C inner = C(0.7978845608028654) * (x + C(0.044715) * x * x * x);  // sqrt(2/pi) (x + 0.044715 x^3)
      return C(0.5) * x * (C(1) + std::tanh(inner));
    }
    return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
  });
}

CUVIL_REF_KERNEL(ThresholdedRelu) {
  float alpha = ctx.f("alpha");
  float_unary(ctx, [&](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
}

// Integer inputs compute in double and convert back (x - bias may leave the type's range).
CUVIL_REF_KERNEL(Shrink) {
  float bias = ctx.f("bias"), lambd = ctx.f("lambd");
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_unary<T>(ctx, [&](auto x) {
      using C = std::conditional_t<is_float_v<T>, decltype(x), double>;
      C v = C(x);
      C r = v < -C(lambd) ? v + C(bias) : v > C(lambd) ? v - C(bias) : C(0);
      if constexpr (is_float_v<T>) return r;
      else return float_to_int<T>(r);
    });
  });
}

CUVIL_REF_KERNEL(PRelu) {
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    map_binary<T, T>(ctx, [](T x, T slope) -> T {
      if constexpr (is_float_v<T>) return widen(x) < 0 ? T(widen(slope) * widen(x)) : x;
      else if constexpr (std::is_unsigned_v<T>) return x;
      else return x < 0 ? wrap_mul(slope, x) : x;
    });
  });
}

// A missing bound is no bound. With min > max every element becomes max (numpy's clip does the same); NaN
// inputs stay NaN.
CUVIL_REF_KERNEL(Clip) {
  dispatch<Cls::Numeric>(ctx, ctx.input(0).dtype(), [&]<class T>() {
    bool has_lo = ctx.has_input(1), has_hi = ctx.has_input(2);
    auto lo = has_lo ? widen(scalar_input(ctx, 1, "min").template data<T>()[0]) : widen(T(0));
    auto hi = has_hi ? widen(scalar_input(ctx, 2, "max").template data<T>()[0]) : widen(T(0));
    map_unary<T>(ctx, [&](auto x) {
      if (has_lo && x < lo) x = lo;
      if (has_hi && x > hi) x = hi;
      return x;
    });
  });
}

// ---- binary / variadic with broadcasting

CUVIL_REF_KERNEL(Add) {
  same_type_binary<Cls::Numeric>(ctx, []<class T>(T a, T b) -> T {
    if constexpr (is_float_v<T>) return T(widen(a) + widen(b));
    else return wrap_add(a, b);
  });
}

CUVIL_REF_KERNEL(Sub) {
  same_type_binary<Cls::Numeric>(ctx, []<class T>(T a, T b) -> T {
    if constexpr (is_float_v<T>) return T(widen(a) - widen(b));
    else return wrap_sub(a, b);
  });
}

CUVIL_REF_KERNEL(Mul) {
  same_type_binary<Cls::Numeric>(ctx, []<class T>(T a, T b) -> T {
    if constexpr (is_float_v<T>) return T(widen(a) * widen(b));
    else return wrap_mul(a, b);
  });
}

// Integer division truncates toward zero; min / -1 wraps to min.
CUVIL_REF_KERNEL(Div) {
  same_type_binary<Cls::Numeric>(ctx, [&]<class T>(T a, T b) -> T {
    if constexpr (is_float_v<T>) {
      return T(widen(a) / widen(b));
    } else {
      if (b == 0) ctx.error("integer division by zero");
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return wrap_neg(a);
      return T(a / b);
    }
  });
}

namespace {
// Integer power by squaring, wrapping on overflow.
template <class T>
T int_pow(T base, uint64_t n) {
  T r = 1;
  for (; n; n >>= 1) {
    if (n & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
  }
  return r;
}
// A negative integer power: 1 / base^n truncated toward zero.
template <class T>
T int_pow_negative(const KernelContext& ctx, T base, bool odd) {
  if (base == 1) return T(1);
  if (base == T(-1)) return odd ? T(-1) : T(1);
  if (base == 0) ctx.error("0 raised to a negative integer power");
  return T(0);
}
}  // namespace

// Float bases compute in double; integer bases with float exponents too, truncated back; integer ^ integer is
// exact (wrapping).
CUVIL_REF_KERNEL(Pow) {
  const Tensor& xt = ctx.input(0);
  const Tensor& et = ctx.input(1);
  Tensor& yt = ctx.output(0);
  dispatch<Cls::Numeric>(ctx, xt.dtype(), [&]<class T>() {
    if constexpr (!is_float_v<T> && !std::is_same_v<T, int32_t> && !std::is_same_v<T, int64_t>) {
      ctx.error("base dtype ", dtype_name(xt.dtype()), " is not supported");
    } else {
      dispatch<Cls::Numeric>(ctx, et.dtype(), [&]<class E>() {
        const T* x = xt.data<T>();
        const E* e = et.data<E>();
        T* y = yt.data<T>();
        for_each_broadcast(ctx, yt.shape(), {&xt, &et}, [&](int64_t i, const int64_t* o) {
          T b = x[o[0]];
          E p = e[o[1]];
          if constexpr (is_float_v<T>) {
            y[i] = T(std::pow(double(widen(b)), double(widen(p))));
          } else if constexpr (is_float_v<E>) {
            y[i] = float_to_int<T>(std::pow(double(b), double(widen(p))));
          } else if constexpr (std::is_unsigned_v<E>) {
            y[i] = int_pow<T>(b, uint64_t(p));
          } else {
            y[i] = p < 0 ? int_pow_negative<T>(ctx, b, (p & 1) != 0) : int_pow<T>(b, uint64_t(p));
          }
        });
      });
    }
  });
}

// fmod=0: modulus with the divisor's sign (Python's %). fmod=1: C fmod, the dividend's sign.
CUVIL_REF_KERNEL(Mod) {
  bool fmod = ctx.i("fmod") != 0;
  same_type_binary<Cls::Numeric>(ctx, [&]<class T>(T a, T b) -> T {
    if constexpr (is_float_v<T>) {
      auto r = std::fmod(widen(a), widen(b));
      if (fmod || widen(b) == 0) return T(r);
      // fmod=0 on floats is numpy's mod (onnx's reference): a nonzero remainder takes the divisor's sign, a zero
      // one the divisor's sign of zero.
      if (r != 0) {
        if ((widen(b) < 0) != (r < 0)) r += widen(b);
      } else {
        r = std::copysign(decltype(r)(0), widen(b));
      }
      return T(r);
    } else {
      if (b == 0) ctx.error("integer modulo by zero");
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return T(0);
        T r = T(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
        return r;
      } else {
        return T(a % b);
      }
    }
  });
}

// Shifting by a negative amount or by the type's width or more gives 0, or -1 for a negative value shifted right
// (onnx 1.23, opset 28: signed types shift arithmetically right; left shifts wrap like unsigned ones).
CUVIL_REF_KERNEL(BitShift) {
  const std::string& dir = ctx.s("direction");
  if (dir != "LEFT" && dir != "RIGHT") ctx.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\"");
  bool left = dir == "LEFT";
  same_type_binary<Cls::Integer>(ctx, [&]<class T>(T x, T n) -> T {
    using U = std::make_unsigned_t<T>;
    using W = wide_unsigned_t<U>;
    bool out_of_range = (std::is_signed_v<T> && n < 0) || uint64_t(U(n)) >= sizeof(T) * 8;
    if (out_of_range) return (!left && std::is_signed_v<T> && x < 0) ? T(-1) : T(0);
    if (left) return T(U(W(U(x)) << n));
    if constexpr (std::is_signed_v<T>) return T(x >> n);  // arithmetic (C++20 defines it)
    else return T(W(x) >> n);
  });
}

CUVIL_REF_KERNEL(BitwiseAnd) { same_type_binary<Cls::Integer>(ctx, []<class T>(T a, T b) -> T { return T(a & b); }); }
CUVIL_REF_KERNEL(BitwiseOr) { same_type_binary<Cls::Integer>(ctx, []<class T>(T a, T b) -> T { return T(a | b); }); }
CUVIL_REF_KERNEL(BitwiseXor) { same_type_binary<Cls::Integer>(ctx, []<class T>(T a, T b) -> T { return T(a ^ b); }); }
CUVIL_REF_KERNEL(BitwiseNot) {
  dispatch<Cls::Integer>(ctx, ctx.input(0).dtype(), [&]<class T>() { map_unary<T>(ctx, [](auto x) { return ~x; }); });
}

CUVIL_REF_KERNEL(And) { compare<Cls::Bool>(ctx, [](int a, int b) { return a && b; }); }
CUVIL_REF_KERNEL(Or) { compare<Cls::Bool>(ctx, [](int a, int b) { return a || b; }); }
CUVIL_REF_KERNEL(Xor) { compare<Cls::Bool>(ctx, [](int a, int b) { return a != b; }); }
CUVIL_REF_KERNEL(Equal) {
  if (ctx.input(0).dtype() == DType::str) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    bool* y = ctx.output(0).data<bool>();
    for_each_broadcast(ctx, ctx.output(0).shape(), {&a, &b},
                       [&](int64_t i, const int64_t* o) { y[i] = a.str(o[0]) == b.str(o[1]); });
    return;
  }
  compare<Cls::All>(ctx, [](auto a, auto b) { return a == b; });
}
CUVIL_REF_KERNEL(Greater) { compare<Cls::Numeric>(ctx, [](auto a, auto b) { return a > b; }); }
CUVIL_REF_KERNEL(GreaterOrEqual) { compare<Cls::Numeric>(ctx, [](auto a, auto b) { return a >= b; }); }
CUVIL_REF_KERNEL(Less) { compare<Cls::Numeric>(ctx, [](auto a, auto b) { return a < b; }); }
CUVIL_REF_KERNEL(LessOrEqual) { compare<Cls::Numeric>(ctx, [](auto a, auto b) { return a <= b; }); }

CUVIL_REF_KERNEL(Where) {
  const Tensor& cond = ctx.input(0);
  const Tensor& xt = ctx.input(1);
  const Tensor& yt = ctx.input(2);
  Tensor& out = ctx.output(0);
  if (cond.dtype() != DType::boolean) ctx.error("condition must be bool, got ", dtype_name(cond.dtype()));
  if (xt.dtype() == DType::str) {  // the chosen elements' pointers: the runtime copies their text (Tensor::strings)
    const bool* c = cond.data<bool>();
    auto x = static_cast<const std::string* const*>(xt.raw());
    auto y = static_cast<const std::string* const*>(yt.raw());
    auto o = static_cast<const std::string**>(out.raw());
    for_each_broadcast(ctx, out.shape(), {&cond, &xt, &yt},
                       [&](int64_t i, const int64_t* off) { o[i] = c[off[0]] ? x[off[1]] : y[off[2]]; });
    return;
  }
  dispatch<Cls::All>(ctx, xt.dtype(), [&]<class T>() {
    const bool* c = cond.data<bool>();
    const T* x = xt.data<T>();
    const T* y = yt.data<T>();
    T* o = out.data<T>();
    for_each_broadcast(ctx, out.shape(), {&cond, &xt, &yt},
                       [&](int64_t i, const int64_t* off) { o[i] = c[off[0]] ? x[off[1]] : y[off[2]]; });
  });
}

namespace {
// out = fold of fn over all inputs (broadcast), in the compute type; `finish` maps the result (Mean divides).
template <Cls C, class Fn, class Finish>
void variadic_fold(KernelContext& ctx, Fn&& fn, Finish&& finish) {
  std::vector<const Tensor*> ins;
  for (size_t k = 0; k < ctx.num_inputs(); ++k) ins.push_back(&ctx.input(k));
  if (ins.empty()) ctx.error("needs at least one input");
  Tensor& out = ctx.output(0);
  dispatch<C>(ctx, ins[0]->dtype(), [&]<class T>() {
    std::vector<const T*> p;
    for (const Tensor* t : ins) p.push_back(t->data<T>());
    T* o = out.data<T>();
    for_each_broadcast(ctx, out.shape(), ins, [&](int64_t i, const int64_t* off) {
      auto acc = widen(p[0][off[0]]);
      for (size_t k = 1; k < p.size(); ++k) acc = fn(acc, widen(p[k][off[k]]));
      o[i] = T(finish(acc));
    });
  });
}

// max/min that propagate NaN, like numpy's maximum/minimum.
template <class C>
C nan_max(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a < b ? b : a;
}
template <class C>
C nan_min(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return b < a ? b : a;
}
}  // namespace

CUVIL_REF_KERNEL(Max) {
  variadic_fold<Cls::Numeric>(ctx, [](auto a, auto b) { return nan_max(a, b); }, [](auto a) { return a; });
}

CUVIL_REF_KERNEL(Min) {
  variadic_fold<Cls::Numeric>(ctx, [](auto a, auto b) { return nan_min(a, b); }, [](auto a) { return a; });
}

CUVIL_REF_KERNEL(Sum) {
  variadic_fold<Cls::Float>(ctx, [](auto a, auto b) { return a + b; }, [](auto a) { return a; });
}

CUVIL_REF_KERNEL(Mean) {
  auto n = double(ctx.num_inputs());
  variadic_fold<Cls::Float>(ctx, [](auto a, auto b) { return a + b; },
                            [n](auto a) { return decltype(a)(a / decltype(a)(n)); });
}

// ---- type conversion and pass-through

namespace {
// Casts from or to a low-precision type go through double: each code decodes exactly, and every computing
// dtype's value is exact in double, so the one rounding is the encoder's (or cast_value's).
void cast_low_precision(KernelContext& ctx, const Tensor& x, Tensor& y, DType to) {
  const int64_t n = x.numel();
  std::vector<double> vals(static_cast<size_t>(n));
  if (is_low_precision(x.dtype())) {
    const auto* in = static_cast<const uint8_t*>(x.raw());
    for (int64_t i = 0; i < n; ++i) vals[size_t(i)] = low_precision_decode(x.dtype(), in[i]);
  } else {
    visit_dtype(x.dtype(), [&]<class From>() {
      const From* in = x.data<From>();
      for (int64_t i = 0; i < n; ++i) vals[size_t(i)] = double(widen(in[i]));
    });
  }
  if (is_low_precision(to)) {
    bool saturate = ctx.i("saturate") != 0;
    std::optional<E8M0Rounding> round = e8m0_rounding_from_name(ctx.s("round_mode"));
    if (!round) ctx.internal_error("round_mode '", ctx.s("round_mode"), "'");
    auto* out = static_cast<uint8_t*>(y.raw());
    for (int64_t i = 0; i < n; ++i) out[i] = low_precision_encode(to, vals[size_t(i)], saturate, *round);
    return;
  }
  visit_dtype(to, [&]<class To>() {
    To* out = y.data<To>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<To, bf16_t>) {
        if (ctx.i("round_bf16") != 0) {
          out[i] = bf16_t(float(vals[size_t(i)]));
          continue;
        }
      }
      out[i] = cast_value<To>(vals[size_t(i)]);
    }
  });
}

// Numbers to text and back (ref/number_text.h); text that is no number of the type fails the run.
void cast_strings(KernelContext& ctx, const Tensor& x, DType to) {
  if (x.dtype() == DType::str && to == DType::str) return ctx.set_output(0, x);
  if (to == DType::str) {
    if (is_low_precision(x.dtype())) ctx.error("casting ", dtype_name(x.dtype()), " to strings is not supported");
    std::vector<std::string> text(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) text[size_t(i)] = ref::number_text(x, i);
    return ctx.set_output(0, Tensor::strings(std::move(text), x.shape()));
  }
  if (is_low_precision(to)) ctx.error("casting strings to ", dtype_name(to), " is not supported");
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!ref::read_number(x.str(i), y, i))
      ctx.error("element ", i, " (\"", x.str(i), "\") is not a ", dtype_name(to), " value");
}

void cast_to(KernelContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::str || to == DType::str) return cast_strings(ctx, x, to);
  Tensor& y = ctx.output(0);
  if (y.dtype() != to || x.numel() != y.numel()) ctx.internal_error("output is ", y.type_str());
  if (is_low_precision(x.dtype()) || is_low_precision(to)) return cast_low_precision(ctx, x, y, to);
  visit_dtype(x.dtype(), [&]<class From>() {
    visit_dtype(to, [&]<class To>() {
      const From* in = x.data<From>();
      To* out = y.data<To>();
      if constexpr (std::is_same_v<To, bf16_t>) {
        if (ctx.i("round_bf16") != 0) {  // round to nearest even (bf16_t's conversion from float)
          for (int64_t i = 0; i < x.numel(); ++i) out[i] = bf16_t(float(widen(in[i])));
          return;
        }
      }
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = cast_value<To>(in[i]);
    });
  });
}
}  // namespace

CUVIL_REF_KERNEL(Cast) {
  auto to = dtype_from_onnx_id(int(ctx.i("to")));
  if (!to) ctx.error("attribute 'to' = ", ctx.i("to"), " is not a supported data type");
  cast_to(ctx, *to);
}

CUVIL_REF_KERNEL(CastLike) { cast_to(ctx, ctx.input(1).dtype()); }

CUVIL_REF_KERNEL(Identity) { copy_input_to_output(ctx); }

// Inference (training_mode absent or false) and ratio 0 are the identity with an all-true mask; random dropout
// (training with ratio > 0) is not supported.
CUVIL_REF_KERNEL(Dropout) {
  double ratio = ctx.has_input(1) ? scalar_input(ctx, 1, "ratio").get_f64(0) : 0.5;
  bool training = ctx.has_input(2) && scalar_input(ctx, 2, "training_mode").get_i64(0) != 0;
  if (training) {
    if (!(ratio >= 0 && ratio < 1)) ctx.error("ratio must be in [0, 1), got ", ratio);
    if (ratio > 0)
      ctx.error("training-mode dropout with ratio ", ratio,
                " is random; Cuvil runs inference only (set training_mode to false or the ratio to 0)");
  }
  copy_input_to_output(ctx);
  if (ctx.num_outputs() > 1) {
    Tensor& mask = ctx.output(1);
    bool* m = mask.data<bool>();
    for (int64_t i = 0; i < mask.numel(); ++i) m[i] = true;
  }
}

}  // namespace cuvil
