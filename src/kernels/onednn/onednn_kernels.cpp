#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_ops.h"

#include <dnnl.hpp>

namespace cuvil::onednn {

std::unique_ptr<PreparedKernel> prepare_onednn_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                      const KernelOptions& options) {
  switch (n.op()) {
    case OpKind::Conv: case OpKind::FusedConv: case OpKind::MatMul: case OpKind::Gemm: case OpKind::FusedMatMul:
    case OpKind::MaxPool: case OpKind::AveragePool: case OpKind::GlobalAveragePool: case OpKind::GlobalMaxPool:
    case OpKind::Attention: case OpKind::ConvTranspose:
      break;
    default:
      return nullptr;
  }
  // oneDNN does not take empty tensors (it divides by dims); the reference kernels handle them.
  for (const PrepareInput& in : inputs)
    for (int64_t d : in.shape)
      if (in.present && d == 0) return nullptr;
  try {
    std::vector<std::vector<int64_t>> outs = infer_output_dims(n, inputs);
    for (const auto& dims : outs)
      for (int64_t d : dims)
        if (d == 0) return nullptr;
    const Dims& y = outs[0];
    switch (n.op()) {
      case OpKind::Conv:
      case OpKind::FusedConv: return prepare_conv(n, inputs, y, options);
      case OpKind::MatMul:
      case OpKind::Gemm:
      case OpKind::FusedMatMul: return prepare_matmul(n, inputs, y);
      case OpKind::Attention: return prepare_attention(n, inputs, y);
      case OpKind::ConvTranspose: return prepare_deconv(n, inputs, y);
      case OpKind::MaxPool:
      case OpKind::AveragePool:
      case OpKind::GlobalAveragePool:
      case OpKind::GlobalMaxPool: return prepare_pool(n, inputs, y);
      default: return nullptr;
    }
  } catch (const dnnl::error&) {
    return nullptr;  // oneDNN has no implementation for this case: the caller falls back to another kernel
  }
}

namespace {

// A bf16 kernel from `make` (node, inputs, output dims, reason), or null with the reason: empty tensors, no
// implementation in oneDNN.
template <class Make>
std::unique_ptr<PreparedKernel> prepare_bf16(const Node& n, const std::vector<PrepareInput>& inputs,
                                             std::string* reason, Make make) {
  for (const PrepareInput& in : inputs)
    for (int64_t d : in.shape)
      if (in.present && d == 0) {
        *reason = "empty tensor";
        return nullptr;
      }
  try {
    std::vector<std::vector<int64_t>> outs = infer_output_dims(n, inputs);
    for (int64_t d : outs[0])
      if (d == 0) {
        *reason = "empty tensor";
        return nullptr;
      }
    return make(n, inputs, outs[0], reason);
  } catch (const dnnl::error& e) {
    *reason = std::string("oneDNN: ") + e.what();
    return nullptr;
  }
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_onednn_bf16_matmul(const Node& n, const std::vector<PrepareInput>& inputs,
                                                           std::string* reason) {
  return prepare_bf16(n, inputs, reason, prepare_matmul_bf16);
}

std::unique_ptr<PreparedKernel> prepare_onednn_bf16_attention(const Node& n, const std::vector<PrepareInput>& inputs,
                                                              std::string* reason) {
  return prepare_bf16(n, inputs, reason, prepare_attention_bf16);
}

std::unique_ptr<PreparedKernel> prepare_shape_generic_onednn_kernel(const Node& n) {
  switch (n.op()) {
    case OpKind::MatMul: case OpKind::Gemm: case OpKind::FusedMatMul: break;
    default: return nullptr;
  }
  try {
    return prepare_shape_generic_matmul(n);
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace cuvil::onednn
