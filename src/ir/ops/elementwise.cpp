// Op definitions (arity, attributes, shape inference) of the elementwise family.
//
// Differences from ONNX (opset <= 17):
//   - Float-only ops also accept bf16 where ONNX lists only f16/f32/f64 (trigonometric ops, Round, Softplus,
//     Elu, Celu, ...): Cuvil's bf16 precision mode may produce them, and the kernels compute in float anyway.
//   - Identity and Cast work on tensors only (no sequences or optionals); Cast reads and writes strings as
//     src/kernels/ref/number_text.h says.
//   - Dropout is inference-only: in training mode with a ratio > 0 its kernel fails (the result is random).
#include <algorithm>

#include "ir/dim_overflow.h"
#include "ir/low_precision.h"
#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

using DTypes = std::vector<DType>;

const DTypes kFloat = {DType::f16, DType::bf16, DType::f32, DType::f64};
const DTypes kSignedInt = {DType::i8, DType::i16, DType::i32, DType::i64};
const DTypes kUnsignedInt = {DType::u8, DType::u16, DType::u32, DType::u64};

DTypes join(std::initializer_list<DTypes> sets) {
  DTypes r;
  for (const auto& s : sets) r.insert(r.end(), s.begin(), s.end());
  return r;
}

const DTypes kNumeric = join({kFloat, kSignedInt, kUnsignedInt});
const DTypes kSignedNumeric = join({kFloat, kSignedInt});
const DTypes kAll = join({kNumeric, {DType::boolean}});
const DTypes kBool = {DType::boolean};
const DTypes kAllAndStrings = join({kAll, {DType::str}});  // Equal, Where: strings compare and move

void check_dtype(const InferContext& c, size_t i, const DTypes& allowed) {
  DType t = c.input_dtype(i);
  if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) return;
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  c.error("input ", i, " has dtype ", dtype_name(t), "; expected one of ", list);
}

void check_same_dtype_all(const InferContext& c) {
  size_t first = c.num_inputs();
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (first == c.num_inputs()) first = i;
    else infer::expect_same_dtype(c, first, i);
  }
}

// Integer dtypes whose small tensors can carry shape arithmetic (dims values).
bool carries_dims(DType t) { return t == DType::i64 || t == DType::i32; }

// Shape values live on tensors of rank <= 1 (a shape vector or a scalar).
bool output_can_carry_dims(const InferContext& c) {
  const Shape& s = c.output_types()[0].shape;
  return s.rank_known() && s.rank() <= 1;
}

// Elementwise combination of two dims values (rank <= 1 tensors) with broadcasting, when both are known.
template <class Fn>
void propagate_dims2(InferContext& c, Fn fn, bool any_dtype = false) {
  if ((!any_dtype && !carries_dims(c.output_types()[0].dtype)) || !output_can_carry_dims(c)) return;
  const std::vector<Dim>* a = c.input_dims_value(0);
  const std::vector<Dim>* b = c.input_dims_value(1);
  if (!a || !b) return;
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return;
  std::vector<Dim> out;
  try {
    for (size_t k = 0; k < n; ++k) {
      std::optional<Dim> d = fn((*a)[a->size() == 1 ? 0 : k], (*b)[b->size() == 1 ? 0 : k]);
      if (!d) return;
      out.push_back(*d);
    }
  } catch (const DimOverflow&) {
    return;  // the values wrap at run time (ONNX integer arithmetic); they are no dims to track
  }
  c.set_output_dims_value(0, std::move(out));
}

// Unary ops: same dtype and shape as the input; output element i depends on input element i only.
void unary(OpSchema& s, const DTypes& allowed) {
  s.inputs(1, 1).outputs(1, 1).allow_inplace(0, 0).infer_with([allowed](InferContext& c) {
    check_dtype(c, 0, allowed);
    infer::same_as_input(c);
  });
}

// Float activations with one float attribute, alpha.
void unary_with_alpha(OpSchema& s, double alpha) {
  s.attr("alpha", AttrKind::Float, alpha);
  unary(s, kFloat);
}

// Unary predicates: float input, bool output.
void unary_predicate(OpSchema& s, const DTypes& allowed) {
  s.inputs(1, 1).outputs(1, 1).allow_inplace(0, 0).infer_with([allowed](InferContext& c) {
    check_dtype(c, 0, allowed);
    c.set_output(0, DType::boolean, c.input_shape(0));
  });
}

