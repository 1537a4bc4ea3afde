// Kernel selection: generated code for fused element-wise groups (FusedKernel), Cuvil's GEMM for products with a
// constant B, oneDNN for convolutions, the other matrix products and pooling; the hand-written CPU kernels for what
// they cover; the reference kernels for everything else (and for everything when fast kernels are off).
#include "runtime/kernel_selection.h"

#include "codegen/generated_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/qdq_precision.h"
#include "kernels/ref/ref_kernels.h"
#include "runtime/bf16_boundary.h"
#include "runtime/u8_boundary.h"

#include <cstdlib>

namespace cuvil {

namespace {

bool is_product(OpKind op) { return op == OpKind::MatMul || op == OpKind::Gemm || op == OpKind::FusedMatMul; }

bool writes_graph_output(const Node& n) {
  for (const Value* o : n.graph()->outputs())
    for (const Value* v : n.outputs())
      if (o == v) return true;
  return false;
}

// "i64[3], f32[5, 3]": the types a kernel was asked for, for fallback reasons.
std::string input_types(const std::vector<PrepareInput>& inputs) {
  std::string s;
  for (const PrepareInput& in : inputs) {
    if (!s.empty()) s += ", ";
    if (!in.present) {
      s += "-";
      continue;
    }
    s += std::string(dtype_name(in.dtype)) + "[";
    for (size_t d = 0; d < in.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(in.shape[d]);
    s += "]";
  }
  return s;
}

// Why a node runs in f32 when a lower precision was asked and its kernel gave no reason of its own.
std::string why_f32(const Node& n, const KernelOptions& options) {
  if (!options.fast || options.reference_ops.count(n.op())) return "reference kernel";
  switch (n.op()) {
    case OpKind::Conv: case OpKind::FusedConv: case OpKind::MatMul: case OpKind::Gemm: case OpKind::FusedMatMul:
      return str_cat("no ", precision_name(options.precision), " kernel for this node");
    case OpKind::Attention: return "attention: no bf16 kernel for these inputs";
    // The block list: results that small relative errors in their inputs move a lot (exp, statistics, sums).
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNormalization:
    case OpKind::BatchNormalization: case OpKind::ReduceSum: case OpKind::ReduceMean:
    case OpKind::FusedKernel:
      return "numerically sensitive: f32";
    default: return "not a convolution or matrix product";
  }
}

// Whether n reads or writes strings (DType::str): no fast kernel knows that their elements are pointers.
bool moves_strings(const Node& n) {
  for (const Value* v : n.inputs())
    if (v && v->dtype() == DType::str) return true;
  for (const Value* v : n.outputs())
    if (v && v->dtype() == DType::str) return true;
  return false;
}

std::unique_ptr<PreparedKernel> prepare_f32_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                   const KernelOptions& options,
                                                   const std::shared_ptr<codegen::KernelCodeSource>& code) {
  std::string why;  // why the reference kernel runs, recorded as its fallback reason
  if (!options.fast) {
    why = "fast kernels are off (reference kernels only)";
  } else if (options.reference_ops.count(n.op())) {
    why = str_cat("KernelOptions::reference_ops holds ", op_name(n.op()));
  } else if (moves_strings(n)) {
    why = "strings: only the reference kernels take them";
  } else {
    if (auto k = codegen::prepare_generated_kernel(n, inputs, options, code, &why)) return k;
    std::string integer_why;  // ONNX's integer ops (ConvInteger, QLinearConv, ...): why not on u8 x s8 kernels
    if (auto k = onednn::prepare_onednn_integer_kernel(n, inputs, &integer_why)) return k;
    if (options.cpu_gemm)
      if (auto k = cpu::prepare_matmul(n, inputs)) return k;
    if (auto k = onednn::prepare_onednn_kernel(n, inputs, options)) return k;
    if (auto k = cpu::prepare_cpu_kernel(n, inputs)) return k;
    if (n.op() == OpKind::FusedKernel) why = "generated code: " + why + "; the body runs op by op";
    else if (!integer_why.empty()) why = "integer kernel: " + integer_why;
    else why = str_cat("no fast kernel covers ", op_name(n.op()), " at ", input_types(inputs));
  }
  auto k = wrap_kernel(ref_kernel(n.op()), "ref:" + std::string(op_name(n.op())));
  k->set_fallback(std::move(why));
  return k;
}

// The node's own precision (its `precision` attribute: cuvil.quantize's fallback, precision="auto") where it is
// higher than the executor's; the executor's otherwise. `reason` gets the node's reason for it. One exception
// lowers: a QDQ model's own int8 layer (node precision int8 with kQdqReason, set by fold-quantize-dequantize) runs
// int8 at fp32 too (the model asks for int8 there: not a silent lowering, and its reason says so; precision
// "fp32" asked explicitly marks such nodes fp32 instead: runtime/calibration.h's keep_model_int8_in_f32). At bf16
// the executor's precision stands (bf16 asked explicitly).
Precision node_precision(const Node& n, const KernelOptions& options, std::string* reason) {
  Precision asked = options.precision;
  if (!n.has_attr("precision") || n.attr("precision").s().empty()) return asked;
  const std::string& why = n.has_attr("precision_reason") ? n.attr("precision_reason").s() : "";
  if (asked == Precision::fp32) {
    if (n.attr("precision").s() == "fp32" && why == kQdqF32Reason) *reason = why;  // (shown: fp32 asked)
    if (n.attr("precision").s() != "int8" || why != kQdqReason) return asked;
    *reason = why;
    return Precision::int8;
  }
  Precision own = parse_precision(n.attr("precision").s());
  auto rank = [](Precision p) { return p == Precision::fp32 ? 2 : p == Precision::bf16 ? 1 : 0; };
  if (rank(own) <= rank(asked)) return asked;
  *reason = why;
  if (reason->empty()) *reason = str_cat("node precision ", precision_name(own));
  return own;
}

// prepare_kernel at `options.precision`.
std::unique_ptr<PreparedKernel> prepare_kernel_at(const Node& n, const std::vector<PrepareInput>& inputs,
                                                  const KernelOptions& options,
                                                  const std::shared_ptr<codegen::KernelCodeSource>& code) {
  std::string reason;
  if (options.precision == Precision::int8 && options.fast && !options.reference_ops.count(n.op()) &&
      (n.op() == OpKind::FusedConv || is_product(n.op()))) {
    // Calibrated nodes (quantization hints set by cuvil.quantize or an ONNX QDQ model) multiply u8 x s8. The
    // final layer (the logits) too: its kernel dequantizes into an f32 output, so the output keeps f32 precision
    // (lower_final_outputs is about output precision, which int8 never lowers; OpenVINO quantizes it as well).
    if (auto k = onednn::prepare_onednn_int8_kernel(n, inputs, &reason)) {
      if (writes_graph_output(n)) k->precision.reason = "final output: u8 x s8 product, f32 output";
      return k;
    }
  }
  if (options.precision == Precision::bf16 && options.fast && !options.reference_ops.count(n.op()) &&
      is_product(n.op())) {
    // Before Cuvil's f32 GEMM: oneDNN's bf16 product (2x the f32 rate where the CPU has bf16 dot products).
    if (!options.lower_final_outputs && writes_graph_output(n)) reason = "final output stays f32";
    else if (auto k = onednn::prepare_onednn_bf16_matmul(n, inputs, &reason)) return k;
  }
  if ((options.precision == Precision::bf16 || options.precision == Precision::int8) && options.fast &&
      !options.reference_ops.count(n.op()) && n.op() == OpKind::Attention && !has_bf16_link(n, inputs)) {
    // Both products in bf16, the Softmax f32 (kernels/onednn/attention.cpp); else the f32 kernel with the reason.
    // At int8 too: its products multiply two activations (no constant weights to quantize), so bf16 is as low
    // as they go (BERT-base int8 kept its 12 attentions f32 before). CUVIL_BF16_ATTENTION=0 keeps f32
    // (comparisons).
    const char* env = std::getenv("CUVIL_BF16_ATTENTION");
    if (env && std::string(env) == "0") reason = "attention: CUVIL_BF16_ATTENTION=0";
    else if (auto k = onednn::prepare_onednn_bf16_attention(n, inputs, &reason)) return k;
  }
  if (options.precision == Precision::bf16 && options.fast && n.op() == OpKind::Cast)
    if (auto k = onednn::prepare_bf16_convert(n, inputs)) return k;  // a shared source conversion (bf16 links)
  if (has_bf16_link(n, inputs)) {
    // A linked bf16 activation (runtime/bf16_links.h): the bf16 convolution takes it as it is; where bf16 does
    // not take the node after all, its f32 kernel runs between conversions.
    if (options.fast && !options.reference_ops.count(n.op())) {
      std::string why;
      auto k = is_product(n.op()) ? onednn::prepare_onednn_bf16_matmul(n, inputs, &why)
                                  : onednn::prepare_onednn_kernel(n, inputs, options);
      if (k && k->precision.precision == Precision::bf16) return k;
    }
    std::unique_ptr<PreparedKernel> k = prepare_f32_kernel(n, bf16_f32_view(inputs), options, code);
    if (k->precision.reason.empty()) k->precision.reason = why_f32(n, options);
    return wrap_bf16_boundary(n, std::move(k));
  }
  // A linked u8 activation (runtime/int8_links.h) where int8 did not take the node: f32 between conversions.
  bool u8_link = has_u8_link(n, inputs);
  std::unique_ptr<PreparedKernel> k = prepare_f32_kernel(n, u8_link ? f32_view(n, inputs) : inputs, options, code);
  if (options.precision != Precision::fp32 && k->precision.precision == Precision::fp32 &&
      k->precision.reason.empty())
    k->precision.reason = reason.empty() ? why_f32(n, options) : reason;
  if (u8_link) return wrap_u8_boundary(n, inputs, std::move(k));
  return k;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                               const KernelOptions& options,
                                               const std::shared_ptr<codegen::KernelCodeSource>& code) {
  std::string node_reason;
  Precision p = node_precision(n, options, &node_reason);
  if (p == options.precision && node_reason.empty()) return prepare_kernel_at(n, inputs, options, code);
  KernelOptions own = options;
  own.precision = p;
  std::unique_ptr<PreparedKernel> k = prepare_kernel_at(n, inputs, own, code);
  // raised by the node's own precision: its reason first (the kernel's, if any, after it)
  std::string& r = k->precision.reason;
  r = r.empty() ? node_reason : node_reason + "; " + r;
  return k;
}

std::unique_ptr<PreparedKernel> prepare_shape_generic_kernel(const Node& n, const KernelOptions& options) {
  if (!options.fast || !options.shape_generic || options.reference_ops.count(n.op()) || moves_strings(n))
    return nullptr;
  // u8 links are prepared per shape (by prepare_kernel)
  std::vector<PrepareInput> types;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    types.push_back(PrepareInput{n.input(i) ? n.input(i)->dtype() : DType::f32, {}, nullptr, n.input(i) != nullptr});
  if (has_u8_link(n, types)) return nullptr;
  // bf16 and int8 products are prepared per shape (prepare_kernel), the shape-generic kernels are f32.
  std::string own_reason;
  if (node_precision(n, options, &own_reason) != Precision::fp32 && is_product(n.op())) return nullptr;
  if (options.cpu_gemm)
    if (auto k = cpu::prepare_shape_generic_matmul(n)) return k;
  return onednn::prepare_shape_generic_onednn_kernel(n);
}

}  // namespace cuvil
