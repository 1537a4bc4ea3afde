// Graph ops -> kernel IR. Each op's formula follows its reference kernel (src/kernels/ref) evaluated in f32; where
// the reference computes in double (LayerNormalization, the Softmax family, reductions, the channel
// normalizations) the generated kernel computes in f32 with the fixed reduction order of kernel_ir.h, except the
// few functions the emitter evaluates in f64 (sin, cos, tan, atan, pow) and float products (ReduceProd, in f64 as
// the reference's). f16/bf16 values compute in f32 and round wherever the graph stores one. f64 tensors compute in
// f64, for the ops whose lowering is arithmetic or calls the C library's functions (f64_capable).
#include "codegen/lower.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ir/op_schema.h"
#include "ir/ops/transpose.h"
#include "ir/shape_inference.h"

namespace cuvil::codegen {

namespace {

// The floats generated kernels compute on (f16 and bf16 in f32, rounded where the graph stores them; f64 in f64).
bool floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64; }
// Integers held in i32 (i8, u8, i16, u16) or i64 (u32) keep the value the narrow type stores: each op's result
// wraps back into it (wrap_s/wrap_u) as the reference's store does. u64 computes as itself (Scalar::u64).
bool integer(DType t) { return is_integer(t); }
bool narrow_int(DType t) { return integer(t) && t != DType::i32 && t != DType::i64 && t != DType::u64; }
bool numeric(DType t) { return floating(t) || integer(t); }

// The ops generated for f64 tensors: those whose lowering is arithmetic, comparisons and selects only, the math
// functions that call the C library for f64 (exp, log, tanh, erf, sin, cos, tan, atan, pow, fmod, expm1 for Elu
// and Celu, the hyperbolic and inverse trigonometric functions: the reference's own results), and the composites
// of those whose formulas hold no f32-specific cut-off (Sigmoid, Softplus with its cancellation-free log1p, Gelu,
// Selu, the Softmax family, ReduceLogSum/LogSumExp).
bool f64_capable(OpKind op) {
  switch (op) {
    case OpKind::Abs: case OpKind::Neg: case OpKind::Relu: case OpKind::Sign: case OpKind::Add: case OpKind::Sub:
    case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min: case OpKind::Clip: case OpKind::Sum:
    case OpKind::Mean: case OpKind::Less: case OpKind::LessOrEqual: case OpKind::Greater:
    case OpKind::GreaterOrEqual: case OpKind::Equal: case OpKind::Where: case OpKind::Cast: case OpKind::Identity:
    case OpKind::Sqrt: case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Reciprocal:
    case OpKind::IsNaN: case OpKind::IsInf: case OpKind::LeakyRelu: case OpKind::ThresholdedRelu:
    case OpKind::Shrink: case OpKind::PRelu: case OpKind::HardSigmoid: case OpKind::HardSwish:
    case OpKind::Softsign: case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax:
    case OpKind::ReduceMin: case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2:
    case OpKind::ReduceSumSquare: case OpKind::ArgMax: case OpKind::ArgMin: case OpKind::Hardmax:
    case OpKind::LayerNormalization: case OpKind::InstanceNormalization: case OpKind::MeanVarianceNormalization:
    case OpKind::Transpose: case OpKind::Exp: case OpKind::Log: case OpKind::Tanh: case OpKind::Erf:
    case OpKind::Sin: case OpKind::Cos: case OpKind::Tan: case OpKind::Atan: case OpKind::Pow: case OpKind::Mod:
    case OpKind::Sigmoid: case OpKind::Softplus: case OpKind::Gelu: case OpKind::Softmax: case OpKind::LogSoftmax:
    case OpKind::ReduceLogSum: case OpKind::ReduceLogSumExp: case OpKind::Elu: case OpKind::Celu:
    case OpKind::Selu: case OpKind::Sinh: case OpKind::Cosh: case OpKind::Asin: case OpKind::Acos:
    case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh: case OpKind::CumSum: case OpKind::LRN:
    case OpKind::TopK: case OpKind::NegativeLogLikelihoodLoss: case OpKind::QuantizeLinear: case OpKind::Expand:
      return true;
    default: return false;
  }
}

template <class... Args>
bool refuse(std::string* why, const Args&... args) {
  if (why) *why = str_cat(args...);
  return false;
}

// The value of a one-element tensor as a kernel immediate (a double): nullopt for an integer beyond what a double
// holds exactly (2^53 and up, unless representable), which the kernel cannot carry.
constexpr double kTwo63 = 9223372036854775808.0;
std::optional<double> immediate_i64(int64_t v) {
  double d = double(v);
  if (d < kTwo63 && int64_t(d) == v) return d;
  return std::nullopt;
}
std::optional<double> immediate(const Tensor& t) {
  if (is_float(t.dtype())) return t.get_f64(0);
  if (t.dtype() == DType::u64) {
    uint64_t v = t.data<uint64_t>()[0];
    double d = double(v);
    if (d < 2 * kTwo63 && uint64_t(d) == v) return d;
    return std::nullopt;
  }
  return immediate_i64(t.get_i64(0));
}

// The constant scalar value of input i, when it has one a kernel immediate holds.
std::optional<double> scalar_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  return immediate(v->constant());
}

