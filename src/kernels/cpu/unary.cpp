// Unary element-wise f32 kernels: one vectorizable loop per op, threaded over contiguous ranges. Each op's
// formula is the reference kernel's (src/kernels/ref/elementwise.cpp) evaluated in float, so the cheap ops are
// bit-exact; exp/tanh/erf (and what uses them) go through vec_math.h. y may be x itself (in place): element i
// is read before it is written.
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vec_math.h"

namespace cuvil::cpu {

namespace {

#if defined(__GNUC__)
#define CUVIL_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CUVIL_ALWAYS_INLINE inline
#endif

// clamp to [0, 1], keeping NaN (as the reference's clamp01)
CUVIL_ALWAYS_INLINE float clamp01(float v) {
  v = select_f(v < 0.0f, 0.0f, v);
  return select_f(v > 1.0f, 1.0f, v);
}

struct Params {
  float alpha = 0, beta = 0;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

// One function per op, `f(x, params)`; the loop around it is stamped out per op below.
struct Relu { static float f(float x, const Params&) { return select_f(x < 0.0f, 0.0f, x); } };
struct Neg { static float f(float x, const Params&) { return -x; } };
struct Abs { static float f(float x, const Params&) { return std::fabs(x); } };
struct Reciprocal { static float f(float x, const Params&) { return 1.0f / x; } };
struct Sqrt { static float f(float x, const Params&) { return std::sqrt(x); } };
struct Exp { static float f(float x, const Params&) { return exp_f(x); } };
struct Tanh { static float f(float x, const Params&) { return tanh_f(x); } };
struct Erf { static float f(float x, const Params&) { return erf_f(x); } };
struct Sigmoid { static float f(float x, const Params&) { return sigmoid_f(x); } };
struct LeakyRelu {
  static float f(float x, const Params& p) { return select_f(x < 0.0f, p.alpha * x, x); }
};
struct HardSigmoid {
  static float f(float x, const Params& p) { return clamp01(p.alpha * x + p.beta); }
};
struct HardSwish {
  static float f(float x, const Params&) { return x * clamp01(x / 6.0f + 0.5f); }
};
// A missing bound is ±inf, which never clamps: the reference's `if (has_lo && x < lo)` exactly, NaN kept.
struct Clip {
  static float f(float x, const Params& p) {
    x = select_f(x < p.lo, p.lo, x);
    return select_f(x > p.hi, p.hi, x);
  }
};
struct Elu {
  static float f(float x, const Params& p) { return select_f(x < 0.0f, p.alpha * (exp_f(x) - 1.0f), x); }
};
struct GeluErf {
  static float f(float x, const Params&) { return 0.5f * x * (1.0f + erf_f(x * 0.7071067811865476f)); }
};
struct GeluTanh {
  static float f(float x, const Params&) {
    float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanh_f(inner));
  }
};

template <class Op>
CUVIL_ALWAYS_INLINE void map_loop(const float* x, float* y, int64_t n, const Params& p) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = Op::f(x[i], p);
}

using LoopFn = void (*)(const float*, float*, int64_t, const Params&);

// Per-op loops compiled for each ISA level (CUVIL_CPU_CLONES needs plain functions, not templates).
#define CUVIL_UNARY_LOOP(Op) \
  CUVIL_CPU_CLONES void loop_##Op(const float* x, float* y, int64_t n, const Params& p) { map_loop<Op>(x, y, n, p); }
CUVIL_UNARY_LOOP(Relu)
CUVIL_UNARY_LOOP(Neg)
CUVIL_UNARY_LOOP(Abs)
CUVIL_UNARY_LOOP(Reciprocal)
CUVIL_UNARY_LOOP(Sqrt)
CUVIL_UNARY_LOOP(Exp)
CUVIL_UNARY_LOOP(Tanh)
CUVIL_UNARY_LOOP(Erf)
CUVIL_UNARY_LOOP(Sigmoid)
CUVIL_UNARY_LOOP(LeakyRelu)
CUVIL_UNARY_LOOP(HardSigmoid)
CUVIL_UNARY_LOOP(HardSwish)
CUVIL_UNARY_LOOP(Clip)
CUVIL_UNARY_LOOP(GeluErf)
CUVIL_UNARY_LOOP(GeluTanh)
CUVIL_UNARY_LOOP(Elu)
#undef CUVIL_UNARY_LOOP

// Work per element relative to a copy, so that cheap ops need more elements before threads pay off.
int64_t op_cost(OpKind k) {
  switch (k) {
    case OpKind::Exp: case OpKind::Tanh: case OpKind::Erf: case OpKind::Sigmoid: case OpKind::Gelu: return 8;
    default: return 1;
  }
}

// A scalar bound of Clip: its value when constant, else read when the kernel runs.
float read_bound(const Tensor& t) { return t.data<float>()[0]; }

}  // namespace

