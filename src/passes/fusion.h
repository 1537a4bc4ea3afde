// What the fusion passes (fuse-conv, fuse-matmul) share: recognizing an element-wise node as an activation a fused
// op can apply, and writing it into the fused node's attributes.
#pragma once

#include <optional>

#include "ir/ops/activation.h"

namespace cuvil::fusion {

// The activation n applies to its input 0, when n is one a fused op can take: Relu, LeakyRelu, Clip with constant
// min and max (Clip with only min = 0 is Relu), Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu, Elu.
std::optional<nn::Activation> activation_of(const Node& n);

// Sets the "activation" and "activation_params" attributes.
void set_activation(AttrMap& attrs, const nn::Activation& a);

}  // namespace cuvil::fusion
