// ONNX's optimizer steps (domain ai.onnx.preview.training, opset 1: Adagrad, Momentum, Adam), written out as
// elementwise ops: one update of n tensors at once. Inputs: R (the learning rate, a scalar), T (the update count,
// an int64 scalar), then n tensors per group (X, G, then the optimizer's state); outputs: the new X, then the new
// state, per group. Arithmetic in X's type, in the order of onnx's reference implementation (which computes some
// steps in double: results agree to float rounding). Gradient (the autodiff op) stays out: it needs a backward
// graph, not an update rule.
#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

Value* op(ConvertContext& c, OpKind kind, std::vector<Value*> inputs) {
  return c.emit_temp(kind, std::move(inputs), {})->output(0);
}

// A scalar of `like`'s type (a double constant cast like it: exact for f64 tensors, rounded once for f32).
Value* scalar_like(ConvertContext& c, double v, Value* like, const char* hint) {
  return op(c, OpKind::CastLike, {c.const_tensor(Tensor::scalar<double>(v), hint), like});
}

// 1 - a for a float attribute, in float as the attribute's own type (and the reference) computes it.
double one_minus(double a) { return double(1.f - float(a)); }

double float_attr(ConvertContext& c, const char* name, std::optional<double> fallback) {
  auto a = c.take_attr(name);
  if (!a) {
    if (!fallback) c.error("attribute '", name, "' is required");
    return *fallback;
  }
  if (a->kind() == AttrKind::Float) return a->f();
  if (a->kind() == AttrKind::Int) return double(a->i());
  c.error("attribute '", name, "' must be a float");
}

// The update's n, from the input count (2 + n per group); every input present.
size_t tensors_per_group(ConvertContext& c, size_t groups) {
  size_t count = c.inputs().size();
  if (count < 2 + groups || (count - 2) % groups != 0)
    c.error("expects R, T and ", groups, " groups of equally many tensors; got ", count, " inputs");
  for (size_t i = 0; i < count; ++i)
    if (!c.input(i)) c.error("input ", i, " is omitted; every input is required");
  return (count - 2) / groups;
}

// `kind` over `inputs` as the ONNX node's output `index`, or as a fresh value where the node leaves it off.
Value* output(ConvertContext& c, size_t index, OpKind kind, std::vector<Value*> inputs) {
  if (index >= c.output_names().size()) return op(c, kind, std::move(inputs));
  return c.graph().add_node(kind, std::move(inputs), {c.output_names()[index]}, {}, c.loc())->output(0);
}

void check_no_other_attrs(ConvertContext& c) {
  for (const auto& [name, a] : c.attrs()) c.error("attribute '", name, "' is not supported");
}

// g + norm_coefficient * x: the gradient with the L2 regularization term's.
Value* regularized(ConvertContext& c, Value* x, Value* g, double norm_coefficient) {
  return op(c, OpKind::Add, {op(c, OpKind::Mul, {scalar_like(c, norm_coefficient, x, "norm_coefficient"), x}), g});
}

void convert_adagrad(ConvertContext& c) {
  double decay = float_attr(c, "decay_factor", 0.0), eps = float_attr(c, "epsilon", 1e-6),
         norm = float_attr(c, "norm_coefficient", 0.0);
  check_no_other_attrs(c);
  size_t n = tensors_per_group(c, 3);
  for (size_t i = 0; i < n; ++i) {
    Value *x = c.input(2 + i), *g = c.input(2 + n + i), *h = c.input(2 + 2 * n + i);
    Value* r = op(c, OpKind::CastLike, {c.input(0), x});
    Value* t = op(c, OpKind::CastLike, {c.input(1), x});
    // r / (1 + t * decay_factor)
    Value* decayed = op(c, OpKind::Mul, {t, scalar_like(c, decay, x, "decay")});
    Value* rate = op(c, OpKind::Div, {r, op(c, OpKind::Add, {scalar_like(c, 1.0, x, "one"), decayed})});
    Value* gr = regularized(c, x, g, norm);
    Value* h_new = output(c, n + i, OpKind::Add, {h, op(c, OpKind::Mul, {gr, gr})});
    Value* scale = op(c, OpKind::Add, {op(c, OpKind::Sqrt, {h_new}), scalar_like(c, eps, x, "epsilon")});
    output(c, i, OpKind::Sub, {x, op(c, OpKind::Div, {op(c, OpKind::Mul, {rate, gr}), scale})});
  }
}