void activate_inplace(float* x, int64_t n, const nn::Activation& a) {
  Params p;
  p.alpha = a.alpha;
  p.beta = a.beta;
  LoopFn loop = nullptr;
  switch (a.kind) {
    case nn::Act::None: return;
    case nn::Act::Relu: loop = loop_Relu; break;
    case nn::Act::LeakyRelu: loop = loop_LeakyRelu; break;
    case nn::Act::Clip: loop = loop_Clip, p.lo = a.alpha, p.hi = a.beta; break;
    case nn::Act::Sigmoid: loop = loop_Sigmoid; break;
    case nn::Act::Tanh: loop = loop_Tanh; break;
    case nn::Act::HardSigmoid: loop = loop_HardSigmoid; break;
    case nn::Act::HardSwish: loop = loop_HardSwish; break;
    case nn::Act::Gelu: loop = loop_GeluErf; break;
    case nn::Act::GeluTanh: loop = loop_GeluTanh; break;
    case nn::Act::Elu: loop = loop_Elu; break;
  }
  loop(x, x, n, p);
}

std::unique_ptr<PreparedKernel> prepare_unary(const Node& n, const std::vector<PrepareInput>& inputs) {
  if (inputs.empty() || !inputs[0].present || inputs[0].dtype != DType::f32) return nullptr;
  AttrReader attrs(n);
  Params params;
  LoopFn loop = nullptr;
  switch (n.op()) {
    case OpKind::Relu: loop = loop_Relu; break;
    case OpKind::Neg: loop = loop_Neg; break;
    case OpKind::Abs: loop = loop_Abs; break;
    case OpKind::Reciprocal: loop = loop_Reciprocal; break;
    case OpKind::Sqrt: loop = loop_Sqrt; break;
    case OpKind::Exp: loop = loop_Exp; break;
    case OpKind::Tanh: loop = loop_Tanh; break;
    case OpKind::Erf: loop = loop_Erf; break;
    case OpKind::Sigmoid: loop = loop_Sigmoid; break;
    case OpKind::LeakyRelu: loop = loop_LeakyRelu; params.alpha = attrs.f("alpha"); break;
    case OpKind::HardSigmoid:
      loop = loop_HardSigmoid;
      params.alpha = attrs.f("alpha");
      params.beta = attrs.f("beta");
      break;
    case OpKind::HardSwish: loop = loop_HardSwish; break;
    case OpKind::Gelu: {
      const std::string& a = attrs.s("approximate");
      if (a == "none") loop = loop_GeluErf;
      else if (a == "tanh") loop = loop_GeluTanh;
      else return nullptr;
      break;
    }
    case OpKind::Clip:
      loop = loop_Clip;
      for (size_t i = 1; i < inputs.size(); ++i)
        if (inputs[i].present && (inputs[i].dtype != DType::f32 || shape_numel(inputs[i].shape) != 1)) return nullptr;
      break;
    default: return nullptr;
  }
  int64_t cost = op_cost(n.op());
  bool clip = n.op() == OpKind::Clip;
  return make_kernel(
      [loop, params, cost, clip](KernelContext& ctx) {
        const Tensor& x = ctx.input(0);
        Tensor& y = ctx.output(0);
        Params p = params;
        if (clip) {
          if (ctx.has_input(1)) p.lo = read_bound(ctx.input(1));
          if (ctx.has_input(2)) p.hi = read_bound(ctx.input(2));
        }
        const float* xp = x.data<float>();
        float* yp = y.data<float>();
        parallel_ranges(x.numel(), cost, 16, [&](int64_t b, int64_t e) { loop(xp + b, yp + b, e - b, p); });
      },
      std::string("unary:") + std::string(op_name(n.op())));
}

}  // namespace cuvil::cpu
