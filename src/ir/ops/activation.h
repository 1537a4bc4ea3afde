// The activation a fused op (FusedConv, FusedMatMul) applies to its result: attribute `activation` names an ONNX
// element-wise op ("" for none) and `activation_params` holds that op's float attributes in ONNX order.
//
//   Relu []  LeakyRelu [alpha]  Clip [min, max]  Sigmoid []  Tanh []  HardSigmoid [alpha, beta]  HardSwish []
//   Gelu []  GeluTanh []  Elu [alpha]
//
// Shared by inference (validation), the reference kernels (apply) and oneDNN (post-ops).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ir/op_schema.h"

namespace cuvil::nn {

enum class Act { None, Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu, GeluTanh, Elu };

struct Activation {
  Act kind = Act::None;
  float alpha = 0, beta = 0;  // LeakyRelu/Elu: alpha; Clip: [alpha, beta] = [min, max]; HardSigmoid: alpha, beta
};

inline void activation_attrs(OpSchema& s) {
  s.attr("activation", AttrKind::String, "").attr("activation_params", AttrKind::Floats, std::vector<double>{});
}

// Reads and validates the activation attributes. Ctx is an InferContext or a KernelContext.
template <class Ctx>
Activation read_activation(const Ctx& c) {
  struct Row {
    const char* name;
    Act kind;
    size_t params;
  };
  static const Row kRows[] = {{"", Act::None, 0},           {"Relu", Act::Relu, 0},
                              {"LeakyRelu", Act::LeakyRelu, 1}, {"Clip", Act::Clip, 2},
                              {"Sigmoid", Act::Sigmoid, 0},  {"Tanh", Act::Tanh, 0},
                              {"HardSigmoid", Act::HardSigmoid, 2}, {"HardSwish", Act::HardSwish, 0},
                              {"Gelu", Act::Gelu, 0},        {"GeluTanh", Act::GeluTanh, 0},
                              {"Elu", Act::Elu, 1}};
  const std::string& name = c.s("activation");
  const std::vector<double>& p = c.floats("activation_params");
  for (const Row& r : kRows) {
    if (name != r.name) continue;
    if (p.size() != r.params)
      c.error("activation '", name, "' takes ", r.params, " activation_params, got ", p.size());
    Activation a{r.kind, p.size() > 0 ? float(p[0]) : 0.f, p.size() > 1 ? float(p[1]) : 0.f};
    return a;
  }
  c.error("unknown activation '", name, "'");
}

// The reference semantics (the formulas of the ONNX ops; NaN propagates), in F = float or double.
template <class F>
F apply_activation(const Activation& a, F x) {
  const F al = F(a.alpha), be = F(a.beta);
  switch (a.kind) {
    case Act::None: return x;
    case Act::Relu: return x < 0 ? F(0) : x;
    case Act::LeakyRelu: return x < 0 ? al * x : x;
    case Act::Clip: return x < al ? al : (x > be ? be : x);
    case Act::Sigmoid: return F(1) / (F(1) + std::exp(-x));
    case Act::Tanh: return std::tanh(x);
    case Act::HardSigmoid: return std::fmax(F(0), std::fmin(F(1), al * x + be));
    case Act::HardSwish: return x * std::fmax(F(0), std::fmin(F(1), x / F(6) + F(0.5)));
    case Act::Gelu: return F(0.5) * x * (F(1) + std::erf(x * F(0.7071067811865476)));
    case Act::GeluTanh: return F(0.5) * x * (F(1) + std::tanh(F(0.7978845608028654) * (x + F(0.044715) * x * x * x)));
    case Act::Elu: return x < 0 ? al * (std::exp(x) - F(1)) : x;
  }
  return x;
}

}  // namespace cuvil::nn
