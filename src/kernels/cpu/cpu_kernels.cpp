// Picks the hand-written CPU kernel family for a node; each family decides from the node and the input types
// whether it has a fast kernel (see cpu_util.h for the list).
#include "kernels/cpu/cpu_kernels.h"

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

std::unique_ptr<PreparedKernel> prepare_cpu_kernel(const Node& n, const std::vector<PrepareInput>& inputs) {
  switch (n.op()) {
    case OpKind::Relu: case OpKind::Neg: case OpKind::Abs: case OpKind::Reciprocal: case OpKind::Sqrt:
    case OpKind::Exp: case OpKind::Tanh: case OpKind::Erf: case OpKind::Sigmoid: case OpKind::LeakyRelu:
    case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Gelu: case OpKind::Clip:
      return prepare_unary(n, inputs);
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
      return prepare_binary(n, inputs);
    case OpKind::Pow:
      return prepare_pow(n, inputs);
    case OpKind::Softmax: case OpKind::LogSoftmax:
      return prepare_softmax(n, inputs);
    case OpKind::LayerNormalization:
      return prepare_layer_norm(n, inputs);
    case OpKind::Transpose:
      return prepare_transpose(n, inputs);
    case OpKind::ReduceSum: case OpKind::ReduceMean:
      return prepare_reduce(n, inputs);
    case OpKind::Slice:
      return prepare_slice(n, inputs);
    case OpKind::Concat:
      return prepare_concat(n, inputs);
    case OpKind::Pad:
      return prepare_pad(n, inputs);
    case OpKind::Resize:
      return prepare_resize(n, inputs);
    case OpKind::TopK:
      return prepare_topk(n, inputs);
    case OpKind::DynamicQuantizeLinear:
      return prepare_dynamic_quantize(n, inputs);
    case OpKind::RNN: case OpKind::GRU: case OpKind::LSTM:
      return prepare_recurrent(n, inputs);
    case OpKind::TreeEnsemble:
      return prepare_tree_ensemble(n, inputs);
    default:
      return nullptr;
  }
}

}  // namespace cuvil::cpu