void convert_momentum(ConvertContext& c) {
  double alpha = float_attr(c, "alpha", std::nullopt), beta = float_attr(c, "beta", std::nullopt),
         norm = float_attr(c, "norm_coefficient", std::nullopt);
  auto mode = c.take_attr("mode");
  if (!mode || mode->kind() != AttrKind::String) c.error("attribute 'mode' (a string) is required");
  bool nesterov = mode->s() == "nesterov";
  if (!nesterov && mode->s() != "standard") c.error("mode '", mode->s(), "' is not 'standard' or 'nesterov'");
  check_no_other_attrs(c);
  size_t n = tensors_per_group(c, 3);
  Value* started = op(c, OpKind::Greater, {c.input(1), c.const_tensor(Tensor::scalar<int64_t>(0), "zero")});
  for (size_t i = 0; i < n; ++i) {
    Value *x = c.input(2 + i), *g = c.input(2 + n + i), *v = c.input(2 + 2 * n + i);
    Value* r = op(c, OpKind::CastLike, {c.input(0), x});
    Value* a = scalar_like(c, alpha, x, "alpha");
    // The gradient's coefficient is 1 on the first update (T = 0), beta after.
    Value* b = op(c, OpKind::Where, {started, scalar_like(c, beta, x, "beta"), scalar_like(c, 1.0, x, "one")});
    Value* gr = regularized(c, x, g, norm);
    Value* v_new = output(c, n + i, OpKind::Add, {op(c, OpKind::Mul, {a, v}), op(c, OpKind::Mul, {b, gr})});
    Value* step = nesterov ? op(c, OpKind::Add, {gr, op(c, OpKind::Mul, {a, v_new})}) : v_new;
    output(c, i, OpKind::Sub, {x, op(c, OpKind::Mul, {r, step})});
  }
}

void convert_adam(ConvertContext& c) {
  double alpha = float_attr(c, "alpha", 0.9), beta = float_attr(c, "beta", 0.999),
         eps = float_attr(c, "epsilon", 1e-6), norm = float_attr(c, "norm_coefficient", 0.0),
         norm_post = float_attr(c, "norm_coefficient_post", 0.0);
  check_no_other_attrs(c);
  size_t n = tensors_per_group(c, 4);
  Value* started = op(c, OpKind::Greater, {c.input(1), c.const_tensor(Tensor::scalar<int64_t>(0), "zero")});
  for (size_t i = 0; i < n; ++i) {
    Value *x = c.input(2 + i), *g = c.input(2 + n + i), *v = c.input(2 + 2 * n + i), *h = c.input(2 + 3 * n + i);
    Value* r = op(c, OpKind::CastLike, {c.input(0), x});
    Value* t = op(c, OpKind::CastLike, {c.input(1), x});
    Value* one = scalar_like(c, 1.0, x, "one");
    Value* gr = regularized(c, x, g, norm);
    Value* v_new =
        output(c, n + i, OpKind::Add, {op(c, OpKind::Mul, {scalar_like(c, alpha, x, "alpha"), v}),
                                       op(c, OpKind::Mul, {scalar_like(c, one_minus(alpha), x, "one_minus_alpha"), gr})});
    Value* gr2 = op(c, OpKind::Mul, {gr, gr});
    Value* h_new = output(c, 2 * n + i, OpKind::Add,
                          {op(c, OpKind::Mul, {scalar_like(c, beta, x, "beta"), h}),
                           op(c, OpKind::Mul, {scalar_like(c, one_minus(beta), x, "one_minus_beta"), gr2})});
    Value* h_sqrt = op(c, OpKind::Add, {op(c, OpKind::Sqrt, {h_new}), scalar_like(c, eps, x, "epsilon")});
    // Bias correction after the first update: r * sqrt(1 - beta^t) / (1 - alpha^t); r itself at t = 0.
    auto one_minus_pow = [&](double base, const char* hint) {
      return op(c, OpKind::Sub, {one, op(c, OpKind::Pow, {scalar_like(c, base, x, hint), t})});
    };
    Value* corrected = op(c, OpKind::Div, {op(c, OpKind::Mul, {r, op(c, OpKind::Sqrt, {one_minus_pow(beta, "beta")})}),
                                           one_minus_pow(alpha, "alpha")});
    Value* rate = op(c, OpKind::Where, {started, corrected, r});
    Value* x_new = op(c, OpKind::Sub, {x, op(c, OpKind::Mul, {rate, op(c, OpKind::Div, {v_new, h_sqrt})})});
    output(c, i, OpKind::Mul, {scalar_like(c, one_minus(norm_post), x, "one_minus_norm_post"), x_new});
  }
}

}  // namespace

void register_onnx_training(OnnxConverterTable& t) {
  const std::string domain = "ai.onnx.preview.training:";
  t[domain + "Adagrad"] = convert_adagrad;
  t[domain + "Momentum"] = convert_momentum;
  t[domain + "Adam"] = convert_adam;
}

}  // namespace cuvil