// Binary ops with numpy broadcasting and equal input dtypes; `bool_out` for comparisons and logic.
void binary(OpSchema& s, const DTypes& allowed, bool bool_out) {
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).infer_with([allowed, bool_out](InferContext& c) {
    check_dtype(c, 0, allowed);
    infer::expect_same_dtype(c, 0, 1);
    infer::broadcast_inputs(c, bool_out ? std::optional<DType>(DType::boolean) : std::nullopt);
  });
}

// Add/Sub/Mul/Div: binary arithmetic that also carries shape arithmetic on small int tensors.
template <class Fn>
void arithmetic(OpSchema& s, Fn dims_fn) {
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).infer_with([dims_fn](InferContext& c) {
    check_dtype(c, 0, kNumeric);
    infer::expect_same_dtype(c, 0, 1);
    infer::broadcast_inputs(c);
    propagate_dims2(c, dims_fn);
  });
}

// Max/Min/Sum/Mean: one or more inputs of one dtype, broadcast together.
void variadic(OpSchema& s, const DTypes& allowed) {
  s.inputs(1, -1).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).infer_with([allowed](InferContext& c) {
    if (c.num_inputs() == 0) c.error("needs at least one input");
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.error("input ", i, " is missing; every input is required");
    check_dtype(c, 0, allowed);
    check_same_dtype_all(c);
    infer::broadcast_inputs(c);
  });
}

// Adds `extra` to the inference the schema already has, to run after it.
template <class Fn>
void then_infer(OpSchema& s, Fn extra) {
  auto base = s.infer;
  s.infer_with([base, extra](InferContext& c) {
    base(c);
    extra(c);
  });
}

// Max/Min of dims values (a variadic fold), for shape arithmetic.
void propagate_dims_fold(InferContext& c, Dim (*fn)(const Dim&, const Dim&)) {
  if (!carries_dims(c.output_types()[0].dtype) || !output_can_carry_dims(c)) return;
  std::vector<Dim> acc;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const std::vector<Dim>* v = c.input_dims_value(i);
    if (!v) return;
    if (i == 0) {
      acc = *v;
      continue;
    }
    size_t n = std::max(acc.size(), v->size());
    if ((acc.size() != n && acc.size() != 1) || (v->size() != n && v->size() != 1)) return;
    std::vector<Dim> next;
    try {
      for (size_t k = 0; k < n; ++k) next.push_back(fn(acc[acc.size() == 1 ? 0 : k], (*v)[v->size() == 1 ? 0 : k]));
    } catch (const DimOverflow&) {
      return;  // see propagate_dims2
    }
    acc = std::move(next);
  }
  c.set_output_dims_value(0, std::move(acc));
}

// Checks that a Clip bound / Dropout ratio style input is a single element when its size is known.
void expect_scalar(const InferContext& c, size_t i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (!s.rank_known()) return;
  Dim n = s.numel();
  if (n.is_const() && n.value() != 1)
    c.error(what, " (input ", i, ") must be a scalar, got shape ", s.str());
}

DType cast_target(const InferContext& c) {
  int64_t to = c.i("to");
  auto dt = dtype_from_onnx_id(int(to));
  if (!dt) c.error("attribute 'to' = ", to, " is not a supported data type");
  return *dt;
}

void expect_e8m0_rounding(const InferContext& c) {
  if (!e8m0_rounding_from_name(c.s("round_mode")))
    c.error("round_mode '", c.s("round_mode"), "' is not one of 'up', 'down', 'nearest'");
}

// Cast/CastLike/Identity keep integer shape values (Cast to a float type does not: float math on them is not
// shape arithmetic).
void propagate_dims_cast(InferContext& c, DType to) {
  if (!carries_dims(to) || is_float(c.input_dtype(0))) return;
  if (const std::vector<Dim>* v = c.input_dims_value(0)) c.set_output_dims_value(0, *v);
}

}  // namespace

// ---- unary math

CUVIL_DEFINE_OP(Abs) { unary(s, kNumeric); }
CUVIL_DEFINE_OP(Acos) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Acosh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Asin) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Asinh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Atan) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Atanh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Ceil) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Cos) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Cosh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Erf) { unary(s, kNumeric); }
CUVIL_DEFINE_OP(Exp) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Floor) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Log) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Neg) { unary(s, kSignedNumeric); }
CUVIL_DEFINE_OP(Reciprocal) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Round) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Sign) { unary(s, kNumeric); }
CUVIL_DEFINE_OP(Sin) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Sinh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Sqrt) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Tan) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Tanh) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Not) { unary(s, kBool); }