// Axes counted from the back where negative, sorted and distinct; nullopt when one is out of range.
std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& x : axes) {
    if (x < -rank || x >= rank) return std::nullopt;
    if (x < 0) x += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// The constant axes of a Reduce node, normalized and sorted; nullopt when not constant. Absent axes: all.
std::optional<std::vector<int64_t>> reduce_axes(const Node& n, int64_t rank) {
  if (n.op() == OpKind::MeanVarianceNormalization) return normalized_axes(AttrReader(n).ints("axes"), rank);
  std::vector<int64_t> axes;
  const Value* a = n.input(1);
  if (a) {
    if (!a->is_constant()) return std::nullopt;
    const Tensor& t = a->constant();
    for (int64_t i = 0; i < t.numel(); ++i) axes.push_back(t.get_i64(i));
  }
  if (axes.empty()) {
    if (AttrReader(n).i("noop_with_empty_axes")) return std::nullopt;  // identity: nothing to generate
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  return normalized_axes(std::move(axes), rank);
}

int64_t input_rank(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->shape().rank_known() ? int64_t(v->shape().rank()) : -1;
}

// The dim of input 0 along which input i of n holds one value per position, whatever its own rank:
// InstanceNormalization's scale and B, BatchNormalization's scale, B, mean and var, NegativeLogLikelihoodLoss's
// class weights (all along dim 1, the channels), a per-axis scale and zero point of (De)QuantizeLinear (along
// `axis`; a per-tensor one, of rank 0, broadcasts as it is). nullopt for other inputs.
std::optional<int64_t> param_axis(const Node& n, size_t i) {
  switch (n.op()) {
    case OpKind::InstanceNormalization: return i == 1 || i == 2 ? std::optional<int64_t>(1) : std::nullopt;
    case OpKind::BatchNormalization: return i >= 1 && i <= 4 ? std::optional<int64_t>(1) : std::nullopt;
    case OpKind::NegativeLogLikelihoodLoss: return i == 2 ? std::optional<int64_t>(1) : std::nullopt;
    case OpKind::QuantizeLinear:
    case OpKind::DequantizeLinear: {
      if ((i != 1 && i != 2) || !n.input(i) || !n.input(i)->shape().rank_known() || n.input(i)->shape().rank() != 1)
        return std::nullopt;
      int64_t r = input_rank(n, 0);
      auto axis = r > 0 ? normalized_axes({AttrReader(n).i("axis")}, r) : std::nullopt;
      return axis ? std::optional<int64_t>(axis->front()) : std::nullopt;
    }
    default: return std::nullopt;
  }
}
bool channel_param(const Node& n, size_t i) { return param_axis(n, i).has_value(); }

// Inputs of n holding one value per row, in the shape of the space without the reduced dims:
// NegativeLogLikelihoodLoss's targets ([N, d1, ...] against the input's [N, C, d1, ...]).
bool row_param(const Node& n, size_t i) { return n.op() == OpKind::NegativeLogLikelihoodLoss && i == 1; }

// The ops whose result holds one value per row (with or without the reduced dims: keepdims).
bool reduces_to_rows(OpKind op) { return is_reduce_op(op) || op == OpKind::ArgMax || op == OpKind::ArgMin; }
// Whether output o of n holds one value per row: a reduction's, LayerNormalization's Mean and InvStdDev, a loss.
bool row_result(const Node& n, size_t o) {
  return reduces_to_rows(n.op()) || (n.op() == OpKind::LayerNormalization && o > 0) ||
         n.op() == OpKind::NegativeLogLikelihoodLoss;
}
// Whether n's results drop the reduced dims (no place in the full space): reductions without keepdims, losses.
bool drops_reduced_dims(const Node& n) {
  if (n.op() == OpKind::NegativeLogLikelihoodLoss) return true;
  return reduces_to_rows(n.op()) && AttrReader(n).i("keepdims") == 0;
}

// The ignored target of a loss (ignore_index), when it has one.
std::optional<int64_t> ignored_target(const Node& n) {
  AttrReader at(n);
  if (!at.has("ignore_index")) return std::nullopt;
  return at.i("ignore_index");
}

}  // namespace

bool storable_dtype(DType t) { return numeric(t) || t == DType::boolean; }

bool is_reduce_op(OpKind op) {
  switch (op) {
    case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2: case OpKind::ReduceSumSquare:
    case OpKind::ReduceLogSum: case OpKind::ReduceLogSumExp:
      return true;
    default: return false;
  }
}

std::optional<std::vector<int64_t>> reduced_axes(const Node& n) {
  int64_t r = input_rank(n, 0);
  if (r < 0 || !(is_reduce_op(n.op()) || n.op() == OpKind::MeanVarianceNormalization)) return std::nullopt;
  return reduce_axes(n, r);
}

bool is_axes_input(const Node& n, size_t i) {
  return i == 1 && (is_reduce_op(n.op()) || n.op() == OpKind::CumSum || n.op() == OpKind::TopK ||
                    n.op() == OpKind::Expand);
}

bool is_integer_divisor(const Node& n, size_t i) {
  if (!n.input(0) || !integer(n.input(0)->dtype())) return false;
  if (n.op() == OpKind::Div || n.op() == OpKind::Mod) return i == 1 && !scalar_input(n, 1);
  if (n.op() == OpKind::Pow && i == 0 && !scalar_input(n, 0) && !floating(n.input(1)->dtype())) {
    auto e = scalar_input(n, 1);  // x^-k = 1 / x^k
    return e && *e < 0;
  }
  return false;
}

bool is_signed_exponent(const Node& n, size_t i) {
  if (n.op() != OpKind::Pow || i != 1 || !n.input(0) || !integer(n.input(0)->dtype()) || scalar_input(n, 1))
    return false;
  DType e = n.input(1)->dtype();
  return integer(e) && is_signed(e);
}

bool must_be_kernel_input(const Node& n, size_t i) {
  return (n.op() == OpKind::Transpose && i == 0) || (n.op() == OpKind::LRN && i == 0) || channel_param(n, i) ||
         row_param(n, i) || is_integer_divisor(n, i) || is_signed_exponent(n, i);
}

namespace {

std::vector<int64_t> without_ones(std::vector<int64_t> dims) {
  std::erase(dims, int64_t(1));
  return dims;
}

// The block sorted, distinct axes form; nullopt when there are none or they are not consecutive.
std::optional<ReducedBlock> block_of(const std::vector<int64_t>& axes, int64_t rank) {
  if (axes.empty()) return std::nullopt;
  for (size_t j = 1; j < axes.size(); ++j)
    if (axes[j] != axes[j - 1] + 1) return std::nullopt;
  return ReducedBlock{int(axes.size()), int(rank - 1 - axes.back())};
}

// The block the axes form once those of static size 1 in n's input are dropped: they reduce nothing (the default
// [0, 2, 3] of MeanVarianceNormalization, or PyTorch's mean over (0, 2, 3), at batch 1 is the block [2, 3]).
std::optional<ReducedBlock> block_of_sized(std::vector<int64_t> axes, const Node& n, int64_t rank) {
  const std::vector<Dim>& x = n.input(0)->shape().dims();
  std::erase_if(axes, [&](int64_t a) { return x[size_t(a)] == Dim(1); });
  return block_of(axes, rank);
}

}  // namespace

std::optional<ReducedBlock> reduced_block(const Node& n) {
  int64_t r = input_rank(n, 0);
  if (r < 0) return std::nullopt;
  AttrReader at(n);
  switch (n.op()) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::Hardmax:
    case OpKind::ArgMax:
    case OpKind::ArgMin:
    case OpKind::TopK: {
      auto axis = normalized_axes({at.i("axis")}, r);
      if (!axis) return std::nullopt;
      auto kind = n.op() == OpKind::TopK ? ReducedBlock::Kind::select : ReducedBlock::Kind::reduce;
      return ReducedBlock{1, int(r - 1 - axis->front()), kind};
    }
    case OpKind::LayerNormalization: {
      int64_t axis = at.i("axis");
      if (axis < 0) axis += r;
      if (axis < 0 || axis >= r) return std::nullopt;
      return ReducedBlock{int(r - axis), 0};
    }
    case OpKind::InstanceNormalization:  // over the spatial dims, after N and C
      if (r < 3) return std::nullopt;
      return ReducedBlock{int(r - 2), 0};
    case OpKind::MeanVarianceNormalization: {
      auto axes = reduced_axes(n);
      return axes ? block_of_sized(*axes, n, r) : std::nullopt;
    }
    case OpKind::LRN:  // a window over the channels (dim 1); of one channel: element-wise
      if (r < 2) return std::nullopt;
      if (at.i("size") == 1 || n.input(0)->shape()[1] == Dim(1)) return ReducedBlock{};
      return ReducedBlock{1, int(r - 2), ReducedBlock::Kind::window};
    case OpKind::NegativeLogLikelihoodLoss:  // a pick from each row of classes (dim 1)
      if (r < 2) return std::nullopt;
      return ReducedBlock{1, int(r - 2)};
    case OpKind::CumSum: {
      auto a = scalar_input(n, 1);
      auto axis = a && *a == std::floor(*a) ? normalized_axes({int64_t(*a)}, r) : std::nullopt;
      if (!axis) return std::nullopt;
      return ReducedBlock{1, int(r - 1 - axis->front()),
                          at.i("reverse") != 0 ? ReducedBlock::Kind::reverse_scan : ReducedBlock::Kind::scan};
    }
    default: {
      if (!is_reduce_op(n.op())) return ReducedBlock{};
      auto axes = reduced_axes(n);
      if (!axes) return std::nullopt;
      if (auto block = block_of(*axes, r)) return block;
      return block_of_sized(*axes, n, r);
    }
  }
}

