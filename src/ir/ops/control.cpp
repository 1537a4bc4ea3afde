// Op definitions (arity, attributes, shape inference) of the control family: If, Loop, Scan, Assert.
//
// Their regions are typed at compile time through InferContext::infer_region; at run time the executor does not
// infer these nodes but runs their kernels, which execute the regions and hand the results over.
//
// Differences from ONNX (all lenient): a node may list fewer outputs than its region yields (the importer drops
// trailing omitted outputs); the extra region outputs are computed and discarded. Scan accepts negative axes at
// every opset. Scan-8 (batch axis, sequence_lens) is rewritten by the ONNX frontend into Scan-16 form.
#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

// One type for a value that may be either `a` or `b` (the two branches of an If; a loop-carried value before and
// after an iteration). Dims that disagree become fresh; a disagreeing rank becomes unknown.
TensorType merge_types(InferContext& c, const TensorType& a, const TensorType& b, const std::string& what) {
  if (a.dtype != b.dtype)
    c.error(what, " has dtype ", dtype_name(a.dtype), " in one place and ", dtype_name(b.dtype), " in another");
  if (a.shape == b.shape) return a;
  if (!a.shape.rank_known() || !b.shape.rank_known() || a.shape.rank() != b.shape.rank())
    return {a.dtype, Shape::unknown_rank()};
  std::vector<Dim> dims;
  for (size_t i = 0; i < a.shape.rank(); ++i) dims.push_back(a.shape[i] == b.shape[i] ? a.shape[i] : c.fresh_dim());
  return {a.dtype, Shape(dims)};
}

// Fails unless a tensor of this type may hold exactly one element (a condition or a trip count).
void expect_single_element(const InferContext& c, const TensorType& t, const std::string& what) {
  if (!t.shape.rank_known()) return;
  for (const Dim& d : t.shape.dims())
    if (d.is_const() && d.value() != 1) c.error(what, " must hold a single element, got shape ", t.shape.str());
}

// Types a loop body whose carried values may change shape between iterations. The body is inferred with the
// initial types; where an iteration changes a carried value's type, those dims are made fresh and the body is
// inferred once more, so that what the body computes does not depend on the first iteration's shapes. On return
// `in_types` holds the types the body was last inferred with (carried values generalized).
std::vector<TensorType> infer_loop_body(InferContext& c, Graph& body, std::vector<TensorType>& in_types,
                                        size_t in_offset, size_t out_offset, size_t num_carried) {
  std::vector<TensorType> out = c.infer_region(body, in_types);
  bool changed = false;
  for (size_t k = 0; k < num_carried; ++k) {
    TensorType& before = in_types[in_offset + k];
    const TensorType& after = out.at(out_offset + k);
    std::string what = "loop-carried value " + std::to_string(k) + " ('" + body.inputs()[in_offset + k]->name() + "')";
    if (before.dtype != after.dtype)
      c.error(what, " has dtype ", dtype_name(before.dtype), " entering the body but ", dtype_name(after.dtype),
              " leaving it");
    if (before != after) {
      before = merge_types(c, before, after, what);
      changed = true;
    }
  }
  if (changed) out = c.infer_region(body, in_types);
  for (size_t k = 0; k < num_carried; ++k)
    if (in_types[in_offset + k].dtype != out.at(out_offset + k).dtype)
      c.error("loop-carried value ", k, " changes dtype in the body: ", dtype_name(in_types[in_offset + k].dtype),
              " -> ", dtype_name(out.at(out_offset + k).dtype));
  return out;
}

// `elem` with `n` inserted at `axis` (the stacked form of per-iteration values).
Shape insert_dim(const Shape& elem, size_t axis, const Dim& n) {
  std::vector<Dim> dims = elem.dims();
  dims.insert(dims.begin() + std::ptrdiff_t(axis), n);
  return Shape(dims);
}

// Follows Identity nodes back to the value that defines `v`.
const Value* through_identities(const Value* v) {
  while (v->producer() && v->producer()->op() == OpKind::Identity && v->producer()->input(0))
    v = v->producer()->input(0);
  return v;
}

// The number of iterations a Loop runs when inference can tell, else nullopt.
std::optional<Dim> loop_trip_count(InferContext& c, const Graph& body) {
  if (c.has_input(1)) {
    const Tensor* cond = c.input_value(1);
    if (!cond || cond->numel() != 1) return std::nullopt;
    if (!cond->get_i64(0)) return Dim(0);
    // With a constant true cond, the loop runs M times only if the body cannot stop it: its cond output is its
    // cond input, or a constant true.
    const Value* out = through_identities(body.outputs()[0]);
    bool stays_true = out == body.inputs()[1] ||
                      (out->is_constant() && out->constant().numel() == 1 && out->constant().get_i64(0) != 0);
    if (!stays_true) return std::nullopt;
  }
  if (!c.has_input(0)) return std::nullopt;
  const std::vector<Dim>* m = c.input_dims_value(0);
  if (!m || m->size() != 1) return std::nullopt;
  const Dim& trips = (*m)[0];
  if (trips.is_const()) return Dim(std::max<int64_t>(trips.value(), 0));
  if (trips.is_symbol()) return trips;  // a tensor's dim (Shape -> Gather), never negative
  return Dim::max(trips, Dim(0));
}