CUVIL_DEFINE_OP(IsInf) {
  s.attr("detect_negative", AttrKind::Int, int64_t(1)).attr("detect_positive", AttrKind::Int, int64_t(1));
  unary_predicate(s, kFloat);
}

CUVIL_DEFINE_OP(IsNaN) { unary_predicate(s, kFloat); }

// ---- activations

CUVIL_DEFINE_OP(Relu) { unary(s, kSignedNumeric); }
CUVIL_DEFINE_OP(Sigmoid) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Softplus) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Mish) { unary(s, kFloat); }
CUVIL_DEFINE_OP(Softsign) { unary(s, kFloat); }
CUVIL_DEFINE_OP(HardSwish) { unary(s, kFloat); }

// Gelu (ONNX opset 20): x * Phi(x), with Phi exact (erf) or its tanh approximation.
CUVIL_DEFINE_OP(Gelu) {
  s.attr("approximate", AttrKind::String, "none");
  s.inputs(1, 1).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, kFloat);
    const std::string& a = c.s("approximate");
    if (a != "none" && a != "tanh") c.error("approximate must be 'none' or 'tanh', got '", a, "'");
    infer::same_as_input(c);
  });
}
CUVIL_DEFINE_OP(Elu) { unary_with_alpha(s, 1.0); }
CUVIL_DEFINE_OP(LeakyRelu) { unary_with_alpha(s, 0.01); }
CUVIL_DEFINE_OP(ThresholdedRelu) { unary_with_alpha(s, 1.0); }

CUVIL_DEFINE_OP(Selu) {
  s.attr("alpha", AttrKind::Float, 1.67326319217681884765625).attr("gamma", AttrKind::Float, 1.05070102214813232421875);
  unary(s, kFloat);
}

CUVIL_DEFINE_OP(Celu) {
  unary_with_alpha(s, 1.0);
  auto base = s.infer;
  s.infer_with([base](InferContext& c) {
    if (c.f("alpha") == 0) c.error("attribute 'alpha' must not be 0");
    base(c);
  });
}

CUVIL_DEFINE_OP(HardSigmoid) {
  s.attr("alpha", AttrKind::Float, 0.2).attr("beta", AttrKind::Float, 0.5);
  unary(s, kFloat);
}

CUVIL_DEFINE_OP(Shrink) {
  s.attr("bias", AttrKind::Float, 0.0).attr("lambd", AttrKind::Float, 0.5);
  unary(s, kNumeric);
}

// slope broadcasts to X (unidirectionally): the output has X's shape.
CUVIL_DEFINE_OP(PRelu) {
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, join({kFloat, {DType::i32, DType::i64, DType::u32, DType::u64}}));
    infer::expect_same_dtype(c, 0, 1);
    const Shape& x = c.input_shape(0);
    const Shape& slope = c.input_shape(1);
    if (x.rank_known() && slope.rank_known()) {
      if (slope.rank() > x.rank())
        c.error("slope of shape ", slope.str(), " cannot broadcast to X of shape ", x.str(), " (higher rank)");
      size_t off = x.rank() - slope.rank();
      for (size_t i = 0; i < slope.rank(); ++i) {
        const Dim &ds = slope[i], &dx = x[off + i];
        if (ds.is_const() && dx.is_const() && ds.value() != 1 && ds.value() != dx.value())
          c.error("slope of shape ", slope.str(), " cannot broadcast to X of shape ", x.str());
      }
    }
    infer::same_as_input(c);
  });
}

// min and max are optional scalar inputs (opset 11+); a missing bound means no bound.
CUVIL_DEFINE_OP(Clip) {
  s.inputs(1, 3).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, kNumeric);
    for (size_t i = 1; i < c.num_inputs(); ++i) {
      if (!c.has_input(i)) continue;
      infer::expect_same_dtype(c, 0, i);
      expect_scalar(c, i, i == 1 ? "min" : "max");
    }
    infer::same_as_input(c);
  });
}

// ---- binary / variadic with broadcasting

CUVIL_DEFINE_OP(Add) {
  arithmetic(s, [](const Dim& a, const Dim& b) -> std::optional<Dim> { return a + b; });
}