bool can_generate(const Node& n, std::string* why) {
  if (!n.regions().empty()) return refuse(why, "it holds regions");
  for (const Value* v : n.inputs())
    if (v && !storable_dtype(v->dtype())) return refuse(why, "input dtype ", dtype_name(v->dtype()), " is not generated");
  for (const Value* v : n.outputs()) {
    if (!storable_dtype(v->dtype())) return refuse(why, "output dtype ", dtype_name(v->dtype()), " is not generated");
    if (!v->shape().rank_known()) return refuse(why, "output rank is unknown");
  }
  DType t0 = n.input(0) ? n.input(0)->dtype() : DType::f32;
  // (f64 -> f16/bf16 goes through f32, as the reference's conversions do: the same two roundings.)
  bool any_f64 = false;
  for (const Value* v : n.inputs()) any_f64 = any_f64 || (v && v->dtype() == DType::f64);
  for (const Value* v : n.outputs()) any_f64 = any_f64 || v->dtype() == DType::f64;
  if (any_f64 && !f64_capable(n.op())) return refuse(why, "not generated for f64 (its math is f32 only)");
  auto all_inputs = [&](auto pred) {
    for (const Value* v : n.inputs())
      if (v && !pred(v->dtype())) return false;
    return true;
  };
  bool float_only = all_inputs(floating);
  switch (n.op()) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt: case OpKind::Tanh: case OpKind::Erf:
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Reciprocal: case OpKind::Sigmoid:
    case OpKind::Softplus: case OpKind::Softsign: case OpKind::HardSigmoid: case OpKind::HardSwish:
    case OpKind::Gelu: case OpKind::LeakyRelu: case OpKind::IsNaN: case OpKind::IsInf:
    case OpKind::Sum: case OpKind::Mean: case OpKind::Elu: case OpKind::Celu: case OpKind::Selu:
    case OpKind::ThresholdedRelu: case OpKind::Shrink: case OpKind::PRelu: case OpKind::Sin: case OpKind::Cos:
    case OpKind::Tan: case OpKind::Asin: case OpKind::Acos: case OpKind::Atan: case OpKind::Sinh: case OpKind::Cosh:
    case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh:
      return float_only || refuse(why, "generated only for floats");
    case OpKind::Abs: case OpKind::Neg: case OpKind::Relu: case OpKind::Sign: case OpKind::Add: case OpKind::Sub:
    case OpKind::Mul: case OpKind::Max: case OpKind::Min: case OpKind::Clip: case OpKind::Less:
    case OpKind::LessOrEqual: case OpKind::Greater: case OpKind::GreaterOrEqual:
      return all_inputs(numeric) || refuse(why, "generated only for numbers");
    case OpKind::BitShift: {  // unsigned by the schema
      AttrReader at(n);
      bool dir = at.has("direction") && (at.s("direction") == "LEFT" || at.s("direction") == "RIGHT");
      return dir || refuse(why, "the direction is not LEFT or RIGHT");  // the reference reports it
    }
    case OpKind::Equal: return true;
    case OpKind::And: case OpKind::Or: case OpKind::Xor: case OpKind::Not: return true;  // bool by the schema
    case OpKind::Where: case OpKind::Cast: case OpKind::Identity: return true;
    case OpKind::Expand:  // a broadcast of its input to a shape known at compile time
      return (n.input(1) && n.input(1)->is_constant()) || refuse(why, "the shape is not a constant");
    case OpKind::QuantizeLinear:  // (the schema's dtypes: f32, f16, bf16, f64 or i32 to u8 or i8)
    case OpKind::DequantizeLinear:  // (u8, i8 or i32 to f32)
      for (size_t i : {size_t(1), size_t(2)}) {
        const Value* p = n.num_inputs() > i ? n.input(i) : nullptr;
        if (p && (!p->shape().rank_known() || p->shape().rank() > 1))
          return refuse(why, "a scale or zero point of rank above 1");
        if (p && p->shape().rank() == 1 && !param_axis(n, i)) return refuse(why, "the axis is out of range");
      }
      return true;
    case OpKind::Dropout: {  // the identity, and a mask of trues, unless training with a ratio above 0 (random)
      auto training = scalar_input(n, 2), ratio = scalar_input(n, 1);
      bool identity = !n.input(2) || (training && *training == 0) || (ratio && *ratio == 0);
      return identity || refuse(why, "training-mode dropout is random");
    }
    case OpKind::MeanVarianceNormalization:
      if (!float_only) return refuse(why, "generated only for floats");
      return reduced_block(n).has_value() || refuse(why, "the axes (less those of size 1) are not one block");
    case OpKind::InstanceNormalization:  // per-channel parameters read along dim 1 (channel views)
      if (!float_only) return refuse(why, "generated only for floats");
      return input_rank(n, 0) >= 3 || refuse(why, "input rank below 3 (nothing to normalize over)");
    case OpKind::BatchNormalization:
      if (!float_only) return refuse(why, "generated only for floats");
      if (AttrReader(n).i("training_mode") != 0 || n.num_outputs() != 1)
        return refuse(why, "training mode (batch statistics) is not generated");
      return input_rank(n, 0) >= 2 || refuse(why, "rank-1 input");
    case OpKind::Transpose:  // a strided read of a kernel input (lower_body refuses one of a computed value)
      return transpose_perm(n, input_rank(n, 0)).has_value() || refuse(why, "the permutation is not valid");
    case OpKind::Div:
    case OpKind::Mod: {
      // Float Mod is C's fmod, which ONNX allows only with fmod=1 (the reference reports the rest). Integers by a
      // constant nonzero scalar, or by a tensor the kernel reads as an input (lower_body), which is checked for
      // zeros before the kernel runs: the reference reports a zero divisor, which a kernel cannot.
      if (float_only)
        return n.op() == OpKind::Div || AttrReader(n).i("fmod") != 0 || refuse(why, "floating-point Mod needs fmod=1");
      if (!all_inputs(integer)) return refuse(why, "generated for floats and integers");
      auto d = scalar_input(n, 1);
      return !(d && *d == 0) || refuse(why, "division by the constant 0");
    }
    case OpKind::Pow: {
      // Float bases: any exponent. Integer bases (i32, i64): a float exponent, a constant integer one, or an
      // integer exponent tensor. 0 to a negative power is an error the reference reports: the kernel checks a
      // signed exponent tensor for negative values (is_signed_exponent), and the base of a negative constant
      // exponent for zeros (is_integer_divisor: x^-k = 1 / x^k), before it runs.
      if (floating(t0)) return true;
      if (t0 != DType::i32 && t0 != DType::i64) return refuse(why, "base dtype ", dtype_name(t0), " is not generated");
      auto e = scalar_input(n, 1);
      if (e && !floating(n.input(1)->dtype()) && *e < 0 && scalar_input(n, 0) && *scalar_input(n, 0) == 0)
        return refuse(why, "0 to a negative power");  // (the reference reports it)
      return true;
    }
    case OpKind::ArgMax: case OpKind::ArgMin:
      if (!numeric(t0)) return refuse(why, "dtype ", dtype_name(t0), " is not generated");
      return reduced_block(n).has_value() || refuse(why, "the axis is not known");
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::Hardmax:
      if (!float_only) return refuse(why, "generated only for floats");
      return reduced_block(n).has_value() || refuse(why, "the axis is not known");
    case OpKind::LRN:
      if (!float_only) return refuse(why, "generated only for floats");
      if (AttrReader(n).i("size") <= 0) return refuse(why, "size is not positive");  // the reference reports it
      return reduced_block(n).has_value() || refuse(why, "input rank below 2");
    case OpKind::TopK: {  // K pairs per lane live in registers: small K only (larger ones sort op by op)
      auto k = scalar_input(n, 1);
      if (!k || *k < 1 || *k > kMaxGeneratedTopK) return refuse(why, "K is not a constant from 1 to ", kMaxGeneratedTopK);
      if (!numeric(t0)) return refuse(why, "dtype ", dtype_name(t0), " is not generated");
      return reduced_block(n).has_value() || refuse(why, "the axis is out of range");
    }
    case OpKind::CumSum:  // (the schema's types: numbers)
      if (!n.input(1) || !n.input(1)->is_constant() || is_float(n.input(1)->dtype()))
        return refuse(why, "the axis is not a constant integer");
      return reduced_block(n).has_value() || refuse(why, "the axis is out of range");  // the reference reports it
    case OpKind::LayerNormalization:
      if (!float_only) return refuse(why, "generated only for floats");
      return reduced_block(n).has_value() || refuse(why, "the normalized axes are not known");
    case OpKind::NegativeLogLikelihoodLoss: {
      // The loss per element; sums and means over them are a second reduction, which decompose-ops writes
      // out as its own node. (Input dtypes: the schema's.)
      const std::string& red = AttrReader(n).s("reduction");
      if (red != "none") return refuse(why, "reduction '", red, "' is not generated (decompose-ops writes it out)");
      auto ignore = ignored_target(n);
      if (ignore && !immediate_i64(*ignore)) return refuse(why, "ignore_index ", *ignore, " is no kernel immediate");
      return reduced_block(n).has_value() || refuse(why, "input rank below 2");
    }
    case OpKind::ReduceSum: case OpKind::ReduceMean: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2: case OpKind::ReduceSumSquare:
    case OpKind::ReduceLogSum: case OpKind::ReduceLogSumExp: {
      // Integer sums, products and extremes wrap or compare exactly, as the reference's do; the rest need floats.
      bool any_numeric = n.op() == OpKind::ReduceSum || n.op() == OpKind::ReduceMax || n.op() == OpKind::ReduceMin ||
                         n.op() == OpKind::ReduceProd || n.op() == OpKind::ReduceL1 || n.op() == OpKind::ReduceSumSquare;
      if (!(any_numeric ? numeric(t0) : floating(t0)))
        return refuse(why, "dtype ", dtype_name(t0), " is not generated for this reduction");
      return reduced_block(n).has_value() || refuse(why, "only reductions over one block of constant axes are generated");
    }
    default: return refuse(why, "no generated form");
  }
}

namespace {

// Builds the expression DAG of one body.
class Lowering {
 public:
  Kernel k;

  int add(Op op, Scalar t, int a = -1, int b = -1, int c = -1, double imm = 0) {
    Expr e;
    e.op = op;
    e.type = t;
    e.a = a, e.b = b, e.c = c, e.imm = imm;
    k.exprs.push_back(e);
    return int(k.exprs.size()) - 1;
  }
  Scalar type(int e) const { return k.exprs[size_t(e)].type; }
  int cst(double v, Scalar t = Scalar::f32) { return add(Op::constant, t, -1, -1, -1, v); }
  // An f64 value meets the f32 constants and row sizes the op lowerings write: those become f64 (a constant
  // keeps its exact value). Anything else of another type is the caller's to cast.
  int widen(int e, Scalar t) {
    if (t != Scalar::f64 || type(e) != Scalar::f32) return e;
    const Expr x = k.exprs[size_t(e)];
    if (x.op == Op::constant) return cst(x.imm, t);
    if (x.op == Op::row_size) return add(Op::row_size, t);
    return e;
  }
  Scalar common(int a, int b) const { return type(a) == Scalar::f64 || type(b) == Scalar::f64 ? Scalar::f64 : type(a); }
  int bin(Op op, int a, int b) {
    Scalar t = common(a, b);
    return add(op, t, widen(a, t), widen(b, t));
  }
  int cmp(Op op, int a, int b) {
    Scalar t = common(a, b);
    return add(op, Scalar::i1, widen(a, t), widen(b, t));
  }
  int un(Op op, int a) { return add(op, type(a), a); }
  int sel(int c, int a, int b) {
    Scalar t = common(a, b);
    return add(Op::select, t, c, widen(a, t), widen(b, t));
  }
  int cast(int a, Scalar t) { return type(a) == t ? a : add(Op::cast, t, a); }
  // clamp to [0, 1] keeping NaN (the reference's clamp01)
  int clamp01(int v) {
    v = sel(cmp(Op::lt, v, cst(0)), cst(0), v);
    return sel(cmp(Op::gt, v, cst(1)), cst(1), v);
  }
  // e^x - 1 without cancellation near 0: the Taylor series to x^9/9! for |x| < 0.5 (truncation < 3e-10
  // relative), else exp(x) - 1. f64: the C library's expm1.
  int expm1(int x) {
    if (type(x) == Scalar::f64) return un(Op::expm1, x);
    int p = cst(1.0 / 362880);
    for (double c : {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0})
      p = bin(Op::add, bin(Op::mul, p, x), cst(c));
    int small = bin(Op::mul, p, x);
    int large = bin(Op::sub, un(Op::exp, x), cst(1));
    return sel(cmp(Op::lt, un(Op::abs, x), cst(0.5)), small, large);
  }
  // log(1 + t) for t >= 0 without losing small t: log(u) * t / (u - 1) with u = 1 + t (exact where u == 1).
  int log1p(int t) {
    int u = bin(Op::add, cst(1), t);
    int general = bin(Op::div, bin(Op::mul, un(Op::log, u), t), bin(Op::sub, u, cst(1)));
    return sel(cmp(Op::eq, u, cst(1)), t, general);
  }
  // Odd functions built on |x|: sign(x) * f(|x|), keeping -0 and NaN (f(NaN) is NaN).
  int odd(int x, int f_of_abs) {
    return sel(cmp(Op::lt, x, cst(0)), un(Op::neg, f_of_abs), sel(cmp(Op::eq, x, cst(0)), x, f_of_abs));
  }
  // The mean over the row, x - mean and the variance (the mean of the squares of that): the normalizations'
  // statistics.
  struct Moments {
    int mean, centred, variance;
  };
  Moments moments(int x) {
    int count = add(Op::row_size, type(x));
    int mean = bin(Op::div, add(Op::row_sum, type(x), x), count);
    int d = bin(Op::sub, x, mean);
    return {mean, d, bin(Op::div, add(Op::row_sum, type(x), bin(Op::mul, d, d)), count)};
  }
  // e^|x| / 2 for |x| > 20 without overflowing before the result does: (e^(|x|/2))^2 / 2.
  int half_exp_large(int a) {
    int t = un(Op::exp, bin(Op::mul, a, cst(0.5)));
    return bin(Op::mul, t, bin(Op::mul, t, cst(0.5)));
  }
  int nan_max(int a, int b) { return bin(Op::max, a, b); }
  int nan_min(int a, int b) { return bin(Op::min, a, b); }
};

// Shapes: right-aligned broadcast of `a` and `b`; false when they do not broadcast.
bool broadcast_into(std::vector<int64_t>& acc, const std::vector<int64_t>& s) {
  if (s.size() > acc.size()) acc.insert(acc.begin(), s.size() - acc.size(), 1);
  size_t off = acc.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t& d = acc[off + i];
    if (s[i] == d || s[i] == 1) continue;
    if (d != 1) return false;
    d = s[i];
  }
  return true;
}

