#include "passes/fusion.h"

#include "passes/rewrite.h"

namespace cuvil::fusion {

std::optional<nn::Activation> activation_of(const Node& n) {
  if (n.num_outputs() != 1 || !n.input(0)) return std::nullopt;
  AttrReader a(n);
  switch (n.op()) {
    case OpKind::Relu: return nn::Activation{nn::Act::Relu};
    case OpKind::LeakyRelu: return nn::Activation{nn::Act::LeakyRelu, a.f("alpha")};
    case OpKind::Sigmoid: return nn::Activation{nn::Act::Sigmoid};
    case OpKind::Tanh: return nn::Activation{nn::Act::Tanh};
    case OpKind::HardSigmoid: return nn::Activation{nn::Act::HardSigmoid, a.f("alpha"), a.f("beta")};
    case OpKind::HardSwish: return nn::Activation{nn::Act::HardSwish};
    case OpKind::Elu: return nn::Activation{nn::Act::Elu, a.f("alpha")};
    case OpKind::Gelu:
      return nn::Activation{a.s("approximate") == "tanh" ? nn::Act::GeluTanh : nn::Act::Gelu};
    case OpKind::Clip: {
      auto lo = n.num_inputs() > 1 ? rewrite::scalar_constant(n.input(1)) : std::nullopt;
      auto hi = n.num_inputs() > 2 ? rewrite::scalar_constant(n.input(2)) : std::nullopt;
      bool has_hi = n.num_inputs() > 2 && n.input(2);
      if (lo && !has_hi && *lo == 0) return nn::Activation{nn::Act::Relu};
      if (lo && hi) return nn::Activation{nn::Act::Clip, float(*lo), float(*hi)};
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

void set_activation(AttrMap& attrs, const nn::Activation& a) {
  static const char* kNames[] = {"",     "Relu",        "LeakyRelu", "Clip", "Sigmoid", "Tanh",
                                 "HardSigmoid", "HardSwish", "Gelu", "GeluTanh", "Elu"};
  std::vector<double> params;
  switch (a.kind) {
    case nn::Act::LeakyRelu:
    case nn::Act::Elu: params = {a.alpha}; break;
    case nn::Act::Clip:
    case nn::Act::HardSigmoid: params = {a.alpha, a.beta}; break;
    default: break;
  }
  if (a.kind == nn::Act::None) return;
  attrs["activation"] = Attribute(std::string(kNames[int(a.kind)]));
  if (!params.empty()) attrs["activation_params"] = Attribute(params);
}

}  // namespace cuvil::fusion