CUVIL_DEFINE_OP(Sub) {
  arithmetic(s, [](const Dim& a, const Dim& b) -> std::optional<Dim> { return a - b; });
}

CUVIL_DEFINE_OP(Mul) {
  arithmetic(s, [](const Dim& a, const Dim& b) -> std::optional<Dim> { return a * b; });
}

// Integer Div truncates (C semantics). On known values we do the same; on symbolic dims, which are sizes and so
// not negative, floordiv is that same result.
CUVIL_DEFINE_OP(Div) {
  arithmetic(s, [](const Dim& a, const Dim& b) -> std::optional<Dim> {
    if (b.is_const() && b.value() == 0) return std::nullopt;
    if (a.is_const() && b.is_const()) {
      if (a.value() == INT64_MIN && b.value() == -1) return std::nullopt;
      return Dim(a.value() / b.value());
    }
    return Dim::floordiv(a, b);
  });
}

// The exponent may have another dtype than the base (opset 12+); the output has the base's dtype.
CUVIL_DEFINE_OP(Pow) {
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, join({kFloat, {DType::i32, DType::i64}}));
    check_dtype(c, 1, kNumeric);
    infer::broadcast_inputs(c);
  });
}

CUVIL_DEFINE_OP(Mod) {
  s.attr("fmod", AttrKind::Int, int64_t(0));
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, kNumeric);
    infer::expect_same_dtype(c, 0, 1);
    int64_t fmod = c.i("fmod");
    if (fmod != 0 && fmod != 1) c.error("attribute 'fmod' must be 0 or 1, got ", fmod);
    infer::broadcast_inputs(c);
  });
}

CUVIL_DEFINE_OP(BitShift) {
  s.required_attr("direction", AttrKind::String);
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).infer_with([](InferContext& c) {
    const std::string& dir = c.s("direction");
    if (dir != "LEFT" && dir != "RIGHT") c.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
    check_dtype(c, 0, join({kSignedInt, kUnsignedInt}));  // signed since opset 28
    infer::expect_same_dtype(c, 0, 1);
    infer::broadcast_inputs(c);
  });
}

// Bitwise ops (opset 18): every integer type, the same type out.
CUVIL_DEFINE_OP(BitwiseAnd) { binary(s, join({kSignedInt, kUnsignedInt}), false); }
CUVIL_DEFINE_OP(BitwiseOr) { binary(s, join({kSignedInt, kUnsignedInt}), false); }
CUVIL_DEFINE_OP(BitwiseXor) { binary(s, join({kSignedInt, kUnsignedInt}), false); }
CUVIL_DEFINE_OP(BitwiseNot) { unary(s, join({kSignedInt, kUnsignedInt})); }

CUVIL_DEFINE_OP(And) { binary(s, kBool, true); }
CUVIL_DEFINE_OP(Or) { binary(s, kBool, true); }
CUVIL_DEFINE_OP(Xor) { binary(s, kBool, true); }
// Equal on shape values feeds Where in Reshape-target computations; it is known where the dims are decidable.
CUVIL_DEFINE_OP(Equal) {
  binary(s, kAllAndStrings, true);
  then_infer(s, [](InferContext& c) {
    if (!carries_dims(c.input_dtype(0))) return;
    propagate_dims2(
        c,
        [](const Dim& a, const Dim& b) -> std::optional<Dim> {
          if (a == b) return Dim(1);
          if (a.is_const() && b.is_const()) return Dim(0);
          return std::nullopt;
        },
        /*any_dtype=*/true);
  });
}
CUVIL_DEFINE_OP(Greater) { binary(s, kNumeric, true); }
CUVIL_DEFINE_OP(GreaterOrEqual) { binary(s, kNumeric, true); }
CUVIL_DEFINE_OP(Less) { binary(s, kNumeric, true); }
CUVIL_DEFINE_OP(LessOrEqual) { binary(s, kNumeric, true); }