// Reads and checks an optional per-input / per-output list attribute (empty: all `def`).
std::vector<int64_t> list_attr(const InferContext& c, const char* name, size_t n, int64_t def) {
  std::vector<int64_t> v = c.ints(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n) c.error("attribute '", name, "' has ", v.size(), " entries; expected ", n);
  return v;
}

void infer_if(InferContext& c) {
  infer::expect_dtype(c, 0, {DType::boolean});
  expect_single_element(c, c.input_type(0), "cond");
  Graph& then_g = *c.g("then_branch");
  Graph& else_g = *c.g("else_branch");
  for (Graph* g : {&then_g, &else_g})
    if (!g->inputs().empty()) c.error("region '", g->name(), "' must take no inputs, it takes ", g->inputs().size());
  std::vector<TensorType> t = c.infer_region(then_g, {});
  std::vector<TensorType> e = c.infer_region(else_g, {});
  if (t.size() != e.size())
    c.error("then_branch yields ", t.size(), " outputs but else_branch yields ", e.size());
  if (c.num_outputs() > t.size())
    c.error("has ", c.num_outputs(), " outputs but its branches yield only ", t.size());
  const Tensor* cond = c.input_value(0);
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    TensorType m = merge_types(c, t[i], e[i], "output " + std::to_string(i));
    // A constant condition decides the branch, and with it the exact type.
    if (cond && cond->numel() == 1) m = cond->get_i64(0) ? t[i] : e[i];
    c.set_output(i, m.dtype, m.shape);
  }
}

void infer_loop(InferContext& c) {
  if (!c.has_input(0) && !c.has_input(1))
    c.error("has neither a trip count M nor a condition, so it never terminates");
  if (c.has_input(0)) {
    infer::expect_dtype(c, 0, {DType::i64});
    expect_single_element(c, c.input_type(0), "trip count M");
  }
  if (c.has_input(1)) {
    infer::expect_dtype(c, 1, {DType::boolean});
    expect_single_element(c, c.input_type(1), "cond");
  }
  Graph& body = *c.g("body");
  size_t n = c.num_inputs() > 2 ? c.num_inputs() - 2 : 0;
  for (size_t k = 0; k < n; ++k)
    if (!c.has_input(2 + k)) c.error("loop-carried input ", 2 + k, " is missing");
  if (body.inputs().size() != 2 + n)
    c.error("body takes ", body.inputs().size(), " inputs; expected 2 + ", n,
            " (iteration number, condition, loop-carried values)");
  if (body.outputs().size() < 1 + n)
    c.error("body yields ", body.outputs().size(), " outputs; expected at least 1 + ", n,
            " (condition, loop-carried values)");
  if (c.num_outputs() > body.outputs().size() - 1)
    c.error("has ", c.num_outputs(), " outputs but the body yields only ", body.outputs().size() - 1,
            " loop-carried values and scan outputs");
  std::vector<TensorType> in_types{{DType::i64, Shape()}, {DType::boolean, Shape()}};
  for (size_t k = 0; k < n; ++k) in_types.push_back(c.input_type(2 + k));
  std::vector<TensorType> out = infer_loop_body(c, body, in_types, 2, 1, n);
  if (out[0].dtype != DType::boolean)
    c.error("body's condition output must be bool, got ", dtype_name(out[0].dtype));
  expect_single_element(c, out[0], "body's condition output");
  std::optional<Dim> trips = loop_trip_count(c, body);
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    if (i < n) {
      // Zero iterations return the initial value: the result may be either.
      TensorType m = trips && *trips == Dim(0)
                         ? c.input_type(2 + i)
                         : merge_types(c, in_types[2 + i], out[1 + i], "loop-carried value " + std::to_string(i));
      c.set_output(i, m.dtype, m.shape);
    } else {
      const TensorType& elem = out[1 + i];
      Dim count = trips ? *trips : c.fresh_dim();
      c.set_output(i, elem.dtype, elem.shape.rank_known() ? insert_dim(elem.shape, 0, count) : Shape::unknown_rank());
    }
  }
}