// Strides (elements) of a contiguous tensor of `shape` placed right-aligned over `space`; 0 along broadcast dims.
std::vector<int64_t> strides_over(const std::vector<int64_t>& shape, const std::vector<int64_t>& space) {
  std::vector<int64_t> st(space.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = space.size() - 1 - i;
    size_t sd = shape.size() - 1 - i;
    st[d] = shape[sd] == 1 ? 0 : s;
    s *= shape[sd];
  }
  return st;
}

// Strides over `space` of a Transpose of a contiguous tensor of shape `in` by `perm`: the output's dim d is the
// input's dim perm[d], placed right-aligned over `space`; 0 along broadcast dims.
std::vector<int64_t> transposed_strides_over(const std::vector<int64_t>& in, const std::vector<int64_t>& perm,
                                             const std::vector<int64_t>& space) {
  std::vector<int64_t> contiguous(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * in[d];
  std::vector<int64_t> st(space.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) {
    size_t od = perm.size() - 1 - i, sd = space.size() - 1 - i;
    size_t id = size_t(perm[od]);
    st[sd] = in[id] == 1 ? 0 : contiguous[id];
  }
  return st;
}

bool lower_node(Lowering& L, const Node& n, const std::vector<int>& in, std::vector<int>& out, std::string* why) {
  AttrReader at(n);
  auto x = in.empty() ? -1 : in[0];
  auto unary = [&](Op op) { out[0] = L.un(op, x); };
  auto binary = [&](Op op) { out[0] = L.bin(op, in[0], in[1]); };
  auto fold = [&](Op op) {
    int acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) acc = L.bin(op, acc, in[i]);
    return acc;
  };
  Scalar tx = x >= 0 ? L.type(x) : Scalar::f32;
  auto zero = [&]() { return L.cst(0, tx); };
  if (tx == Scalar::f64) {  // the C library's function, as the reference's (f32 composes it below)
    switch (n.op()) {
      case OpKind::Sinh: unary(Op::sinh); return true;
      case OpKind::Cosh: unary(Op::cosh); return true;
      case OpKind::Asin: unary(Op::asin); return true;
      case OpKind::Acos: unary(Op::acos); return true;
      case OpKind::Asinh: unary(Op::asinh); return true;
      case OpKind::Acosh: unary(Op::acosh); return true;
      case OpKind::Atanh: unary(Op::atanh); return true;
      default: break;
    }
  }
  switch (n.op()) {
    case OpKind::Identity: out[0] = x; return true;
    case OpKind::Expand: out[0] = x; return true;  // (the broadcast is the iteration space's)
    case OpKind::QuantizeLinear: {
      // x / scale (f32 for f32 and 16-bit x, f64 for f64 and i32, as the reference divides), rounded half to
      // even (NaN to 0), plus the zero point, saturated to the output's range. in[1], in[2]: scale and zero point
      // (per axis: views along the axis).
      Scalar t = tx == Scalar::f32 ? Scalar::f32 : Scalar::f64;
      int q = L.bin(Op::div, L.cast(x, t), L.cast(in[1], t));
      int r = L.sel(L.add(Op::is_nan, Scalar::i1, q), L.cst(0, t), L.un(Op::round, q));
      if (in.size() > 2 && in[2] >= 0) r = L.bin(Op::add, r, L.cast(in[2], t));
      bool u8 = n.output(0)->dtype() == DType::u8;
      int lo = L.cst(u8 ? 0 : -128, t), hi = L.cst(u8 ? 255 : 127, t);
      out[0] = L.cast(L.sel(L.cmp(Op::lt, r, lo), lo, L.sel(L.cmp(Op::gt, r, hi), hi, r)), Scalar::i32);
      return true;
    }
    case OpKind::DequantizeLinear: {  // (x - zero point) in i64, as f32, times the scale (per axis: views)
      int d = L.cast(x, Scalar::i64);
      if (in.size() > 2 && in[2] >= 0) d = L.bin(Op::sub, d, L.cast(in[2], Scalar::i64));
      out[0] = L.bin(Op::mul, L.cast(d, Scalar::f32), L.cast(in[1], Scalar::f32));
      return true;
    }
    case OpKind::Dropout:  // inference (can_generate): the input, and a mask of trues
      out[0] = x;
      if (out.size() > 1) out[1] = L.cst(1, Scalar::i1);
      return true;
    case OpKind::BitShift: {  // shifts of the type's width or more give 0; the result wraps at the node's output
      int bits = int(dtype_size(n.output(0)->dtype()) * 8);
      int shifted = L.bin(at.s("direction") == "LEFT" ? Op::shl : Op::lshr, x, in[1]);
      out[0] = L.sel(L.cmp(Op::ge, in[1], L.cst(bits, tx)), zero(), shifted);
      return true;
    }
    case OpKind::Abs: unary(Op::abs); return true;
    case OpKind::Neg: unary(Op::neg); return true;
    case OpKind::Exp: unary(Op::exp); return true;
    case OpKind::Log: unary(Op::log); return true;
    case OpKind::Sqrt: unary(Op::sqrt); return true;
    case OpKind::Tanh: unary(Op::tanh); return true;
    case OpKind::Erf: unary(Op::erf); return true;
    case OpKind::Floor: unary(Op::floor); return true;
    case OpKind::Ceil: unary(Op::ceil); return true;
    case OpKind::Round: unary(Op::round); return true;
    case OpKind::Reciprocal: unary(Op::recip); return true;
    case OpKind::Not: unary(Op::logical_not); return true;
    case OpKind::IsNaN: out[0] = L.add(Op::is_nan, Scalar::i1, x); return true;
    case OpKind::IsInf: {
      bool neg = at.i("detect_negative") != 0, pos = at.i("detect_positive") != 0;
      int inf = L.add(Op::is_inf, Scalar::i1, x);
      if (pos && neg) out[0] = inf;
      else if (pos) out[0] = L.bin(Op::logical_and, inf, L.cmp(Op::gt, x, L.cst(0)));
      else if (neg) out[0] = L.bin(Op::logical_and, inf, L.cmp(Op::lt, x, L.cst(0)));
      else out[0] = L.cst(0, Scalar::i1);
      return true;
    }
    case OpKind::Relu: out[0] = L.sel(L.cmp(Op::lt, x, zero()), zero(), x); return true;
    case OpKind::Sign: {
      int one = L.cst(1, tx), m1 = L.cst(-1, tx);
      int rest = is_float(tx) ? L.sel(L.cmp(Op::eq, x, zero()), zero(), x) : zero();  // NaN stays NaN
      out[0] = L.sel(L.cmp(Op::gt, x, zero()), one, L.sel(L.cmp(Op::lt, x, zero()), m1, rest));
      return true;
    }
    case OpKind::Sigmoid: {
      int e = L.un(Op::exp, L.un(Op::neg, L.un(Op::abs, x)));
      int s = L.bin(Op::div, L.cst(1), L.bin(Op::add, L.cst(1), e));
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, e, s), s);
      return true;
    }
    case OpKind::Softplus: {  // max(x, 0) + log1p(e^-|x|)
      int l = L.log1p(L.un(Op::exp, L.un(Op::neg, L.un(Op::abs, x))));
      out[0] = L.sel(L.cmp(Op::gt, x, L.cst(0)), L.bin(Op::add, x, l), l);
      return true;
    }
    case OpKind::Softsign:
      out[0] = L.bin(Op::div, x, L.bin(Op::add, L.cst(1), L.un(Op::abs, x)));
      return true;
    case OpKind::HardSigmoid:
      out[0] = L.clamp01(L.bin(Op::add, L.bin(Op::mul, L.cst(at.f("alpha")), x), L.cst(at.f("beta"))));
      return true;
    case OpKind::HardSwish:
      out[0] = L.bin(Op::mul, x, L.clamp01(L.bin(Op::add, L.bin(Op::div, x, L.cst(6)), L.cst(0.5))));
      return true;
    case OpKind::Gelu: {
      int half_x = L.bin(Op::mul, L.cst(0.5), x);
      if (at.s("approximate") == "tanh") {
        int x3 = L.bin(Op::mul, L.bin(Op::mul, x, x), x);
        int inner = L.bin(Op::mul, L.cst(0.7978845608028654), L.bin(Op::add, x, L.bin(Op::mul, L.cst(0.044715), x3)));
        out[0] = L.bin(Op::mul, half_x, L.bin(Op::add, L.cst(1), L.un(Op::tanh, inner)));
      } else {
        int e = L.un(Op::erf, L.bin(Op::mul, x, L.cst(0.7071067811865476)));
        out[0] = L.bin(Op::mul, half_x, L.bin(Op::add, L.cst(1), e));
      }
      return true;
    }
    case OpKind::LeakyRelu:
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, L.cst(at.f("alpha")), x), x);
      return true;
    case OpKind::PRelu:
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, in[1], x), x);
      return true;
    case OpKind::ThresholdedRelu:
      out[0] = L.sel(L.cmp(Op::gt, x, L.cst(at.f("alpha"))), x, L.cst(0));
      return true;
    case OpKind::Shrink: {
      double lambd = at.f("lambd"), bias = at.f("bias");
      int lo = L.bin(Op::add, x, L.cst(bias)), hi = L.bin(Op::sub, x, L.cst(bias));
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(-lambd)), lo, L.sel(L.cmp(Op::gt, x, L.cst(lambd)), hi, L.cst(0)));
      return true;
    }
    case OpKind::Elu:
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(0)), L.bin(Op::mul, L.cst(at.f("alpha")), L.expm1(x)), x);
      return true;
    case OpKind::Celu: {
      double alpha = at.f("alpha");
      if (alpha == 0) return refuse(why, "Celu alpha 0");
      int neg = L.bin(Op::mul, L.cst(alpha), L.expm1(L.bin(Op::div, x, L.cst(alpha))));
      out[0] = L.sel(L.cmp(Op::gt, x, L.cst(0)), x, neg);
      return true;
    }
    case OpKind::Selu: {
      double alpha = at.f("alpha"), gamma = at.f("gamma");
      int neg = L.bin(Op::mul, L.cst(gamma),
                      L.bin(Op::sub, L.bin(Op::mul, L.cst(alpha), L.un(Op::exp, x)), L.cst(alpha)));
      out[0] = L.sel(L.cmp(Op::le, x, L.cst(0)), neg, L.bin(Op::mul, L.cst(gamma), x));
      return true;
    }
    case OpKind::Clip: {
      int v = x;
      if (n.input(1)) v = L.sel(L.cmp(Op::lt, v, in[1]), in[1], v);
      if (n.input(2)) v = L.sel(L.cmp(Op::gt, v, in[2]), in[2], v);
      out[0] = v;
      return true;
    }
    case OpKind::Sin: unary(Op::sin); return true;
    case OpKind::Cos: unary(Op::cos); return true;
    case OpKind::Tan: unary(Op::tan); return true;
    case OpKind::Atan: unary(Op::atan); return true;
    case OpKind::Asin: {  // atan(x / sqrt((1 - x)(1 + x))): NaN beyond [-1, 1], +-pi/2 at +-1
      int d = L.un(Op::sqrt, L.bin(Op::mul, L.bin(Op::sub, L.cst(1), x), L.bin(Op::add, L.cst(1), x)));
      out[0] = L.un(Op::atan, L.bin(Op::div, x, d));
      return true;
    }
    case OpKind::Acos: {  // 2 atan(sqrt((1 - x) / (1 + x))): exact 1 - x near 1 and 1 + x near -1 (pi at -1)
      int ratio = L.bin(Op::div, L.bin(Op::sub, L.cst(1), x), L.bin(Op::add, L.cst(1), x));
      out[0] = L.bin(Op::mul, L.cst(2), L.un(Op::atan, L.un(Op::sqrt, ratio)));
      return true;
    }
    case OpKind::Sinh: {  // odd Taylor series below |x| = 0.5 (to x^11: below 1e-10 relative), else (e - 1/e) / 2
      int a = L.un(Op::abs, x);
      int z = L.bin(Op::mul, a, a);
      int p = L.cst(1.0 / 39916800);
      for (double c : {1.0 / 362880, 1.0 / 5040, 1.0 / 120, 1.0 / 6}) p = L.bin(Op::add, L.bin(Op::mul, p, z), L.cst(c));
      int small = L.bin(Op::add, a, L.bin(Op::mul, L.bin(Op::mul, a, z), p));
      int e = L.un(Op::exp, a);
      int mid = L.bin(Op::mul, L.bin(Op::sub, e, L.bin(Op::div, L.cst(1), e)), L.cst(0.5));
      int r = L.sel(L.cmp(Op::lt, a, L.cst(0.5)), small, L.sel(L.cmp(Op::lt, a, L.cst(20)), mid, L.half_exp_large(a)));
      out[0] = L.odd(x, r);
      return true;
    }
    case OpKind::Cosh: {  // (e + 1/e) / 2 up to |x| = 20, then e^|x| / 2
      int a = L.un(Op::abs, x);
      int e = L.un(Op::exp, a);
      int mid = L.bin(Op::mul, L.bin(Op::add, e, L.bin(Op::div, L.cst(1), e)), L.cst(0.5));
      out[0] = L.sel(L.cmp(Op::lt, a, L.cst(20)), mid, L.half_exp_large(a));
      return true;
    }
    case OpKind::Asinh: {  // log1p(a + a^2 / (1 + sqrt(1 + a^2))), log(a) + ln 2 once a^2 swamps 1
      int a = L.un(Op::abs, x);
      int z = L.bin(Op::mul, a, a);
      int t = L.bin(Op::add, a, L.bin(Op::div, z, L.bin(Op::add, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, L.cst(1), z)))));
      int large = L.bin(Op::add, L.un(Op::log, a), L.cst(0.69314718055994531));
      out[0] = L.odd(x, L.sel(L.cmp(Op::lt, a, L.cst(4096)), L.log1p(t), large));
      return true;
    }
    case OpKind::Acosh: {  // log1p((x - 1) + sqrt((x - 1)(x + 1))), log(x) + ln 2 for large x; NaN below 1
      int xm1 = L.bin(Op::sub, x, L.cst(1));
      int t = L.bin(Op::add, xm1, L.un(Op::sqrt, L.bin(Op::mul, xm1, L.bin(Op::add, x, L.cst(1)))));
      int large = L.bin(Op::add, L.un(Op::log, x), L.cst(0.69314718055994531));
      int r = L.sel(L.cmp(Op::lt, x, L.cst(4096)), L.log1p(t), large);
      out[0] = L.sel(L.cmp(Op::lt, x, L.cst(1)), L.cst(std::numeric_limits<double>::quiet_NaN()), r);
      return true;
    }
    case OpKind::Atanh: {  // log1p(2a / (1 - a)) / 2: +-inf at +-1, NaN beyond
      int a = L.un(Op::abs, x);
      int t = L.bin(Op::div, L.bin(Op::add, a, a), L.bin(Op::sub, L.cst(1), a));
      int r = L.bin(Op::mul, L.cst(0.5), L.log1p(t));
      r = L.sel(L.cmp(Op::eq, a, L.cst(1)), L.cst(std::numeric_limits<double>::infinity()), r);
      out[0] = L.odd(x, r);
      return true;
    }
    case OpKind::Add: binary(Op::add); return true;
    case OpKind::Sub: binary(Op::sub); return true;
    case OpKind::Mul: binary(Op::mul); return true;
    case OpKind::Div:
    case OpKind::Mod: {
      if (is_float(tx)) {
        binary(n.op() == OpKind::Div ? Op::div : Op::fmod);  // Mod with fmod=1 (can_generate)
        return true;
      }
      // x / -1 wraps at the type's minimum and x % -1 is 0 (idiv and irem do both).
      if (n.op() == OpKind::Div) {
        binary(Op::idiv);
        return true;
      }
      int r = L.bin(Op::irem, x, in[1]);
      if (at.i("fmod") == 0) {  // Python's %: a nonzero remainder takes the divisor's sign
        int zero = L.cst(0, tx);
        int differ = L.bin(Op::logical_xor, L.cmp(Op::lt, r, zero), L.cmp(Op::lt, in[1], zero));
        int wrong = L.bin(Op::logical_and, L.un(Op::logical_not, L.cmp(Op::eq, r, zero)), differ);
        r = L.sel(wrong, L.bin(Op::add, r, in[1]), r);
      }
      out[0] = r;
      return true;
    }
    case OpKind::Max: out[0] = fold(Op::max); return true;
    case OpKind::Min: out[0] = fold(Op::min); return true;
    case OpKind::Sum: out[0] = fold(Op::add); return true;
    case OpKind::Mean: out[0] = L.bin(Op::div, fold(Op::add), L.cst(double(in.size()))); return true;
    case OpKind::Pow: {  // small constant powers as products (within 1.5 ulp), the rest as C's pow
      auto e = scalar_input(n, 1);
      auto c_pow = [&] {  // C's pow on the f64 values, as the reference
        return L.bin(Op::pow, L.cast(x, Scalar::f64), L.cast(in[1], Scalar::f64));
      };
      if (!is_float(tx)) {  // an integer base: a float exponent through C's pow, truncated (saturating) back
        if (is_float(L.type(in[1]))) {
          out[0] = L.cast(c_pow(), tx);
          return true;
        }
        if (e && *e < 0) {  // 1 / x^k, truncated: 1 for 1, +-1 for -1, 0 otherwise (x is checked for zeros)
          int one = L.cst(1, tx), minus_one = L.cst(-1, tx);
          bool odd = std::fmod(-*e, 2) == 1;
          out[0] = L.sel(L.cmp(Op::eq, x, one), one,
                         L.sel(L.cmp(Op::eq, x, minus_one), odd ? minus_one : one, L.cst(0, tx)));
          return true;
        }
        if (e) {  // a constant exponent of at least 0: by squaring, wrapping as the reference's
          int r = -1, b = x;  // r: the product so far (-1: none yet, 1)
          for (auto k = uint64_t(*e); k; k >>= 1) {
            if (k & 1) r = r < 0 ? b : L.bin(Op::mul, r, b);
            if (k > 1) b = L.bin(Op::mul, b, b);
          }
          out[0] = r < 0 ? L.cst(1, tx) : r;
          return true;
        }
        // An integer exponent tensor, at least 0 (a signed one is checked before the kernel runs): by squaring
        // over every bit the exponent's type holds, the product taking the base's power where the bit is set.
        int p = in[1];
        Scalar te = L.type(p);
        int bits = te == Scalar::i32 ? 31 : te == Scalar::i64 ? 63 : 64;
        int r = L.cst(1, tx), b = x;
        for (int k = 0; k < bits; ++k) {
          int bit = L.bin(Op::irem, L.bin(Op::lshr, p, L.cst(k, te)), L.cst(2, te));
          r = L.sel(L.cmp(Op::eq, bit, L.cst(0, te)), r, L.bin(Op::mul, r, b));
          if (k + 1 < bits) b = L.bin(Op::mul, b, b);
        }
        out[0] = r;
        return true;
      }
      // A float exponent, or a constant one f32 holds exactly, meets an f32 base in the emitter's pow; anything
      // else (an f64 value, an integer tensor, a constant f32 would round) through C's.
      bool f32_exponent = e ? double(float(*e)) == *e : L.type(in[1]) == Scalar::f32;
      if (e && *e == 1) out[0] = x;
      else if (e && *e == 2) out[0] = L.bin(Op::mul, x, x);
      else if (e && *e == 3 && tx != Scalar::f64) out[0] = L.bin(Op::mul, L.bin(Op::mul, x, x), x);
      else if (tx == Scalar::f64 || !f32_exponent) out[0] = L.cast(c_pow(), tx);
      else out[0] = L.bin(Op::pow, x, L.cast(in[1], Scalar::f32));
      return true;
    }
    case OpKind::Less: out[0] = L.cmp(Op::lt, in[0], in[1]); return true;
    case OpKind::LessOrEqual: out[0] = L.cmp(Op::le, in[0], in[1]); return true;
    case OpKind::Greater: out[0] = L.cmp(Op::gt, in[0], in[1]); return true;
    case OpKind::GreaterOrEqual: out[0] = L.cmp(Op::ge, in[0], in[1]); return true;
    case OpKind::Equal: out[0] = L.cmp(Op::eq, in[0], in[1]); return true;
    case OpKind::And: binary(Op::logical_and); return true;
    case OpKind::Or: binary(Op::logical_or); return true;
    case OpKind::Xor: binary(Op::logical_xor); return true;
    case OpKind::Where: out[0] = L.sel(in[0], in[1], in[2]); return true;
    case OpKind::Cast: out[0] = L.cast(x, scalar_of(n.output(0)->dtype())); return true;
    case OpKind::Softmax:
    case OpKind::LogSoftmax: {
      int m = L.add(Op::row_max_num, tx, x);  // a NaN x makes d, the sum and so every output NaN
      int d = L.bin(Op::sub, x, m);
      int e = L.un(Op::exp, d);
      int s = L.add(Op::row_sum, tx, e);
      // 1 / sum once per row, then a multiply per element (within an ulp of dividing)
      out[0] = n.op() == OpKind::Softmax ? L.bin(Op::mul, e, L.bin(Op::div, L.cst(1), s))
                                         : L.bin(Op::sub, d, L.un(Op::log, s));
      return true;
    }
    case OpKind::LayerNormalization: {
      auto [mean, d, var] = L.moments(x);
      int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, var, L.cst(at.f("epsilon")))));
      int y = L.bin(Op::mul, L.bin(Op::mul, d, inv), in[1]);
      if (n.input(2)) y = L.bin(Op::add, y, in[2]);
      out[0] = y;
      // The optional Mean and InvStdDev outputs: one value per row.
      if (out.size() > 1) out[1] = mean;
      if (out.size() > 2) out[2] = inv;
      return true;
    }
    case OpKind::ReduceSum: out[0] = L.add(Op::row_sum, tx, x); return true;
    case OpKind::ReduceMax: out[0] = L.add(Op::row_max, tx, x); return true;
    case OpKind::ReduceMin: out[0] = L.add(Op::row_min, tx, x); return true;
    case OpKind::ReduceMean:
      out[0] = L.bin(Op::div, L.add(Op::row_sum, tx, x), L.add(Op::row_size, tx));
      return true;
    case OpKind::InstanceNormalization: {  // in[1], in[2]: the channel views of scale and B
      auto [mean, d, var] = L.moments(x);
      int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, var, L.cst(at.f("epsilon")))));
      out[0] = L.bin(Op::add, L.bin(Op::mul, L.bin(Op::mul, d, inv), in[1]), in[2]);
      return true;
    }
    case OpKind::MeanVarianceNormalization: {  // (x - mean) / (sqrt(var) + 1e-9), as ONNX's function body
      auto [mean, d, var] = L.moments(x);
      out[0] = L.bin(Op::div, d, L.bin(Op::add, L.un(Op::sqrt, var), L.cst(1e-9)));
      return true;
    }
    case OpKind::BatchNormalization: {  // (x - mean) / sqrt(var + eps) * scale + B, parameters per channel
      int inv = L.bin(Op::div, L.cst(1), L.un(Op::sqrt, L.bin(Op::add, in[4], L.cst(at.f("epsilon")))));
      out[0] = L.bin(Op::add, L.bin(Op::mul, L.bin(Op::mul, L.bin(Op::sub, x, in[3]), inv), in[1]), in[2]);
      return true;
    }
    case OpKind::LRN: {
      // x / (bias + alpha / size * sum of squares)^beta, the sum over the channels [c - floor((size - 1) / 2),
      // c + ceil((size - 1) / 2)] within range, in the reference's order: loads shifted along the channels (0 past
      // either end) of the input, which must be read from memory (fusion keeps LRN's producer out of its group).
      const Expr xe = L.k.exprs[size_t(x)];  // (a copy: adding expressions below moves the vector)
      if (xe.op != Op::load || xe.imm != 0) return refuse(why, n.describe(), ": its input is computed in the kernel");
      int64_t size = at.i("size"), before = (size - 1) / 2;
      // A window of one channel (size 1, or one channel known at compile time: an element-wise kernel) holds only
      // the element itself. A kernel over one channel that only run time shows runs op by op.
      const Operand xo = L.k.operands[size_t(xe.operand)];
      bool one = reduced_block(n)->count == 0;
      if (!one && (L.k.columns ? xo.column_broadcast : xo.inner == Access::broadcast))
        return refuse(why, n.describe(), ": a window over one channel");
      int sq = -1;
      for (int64_t k = one ? 0 : -before; k < (one ? 1 : size - before); ++k) {
        int v = L.add(Op::load, tx, -1, -1, -1, double(k));
        L.k.exprs[size_t(v)].operand = xe.operand;
        int term = L.bin(Op::mul, v, v);
        sq = sq < 0 ? term : L.bin(Op::add, sq, term);
      }
      int base = L.bin(Op::add, L.cst(at.f("bias"), tx), L.bin(Op::mul, L.cst(double(at.f("alpha")) / double(size), tx), sq));
      out[0] = L.bin(Op::div, x, L.bin(Op::pow, base, L.cst(at.f("beta"), tx)));
      return true;
    }
    case OpKind::CumSum: {  // running sums as the reference's: floats in f64, rounded once per element
      int flags = (at.i("exclusive") != 0 ? kScanExclusive : 0) | (at.i("reverse") != 0 ? kScanReverse : 0);
      Scalar t = is_float(tx) ? Scalar::f64 : tx;
      out[0] = L.cast(L.add(Op::scan_sum, t, L.cast(x, t), -1, -1, flags), tx);
      return true;
    }
    case OpKind::TopK: {  // the K best of each column, then their positions
      int64_t k = int64_t(*scalar_input(n, 1));
      out[0] = L.add(Op::row_topk, tx, x, -1, -1, double(at.i("largest") != 0 ? k : -k));
      if (out.size() > 1) out[1] = L.add(Op::row_topk_index, Scalar::i64, out[0]);
      return true;
    }
    case OpKind::NegativeLogLikelihoodLoss: {
      // -input[n, t, d...] * weight[t] at each target t (in[1], read per row), 0 where t is the ignored index. A
      // row maximum picks the target's element of the row, and of the weights, exactly: every other element
      // counts as -inf (the prepared kernel has checked that each target is a class or the ignored index).
      int t = L.cast(in[1], Scalar::i64);
      int hit = L.cmp(Op::eq, L.add(Op::row_index, Scalar::i64), t);
      int none = L.cst(-std::numeric_limits<double>::infinity(), tx);
      int loss = L.un(Op::neg, L.add(Op::row_max, tx, L.sel(hit, x, none)));
      if (in.size() > 2 && in[2] >= 0) loss = L.bin(Op::mul, loss, L.add(Op::row_max, tx, L.sel(hit, in[2], none)));
      if (auto ignore = ignored_target(n))
        loss = L.sel(L.cmp(Op::eq, t, L.cst(double(*ignore), Scalar::i64)), zero(), loss);
      out[0] = loss;
      return true;
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      out[0] = L.add(n.op() == OpKind::ArgMax ? Op::row_argmax : Op::row_argmin, Scalar::i64, x, -1, -1,
                     at.i("select_last_index") != 0 ? 1 : 0);
      return true;
    case OpKind::Hardmax: {  // one-hot at the first largest element (NaN counts as largest)
      int best = L.add(Op::row_argmax, Scalar::i64, x);
      out[0] = L.sel(L.cmp(Op::eq, L.add(Op::row_index, Scalar::i64), best), L.cst(1), L.cst(0));
      return true;
    }
    case OpKind::ReduceProd:
      // A float product in f64, as the reference's: f32 would overflow or underflow midway where it does not.
      if (tx == Scalar::f32) out[0] = L.cast(L.add(Op::row_prod, Scalar::f64, L.cast(x, Scalar::f64)), Scalar::f32);
      else out[0] = L.add(Op::row_prod, tx, x);
      return true;
    case OpKind::ReduceL1: out[0] = L.add(Op::row_sum, tx, L.un(Op::abs, x)); return true;
    case OpKind::ReduceSumSquare: out[0] = L.add(Op::row_sum, tx, L.bin(Op::mul, x, x)); return true;
    case OpKind::ReduceL2: {  // m sqrt(sum((x / m)^2)), m = max |x|: no f32 overflow where the f64 reference has none
      int m = L.add(Op::row_max, tx, L.un(Op::abs, x));
      int t = L.bin(Op::div, x, m);
      int r = L.bin(Op::mul, m, L.un(Op::sqrt, L.add(Op::row_sum, tx, L.bin(Op::mul, t, t))));
      int inf = L.cst(std::numeric_limits<double>::infinity());
      out[0] = L.sel(L.cmp(Op::eq, m, L.cst(0)), L.cst(0), L.sel(L.cmp(Op::eq, m, inf), inf, r));
      return true;
    }
    case OpKind::ReduceLogSum: {  // log(m) + log(sum(x / m)), m = max |x|, for the same reason
      int m = L.add(Op::row_max, tx, L.un(Op::abs, x));
      int r = L.bin(Op::add, L.un(Op::log, m), L.un(Op::log, L.add(Op::row_sum, tx, L.bin(Op::div, x, m))));
      int plain = L.un(Op::log, L.add(Op::row_sum, tx, x));  // m = 0 or inf: log(0) = -inf; inf or NaN sums
      int inf = L.cst(std::numeric_limits<double>::infinity());
      out[0] = L.sel(L.bin(Op::logical_or, L.cmp(Op::eq, m, L.cst(0)), L.cmp(Op::eq, m, inf)), plain, r);
      return true;
    }
    case OpKind::ReduceLogSumExp: {  // max + log(sum(e^(x - max))); an infinite max is the result
      int m = L.add(Op::row_max, tx, x);
      int s = L.add(Op::row_sum, tx, L.un(Op::exp, L.bin(Op::sub, x, m)));
      int inf = L.cmp(Op::eq, L.un(Op::abs, m), L.cst(std::numeric_limits<double>::infinity()));
      out[0] = L.sel(inf, m, L.bin(Op::add, m, L.un(Op::log, s)));
      return true;
    }
    default: return refuse(why, n.describe(), " has no generated form");
  }
}

}  // namespace