CUVIL_DEFINE_OP(Where) {
  s.inputs(3, 3).outputs(1, 1).allow_inplace(0, 0).allow_inplace(1, 0).allow_inplace(2, 0).infer_with(
      [](InferContext& c) {
        check_dtype(c, 0, kBool);
        check_dtype(c, 1, kAllAndStrings);
        infer::expect_same_dtype(c, 1, 2);
        infer::broadcast_inputs(c, c.input_dtype(1));
        // Select between shape values (Reshape targets built with Where(Equal(shape, 0), ...)).
        if (!carries_dims(c.input_dtype(1)) || !output_can_carry_dims(c)) return;
        const std::vector<Dim>* cond = c.input_dims_value(0);
        const std::vector<Dim>* x = c.input_dims_value(1);
        const std::vector<Dim>* y = c.input_dims_value(2);
        if (!cond || !x || !y) return;
        size_t n = std::max({cond->size(), x->size(), y->size()});
        for (auto* v : {cond, x, y})
          if (v->size() != n && v->size() != 1) return;
        std::vector<Dim> out;
        for (size_t k = 0; k < n; ++k) {
          const Dim& ck = (*cond)[cond->size() == 1 ? 0 : k];
          if (!ck.is_const()) return;
          out.push_back(ck.value() != 0 ? (*x)[x->size() == 1 ? 0 : k] : (*y)[y->size() == 1 ? 0 : k]);
        }
        c.set_output_dims_value(0, std::move(out));
      });
}

CUVIL_DEFINE_OP(Max) {
  variadic(s, kNumeric);
  then_infer(s, [](InferContext& c) { propagate_dims_fold(c, &Dim::max); });
}

CUVIL_DEFINE_OP(Min) {
  variadic(s, kNumeric);
  then_infer(s, [](InferContext& c) { propagate_dims_fold(c, &Dim::min); });
}

CUVIL_DEFINE_OP(Sum) { variadic(s, kFloat); }
CUVIL_DEFINE_OP(Mean) { variadic(s, kFloat); }

// ---- type conversion and pass-through

CUVIL_DEFINE_OP(Cast) {
  s.required_attr("to", AttrKind::Int);
  // Cuvil's: a float cast to bf16 rounds to nearest even (1: ONNX Runtime, onnx >= 1.14's test data, which the
  // importer sets from opset 19) or truncates (0: onnx 1.12's test data, and Cuvil's own casts).
  s.attr("round_bf16", AttrKind::Int, int64_t(0));
  // ONNX's (opset 19): casts to float8 clamp out-of-range values to the largest finite one (1) or make them
  // infinity / NaN (0). Only low-precision targets read it (low_precision.h).
  s.attr("saturate", AttrKind::Int, int64_t(1));
  // ONNX's (opset 24): how casts to float8e8m0 round, "up", "down" or "nearest" (low_precision.h).
  s.attr("round_mode", AttrKind::String, "up");
  s.inputs(1, 1).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    DType to = cast_target(c);
    expect_e8m0_rounding(c);
    c.set_output(0, to, c.input_shape(0));
    propagate_dims_cast(c, to);
  });
}

CUVIL_DEFINE_OP(CastLike) {
  s.attr("round_bf16", AttrKind::Int, int64_t(0));  // as Cast's
  s.attr("saturate", AttrKind::Int, int64_t(1));    // as Cast's
  s.attr("round_mode", AttrKind::String, "up");     // as Cast's
  s.inputs(2, 2).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    DType to = c.input_dtype(1);
    expect_e8m0_rounding(c);
    c.set_output(0, to, c.input_shape(0));
    propagate_dims_cast(c, to);
  });
}

CUVIL_DEFINE_OP(Identity) {
  s.inputs(1, 1).outputs(1, 1).allow_inplace(0, 0).infer_with([](InferContext& c) {
    infer::same_as_input(c);
    if (const std::vector<Dim>* v = c.input_dims_value(0)) c.set_output_dims_value(0, *v);
  });
}

// Inputs: data, ratio (optional scalar float), training_mode (optional scalar bool). Outputs: output, mask
// (optional, bool). `seed` only matters for random (training) dropout, which Cuvil does not run.
CUVIL_DEFINE_OP(Dropout) {
  s.attr("seed", AttrKind::Int, int64_t(0));
  s.inputs(1, 3).outputs(1, 2).allow_inplace(0, 0).infer_with([](InferContext& c) {
    check_dtype(c, 0, kFloat);
    if (c.has_input(1)) {
      check_dtype(c, 1, kFloat);
      expect_scalar(c, 1, "ratio");
    }
    if (c.has_input(2)) {
      check_dtype(c, 2, kBool);
      expect_scalar(c, 2, "training_mode");
    }
    infer::same_as_input(c);
    c.set_output(1, DType::boolean, c.input_shape(0));
  });
}

}  // namespace cuvil