void infer_scan(InferContext& c) {
  Graph& body = *c.g("body");
  int64_t m = c.i("num_scan_inputs");
  if (m < 1 || m > int64_t(c.num_inputs()))
    c.error("num_scan_inputs is ", m, " but must be in [1, ", c.num_inputs(), "] (the number of inputs)");
  size_t num_scan = size_t(m), n = c.num_inputs() - num_scan;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (!c.has_input(i)) c.error("input ", i, " is missing (Scan has no optional inputs)");
  if (body.inputs().size() != n + num_scan)
    c.error("body takes ", body.inputs().size(), " inputs; expected ", n, " states + ", num_scan, " scan inputs");
  if (body.outputs().size() < n)
    c.error("body yields ", body.outputs().size(), " outputs; expected at least the ", n, " states");
  size_t k_outs = body.outputs().size() - n;
  if (c.num_outputs() > n + k_outs)
    c.error("has ", c.num_outputs(), " outputs but the body yields only ", n + k_outs);
  std::vector<int64_t> in_axes = list_attr(c, "scan_input_axes", num_scan, 0);
  std::vector<int64_t> in_dirs = list_attr(c, "scan_input_directions", num_scan, 0);
  std::vector<int64_t> out_axes = list_attr(c, "scan_output_axes", k_outs, 0);
  std::vector<int64_t> out_dirs = list_attr(c, "scan_output_directions", k_outs, 0);
  for (int64_t d : in_dirs)
    if (d != 0 && d != 1) c.error("scan_input_directions entries must be 0 or 1, got ", d);
  for (int64_t d : out_dirs)
    if (d != 0 && d != 1) c.error("scan_output_directions entries must be 0 or 1, got ", d);

  std::vector<TensorType> in_types;
  for (size_t k = 0; k < n; ++k) in_types.push_back(c.input_type(k));
  // Every scan input must have the same length along its scan axis; a constant wins over a symbol.
  std::optional<Dim> len;
  for (size_t j = 0; j < num_scan; ++j) {
    size_t idx = n + j;
    int64_t r = int64_t(c.input_rank(idx));
    if (r < 1) c.error("scan input ", j, " must have rank >= 1, got a scalar");
    size_t axis = size_t(infer::normalize_axis(c, in_axes[j], r));
    const Shape& s = c.input_shape(idx);
    const Dim& d = s[axis];
    if (!len || (!len->is_const() && d.is_const())) len = d;
    else if (len->is_const() && d.is_const() && len->value() != d.value())
      c.error("scan inputs have different lengths along their scan axes: ", len->value(), " and ", d.value(),
              " (scan input ", j, ")");
    std::vector<Dim> elem = s.dims();
    elem.erase(elem.begin() + std::ptrdiff_t(axis));
    in_types.push_back({c.input_dtype(idx), Shape(elem)});
  }
  std::vector<TensorType> out = infer_loop_body(c, body, in_types, 0, 0, n);
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    if (i < n) {
      TensorType t = len->is_const() && len->value() == 0
                         ? c.input_type(i)
                         : merge_types(c, in_types[i], out[i], "state " + std::to_string(i));
      c.set_output(i, t.dtype, t.shape);
    } else {
      const TensorType& elem = out[i];
      size_t k = i - n;
      if (!elem.shape.rank_known()) {
        c.set_output(i, elem.dtype, Shape::unknown_rank());
        continue;
      }
      size_t axis = size_t(infer::normalize_axis(c, out_axes[k], int64_t(elem.shape.rank()) + 1));
      c.set_output(i, elem.dtype, insert_dim(elem.shape, axis, *len));
    }
  }
}

}  // namespace

CUVIL_DEFINE_OP(If) {
  s.inputs(1, 1)
      .outputs(0, -1)
      .required_attr("then_branch", AttrKind::Graph)
      .required_attr("else_branch", AttrKind::Graph)
      .infer_with(infer_if);
}

// Inputs: M (optional), cond (optional), loop-carried initial values. Outputs: final loop-carried values, then
// scan outputs (per-iteration values stacked along a new axis 0).
CUVIL_DEFINE_OP(Loop) {
  s.inputs(0, -1).outputs(0, -1).required_attr("body", AttrKind::Graph).infer_with(infer_loop);
}

// Inputs: initial states, then num_scan_inputs scan inputs. Outputs: final states, then scan outputs.
CUVIL_DEFINE_OP(Scan) {
  s.inputs(1, -1)
      .outputs(0, -1)
      .required_attr("body", AttrKind::Graph)
      .required_attr("num_scan_inputs", AttrKind::Int)
      .attr("scan_input_axes", AttrKind::Ints, std::vector<int64_t>{})
      .attr("scan_input_directions", AttrKind::Ints, std::vector<int64_t>{})
      .attr("scan_output_axes", AttrKind::Ints, std::vector<int64_t>{})
      .attr("scan_output_directions", AttrKind::Ints, std::vector<int64_t>{})
      .infer_with(infer_scan);
}

// A run-time check: the run fails with CheckFailed (the model's own exception: `exception`, a Python qualified
// class name, and `message`; the node's location names the source line) unless every element of `cond` is true.
// Not an ONNX op. It has no outputs and side effects: passes keep it, and fold it away only when `cond` is a
// constant that holds (a constant false one stays and fails every run that reaches it).
CUVIL_DEFINE_OP(Assert) {
  s.inputs(1, 1)
      .outputs(0, 0)
      .attr("message", AttrKind::String, std::string())
      .attr("exception", AttrKind::String, std::string("builtins.AssertionError"))
      .has_side_effects()
      .infer_with([](InferContext& c) { infer::expect_dtype(c, 0, {DType::boolean}); });
}

}  // namespace cuvil