std::optional<LoweredKernel> lower_body(const Graph& body, const std::vector<std::vector<int64_t>>& input_shapes,
                                        std::string* why) {
  auto no = [&](const auto&... args) -> std::optional<LoweredKernel> {
    if (why) *why = str_cat(args...);
    return std::nullopt;
  };
  const auto& ins = body.inputs();
  CUVIL_CHECK(input_shapes.size() == ins.size(), "fused body takes ", ins.size(), " inputs, given ",
              input_shapes.size());
  std::vector<TensorType> in_types;
  for (size_t i = 0; i < ins.size(); ++i) in_types.push_back({ins[i]->dtype(), Shape::of(input_shapes[i])});
  std::vector<TensorType> types = infer_region_types(body, in_types);
  auto dims_of = [&](const Value* v) { return types[size_t(v->id())].shape.static_dims(); };

  // The reduced block (count 0: none), the same for every reduction of the body.
  ReducedBlock red;
  std::vector<const Value*> row_only;  // keepdims=0 reduction results: no place in the full space
  std::vector<const Value*> entries;   // TopK results: K values per row, where the row has its own length
  int64_t topk = 0;
  for (const auto& n : body.nodes()) {
    std::string w;
    if (!can_generate(*n, &w)) return no(n->describe(), ": ", w);
    for (const Value* v : n->inputs())
      if (std::find(entries.begin(), entries.end(), v) != entries.end())
        return no(n->describe(), ": reads a TopK result, which is no element of the kernel's space");
    if (n->op() == OpKind::TopK) {  // (K is a constant: can_generate)
      int64_t k = int64_t(*scalar_input(*n, 1));
      if (topk != 0 && k != topk) return no("TopKs of different K");
      topk = k;
      for (const Value* v : n->outputs()) entries.push_back(v);
    }
    std::optional<ReducedBlock> rn = reduced_block(*n);
    if (!rn) return no(n->describe(), ": reduced axes are not one block");
    if (rn->count == 0) continue;
    if (red.count != 0 && !(*rn == red)) return no("reductions over different blocks of dims");
    red = *rn;
    if (drops_reduced_dims(*n)) row_only.push_back(n->output(0));
  }
  auto is_entries = [&](const Value* v) { return std::find(entries.begin(), entries.end(), v) != entries.end(); };
  auto is_row_only = [&](const Value* v) {
    return is_entries(v) || std::find(row_only.begin(), row_only.end(), v) != row_only.end();
  };

  // Inputs that only Transposes read, or only as per-channel or per-row parameters: the kernel reads them through
  // other strides (views), never at their own shape, which therefore does not enter the space.
  std::vector<bool> view_only(ins.size(), true);
  for (size_t i = 0; i < ins.size(); ++i) {
    for (const auto& n : body.nodes())
      for (size_t j = 0; j < n->num_inputs(); ++j)
        if (n->input(j) == ins[i] && n->op() != OpKind::Transpose && !channel_param(*n, j) && !row_param(*n, j))
          view_only[i] = false;
    for (const Value* v : body.outputs())
      if (v == ins[i]) view_only[i] = false;
  }

  // The full iteration space: every input (but the view-only ones) and every node output broadcast together.
  std::vector<int64_t> space;
  for (size_t i = 0; i < ins.size(); ++i)
    if (!view_only[i] && !broadcast_into(space, input_shapes[i])) return no("inputs do not broadcast together");
  for (const auto& n : body.nodes())
    for (const Value* v : n->outputs())
      if (!is_row_only(v) && !broadcast_into(space, dims_of(v))) return no("values do not broadcast together");
  const size_t r = space.size();
  const int k = red.count;
  if (size_t(k + red.after) > r) return no("reduction over more dims than the space has");
  // The reduced dims are [lo, hi); a row of the kernel runs over them.
  const size_t hi = r - size_t(red.after), lo = hi - size_t(k);
  std::vector<int64_t> row_shape, row_keep = space;
  for (size_t d = 0; d < r; ++d) {
    if (d < lo || d >= hi) row_shape.push_back(space[d]);
    else row_keep[d] = 1;
  }
  // Every node output has the full shape or (with reductions) one value per row; a reduction reduces a value of
  // the full shape, and only it, or element-wise work on per-row values, gives one value per row.
  for (const auto& n : body.nodes()) {
    bool reduces = reduced_block(*n)->count > 0;
    if (reduces && dims_of(n->input(0)) != space)
      return no(n->describe(), ": reduces a value narrower than the iteration space");
    bool row_inputs = true;  // element-wise work on per-row values (or scalars)
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (!v || is_axes_input(*n, i)) continue;
      if (v->is_constant() ? v->constant().numel() != 1 : dims_of(v) == space && space != row_keep) row_inputs = false;
    }
    for (size_t o = 0; o < n->num_outputs(); ++o) {
      auto d = dims_of(n->output(o));
      if (is_entries(n->output(o))) {  // the space with K in place of the row
        std::vector<int64_t> want = space;
        want[lo] = topk;
        if (d != want) return no(n->describe(), ": output shape does not match its input's with K along the axis");
        continue;
      }
      // (Without keepdims a reduction also drops the reduced axes of size 1 outside the block.)
      bool full = d == space,
           row = k > 0 && (d == row_keep || (is_row_only(n->output(o)) && without_ones(d) == without_ones(row_shape)));
      if (!full && !row) return no(n->describe(), ": output shape does not cover the iteration space");
      if (!full && !row_result(*n, o) && (reduces || !row_inputs))
        return no(n->describe(), ": one value per row from an op that does not reduce");
    }
  }

  // Operands and their strides over the full space.
  LoweredKernel lk;
  Kernel& kern = lk.kernel;
  std::vector<std::vector<int64_t>> st;
  for (size_t i = 0; i < ins.size(); ++i) {
    kern.operands.push_back({ins[i]->dtype(), Access::contiguous, false, false});
    st.push_back(view_only[i] ? std::vector<int64_t>(space.size(), 0) : strides_over(input_shapes[i], space));
  }
  for (const Value* v : body.outputs()) {
    auto d = dims_of(v);
    if (is_entries(v)) {  // K entries per row: contiguous in its own shape, whose row has K elements
      kern.operands.push_back({v->dtype(), Access::contiguous, true, true, false, int(topk)});
      std::vector<int64_t> s(r, 0);
      int64_t step = 1;
      for (size_t dd = r; dd-- > 0;) {
        s[dd] = step;
        step *= dd == lo ? topk : space[dd];
      }
      st.push_back(std::move(s));
      continue;
    }
    bool per_row = d != space;
    kern.operands.push_back({v->dtype(), per_row ? Access::broadcast : Access::contiguous, true, per_row});
    st.push_back(strides_over(per_row ? row_keep : space, space));
    if (per_row) {  // a row output's own dims are contiguous even where the space has size 1
      int64_t s = 1;
      for (size_t dd = r; dd-- > 0;) {
        if (dd >= lo && dd < hi) continue;
        st.back()[dd] = s;
        s *= space[dd];
      }
    }
  }

  // Views: one more operand each on a kernel input's buffer, read through other strides. A Transpose reads its
  // input permuted; per-channel parameters ([C]) are read along the channel dim of the node's input 0; per-row
  // parameters (a loss's targets) in the shape of the space without the reduced dims.
  struct View {
    const Node* node;
    size_t slot;
    int operand;
  };
  std::vector<View> views;
  auto add_view = [&](const Node& n, size_t slot, std::vector<int64_t> strides) -> bool {
    size_t src = size_t(std::find(ins.begin(), ins.end(), n.input(slot)) - ins.begin());
    if (src == ins.size()) return false;
    views.push_back({&n, slot, int(kern.operands.size())});
    lk.views.push_back(int(src));
    kern.operands.push_back({ins[src]->dtype(), Access::contiguous, false, false});
    st.push_back(std::move(strides));
    return true;
  };
  for (const auto& n : body.nodes()) {
    if (n->op() == OpKind::Transpose) {
      size_t src = size_t(std::find(ins.begin(), ins.end(), n->input(0)) - ins.begin());
      if (src == ins.size()) return no(n->describe(), ": only a Transpose of a kernel input is fused");
      add_view(*n, 0, transposed_strides_over(input_shapes[src], *transpose_perm(*n, input_rank(*n, 0)), space));
      continue;
    }
    for (size_t j = 0; j < n->num_inputs(); ++j) {
      const Value* pv = n->input(j);
      if (!pv || (!channel_param(*n, j) && !row_param(*n, j))) continue;
      if (pv->is_constant() && pv->constant().numel() == 1) continue;  // an immediate already
      if (row_param(*n, j)) {  // contiguous in its own shape: the space's dims but the reduced ones
        if (dims_of(pv) != row_shape) return no(n->describe(), ": input ", j, " does not have one value per row");
        std::vector<int64_t> strides(space.size(), 0);
        int64_t step = 1;
        for (size_t dd = r; dd-- > 0;) {
          if (dd >= lo && dd < hi) continue;
          strides[dd] = space[dd] == 1 ? 0 : step;
          step *= space[dd];
        }
        if (!add_view(*n, j, strides)) return no(n->describe(), ": input ", j, " is computed in the kernel");
        continue;
      }
      std::vector<int64_t> x = dims_of(n->input(0)), p = dims_of(n->input(j));
      size_t axis = size_t(*param_axis(*n, j));
      if (axis >= x.size() || p.size() != 1 || (p[0] != x[axis] && p[0] != 1))
        return no(n->describe(), ": input ", j, " is not one value per position of dim ", axis);
      std::vector<int64_t> strides(space.size(), 0);
      strides[space.size() - x.size() + axis] = p[0] == 1 ? 0 : 1;
      if (!add_view(*n, j, strides)) return no(n->describe(), ": input ", j, " is computed in the kernel");
    }
  }

  // Merge dims: within the outer block and within the reduced block (in element mode everything is one block).
  struct Dim1 {
    int64_t size;
    std::vector<int64_t> strides;
  };
  auto merge_block = [&](size_t lo, size_t hi) {
    std::vector<Dim1> out;
    for (size_t d = lo; d < hi; ++d) {
      if (space[d] == 1) continue;
      Dim1 cur{space[d], {}};
      for (auto& s : st) cur.strides.push_back(s[d]);
      if (!out.empty()) {
        Dim1& prev = out.back();
        bool ok = true;
        for (size_t o = 0; o < st.size(); ++o) ok = ok && prev.strides[o] == cur.strides[o] * cur.size;
        if (ok) {
          prev.size *= cur.size;
          prev.strides = cur.strides;
          continue;
        }
      }
      out.push_back(cur);
    }
    return out;
  };
  std::vector<Dim1> merged;
  const Dim1 unit{1, std::vector<int64_t>(st.size(), 0)};
  bool columns = false;
  if (k == 0) {
    merged = merge_block(0, r);
    if (merged.empty()) merged.push_back(unit);
  } else {
    merged = merge_block(0, lo);
    std::vector<Dim1> rows = merge_block(lo, hi), cols = merge_block(hi, r);
    if (rows.size() > 1) return no("the reduced dims cannot be merged into one row for every operand");
    if (cols.size() > 1) return no("the dims after the reduced ones cannot be merged into one for every operand");
    merged.push_back(rows.empty() ? unit : rows[0]);
    columns = !cols.empty();  // else every dim after the reduced ones has size 1: a row kernel
    if (columns) merged.push_back(cols[0]);
  }
  kern.rank = int(merged.size());
  kern.columns = columns;
  lk.rows = 1;
  for (size_t d = 0; d < merged.size(); ++d) {
    lk.dims.push_back(merged[d].size);
    if (d + (columns ? 2 : 1) < merged.size()) lk.rows *= merged[d].size;
  }
  lk.inner = merged.back().size;
  lk.reduced = columns ? merged[merged.size() - 2].size : 1;
  if (k > 0 && (columns ? lk.reduced : lk.inner) == 0) return no("reduction over an empty row");
  for (size_t o = 0; o < st.size(); ++o) {
    for (auto& m : merged) lk.strides.push_back(m.strides[o]);
    int64_t& inner = lk.strides.back();
    Operand& op = kern.operands[o];
    if (op.is_output) {
      if (op.entries > 0 && !columns) {  // TopK's pairs go along the output's row, at its own stride
        op.inner = Access::broadcast;
        continue;
      }
      if (!op.per_row || columns) {
        if (lk.inner == 1) inner = 1;
        if (inner != 1) return no("internal: output ", o, " is not contiguous along the innermost dim");
        op.inner = Access::contiguous;
      } else {
        inner = 0;
      }
      continue;
    }
    if (lk.inner == 1) inner = 0;
    op.inner = inner == 0 ? Access::broadcast : inner == 1 ? Access::contiguous : Access::strided;
    op.column_broadcast = columns && lk.strides[lk.strides.size() - 2] == 0;
  }

  // The expressions.
  Lowering L;
  L.k.rank = kern.rank;
  L.k.columns = kern.columns;
  L.k.operands = kern.operands;
  std::vector<int> expr_of(body.num_values(), -1);
  for (size_t i = 0; i < ins.size(); ++i) {
    Expr e;
    e.op = Op::load;
    e.type = scalar_of(ins[i]->dtype());
    e.operand = int(i);
    L.k.exprs.push_back(e);
    expr_of[size_t(ins[i]->id())] = int(L.k.exprs.size()) - 1;
  }
  std::vector<std::string> names;
  for (const auto& n : body.nodes()) {
    std::vector<int> in;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (!v || is_axes_input(*n, i)) {  // read at compile time
        in.push_back(-1);
        continue;
      }
      int& e = expr_of[size_t(v->id())];
      if (e < 0 && v->is_constant()) {  // scalar constants become immediates
        const Tensor& t = v->constant();
        std::optional<double> imm = t.numel() == 1 && storable_dtype(t.dtype()) ? immediate(t) : std::nullopt;
        if (!imm) return no("constant '", v->name(), "' is not a scalar the kernel can hold");
        e = L.cst(*imm, scalar_of(t.dtype()));
      }
      if (e < 0) return no(n->describe(), ": input ", i, " has no expression");
      in.push_back(e);
    }
    // Views replace the inputs they read (a Transpose is its view).
    for (const View& v : views) {
      if (v.node != n.get()) continue;
      Expr e;
      e.op = Op::load;
      e.type = scalar_of(n->input(v.slot)->dtype());
      e.operand = v.operand;
      L.k.exprs.push_back(e);
      in[v.slot] = int(L.k.exprs.size()) - 1;
    }
    // Inputs the prepared kernel checks before running: integer divisors (for zeros), signed integer exponents
    // (for negative values), a loss's targets (each a class or the ignored index; a constant one here). Each
    // must be a kernel input, listed once.
    auto input_index = [&](const Value* v) {
      auto at = std::find(ins.begin(), ins.end(), v);
      return at == ins.end() ? -1 : int(at - ins.begin());
    };
    auto add_once = [](auto& list, const auto& entry) {
      if (std::find(list.begin(), list.end(), entry) == list.end()) list.push_back(entry);
    };
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      bool divisor = is_integer_divisor(*n, i), exponent = is_signed_exponent(*n, i);
      if (!divisor && !exponent) continue;
      int idx = input_index(n->input(i));
      if (idx < 0) return no(n->describe(), ": input ", i, " is checked before the run but computed in the kernel");
      add_once(divisor ? lk.nonzero_inputs : lk.nonnegative_inputs, idx);
    }
    if (n->op() == OpKind::NegativeLogLikelihoodLoss) {
      LoweredKernel::ClassTargets ct{-1, dims_of(n->input(0))[1], ignored_target(*n)};
      const Value* tv = n->input(1);
      if (tv->is_constant()) {
        int64_t t = tv->constant().get_i64(0);
        if (!((t >= 0 && t < ct.classes) || (ct.ignore && t == *ct.ignore)))
          return no(n->describe(), ": its constant target is not a class");
      } else {
        ct.input = input_index(tv);
        if (ct.input < 0) return no(n->describe(), ": its targets are computed in the kernel");
        add_once(lk.class_targets, ct);
      }
    }
    std::vector<int> out(n->num_outputs(), -1);
    if (n->op() == OpKind::Transpose) out[0] = in[0];
    else if (!lower_node(L, *n, in, out, why)) return std::nullopt;
    for (size_t o = 0; o < out.size(); ++o) {
      // Operands of mixed storage are unified by the op's dtype rules; cast where a result is stored narrower.
      DType dt = n->output(o)->dtype();
      Scalar want = scalar_of(dt);
      if (L.type(out[o]) != want) out[o] = L.cast(out[o], want);
      // A 16-bit float result is what the reference stores: rounded to nearest even (Cast to bf16 truncates).
      // (Identity and TopK pass their inputs' values on.)
      bool passes = n->op() == OpKind::Identity || n->op() == OpKind::TopK;
      if (dt == DType::bf16 && !passes) out[o] = L.un(n->op() == OpKind::Cast ? Op::trunc_bf16 : Op::round_bf16, out[o]);
      if (dt == DType::f16 && !passes) out[o] = L.un(Op::round_f16, out[o]);
      // A narrow integer result is what the reference stores: its low bits (ops that only pick among their
      // inputs' values need no wrap).
      bool picks = n->op() == OpKind::Identity || n->op() == OpKind::Max || n->op() == OpKind::Min ||
                   n->op() == OpKind::Clip || n->op() == OpKind::Relu || n->op() == OpKind::Where ||
                   n->op() == OpKind::ReduceMax || n->op() == OpKind::ReduceMin || n->op() == OpKind::Transpose ||
                   n->op() == OpKind::TopK;
      if (narrow_int(dt) && !picks)
        out[o] = L.add(is_signed(dt) ? Op::wrap_s : Op::wrap_u, L.type(out[o]), out[o], -1, -1,
                       double(dtype_size(dt) * 8));
      expr_of[size_t(n->output(o)->id())] = out[o];
    }
    std::string nm(op_name(n->op()));
    if (names.empty() || names.back() != nm) names.push_back(nm);
  }
  for (size_t j = 0; j < body.outputs().size(); ++j)
    L.k.stores.push_back({int(ins.size() + j), expr_of[size_t(body.outputs()[j]->id())]});
  kern = std::move(L.k);
  kern.validate();
  for (size_t i = 0; i < names.size(); ++i) lk.ops += (i ? "+" : "") + names[i];
  return lk;
}

}  // namespace cuvil::codegen
