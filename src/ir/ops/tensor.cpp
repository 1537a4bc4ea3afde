// Op definitions (arity, attributes, shape inference) of the tensor family: shape manipulation, data movement,
// indexing and generators.
//
// Shape tensors matter most here: Shape, Gather, Concat, Slice, Squeeze/Unsqueeze, Reshape and Flatten pass the
// (possibly symbolic) contents of small int tensors along as dims values, and the ops whose output shape is read
// from an input (Reshape, Expand, Tile, ConstantOfShape, Range, Slice, Pad, OneHot) use them, so that
// Reshape(x, Concat(Shape(x)[0:1], [-1])) types as [batch, 3*h*w] instead of fresh dims.
//
// A symbolic dim in a shape must equal the run-time size for every binding of its symbols (the memory plan sizes
// buffers from it), so where an exact expression is not known the dim is fresh, never a guess.
//
// Differences from ONNX: none in semantics. String and complex tensors do not exist in Cuvil.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ir/ops/infer_util.h"
#include "ir/ops/tensor_helpers.h"
#include "ir/ops/transpose.h"

namespace cuvil {

namespace {

using infer::expect_dtype;
using infer::normalize_axis;

// Symbolic dims are never negative, and neither are sums and products of them; an expression with a minus sign
// (seq - 1, from shape arithmetic) may be.
bool maybe_negative(const Dim& d) { return d.is_const() ? d.value() < 0 : d.str().find('-') != std::string::npos; }

// The contents of int input i as int64s when every element is known and constant (a constant, a run-time value,
// or a dims value without symbols).
std::optional<std::vector<int64_t>> known_ints(InferContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  if (const Tensor* t = c.input_value(i)) {
    if (is_float(t->dtype())) return std::nullopt;
    return t->to_i64_vector();
  }
  if (const std::vector<Dim>* d = c.input_dims_value(i)) {
    std::vector<int64_t> v;
    for (const Dim& x : *d) {
      if (!x.is_const()) return std::nullopt;
      v.push_back(x.value());
    }
    return v;
  }
  return std::nullopt;
}

// The element count of a rank-1 input when its length is known.
std::optional<int64_t> known_length(const InferContext& c, size_t i) {
  const Shape& s = c.input_shape(i);
  if (!s.rank_known()) return std::nullopt;
  if (s.rank() == 0) return 1;
  if (s.rank() == 1 && s[0].is_const()) return s[0].value();
  return std::nullopt;
}

// Inputs that carry a list of ints (shape, axes, pads, ...) must be 1-D.
void expect_rank1(const InferContext& c, size_t i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (s.rank_known() && s.rank() != 1) c.error(what, " (input ", i, ") must be a 1-D tensor, got shape ", s.str());
}

// unknown_ok: a 1-D shape of unknown length passes too (the kernel checks it holds one element), as ONNX Runtime
// runs Range on the [1]-shaped values an If merges with others (AffineGrid's function body).
void expect_scalar_like(const InferContext& c, size_t i, const char* what, bool unknown_ok = false) {
  const Shape& s = c.input_shape(i);
  if (!s.rank_known()) return;
  if (s.rank() == 0) return;
  if (s.rank() == 1 && s[0].is_const() && s[0].value() == 1) return;
  if (unknown_ok && s.rank() == 1 && !s[0].is_const()) return;
  c.error(what, " (input ", i, ") must be a scalar, got shape ", s.str());
}

// Keeps input 0's dims value when the op only reinterprets the same elements (Reshape, Squeeze, ...).
void pass_dims_value(InferContext& c) {
  if (const std::vector<Dim>* v = c.input_dims_value(0)) {
    const TensorType& out = c.output_types()[0];
    if (out.shape.rank_known() && out.shape.rank() <= 1) c.set_output_dims_value(0, *v);
  }
}

// Merges two dims that must be equal (Concat's other axes, GatherND's batch dims): a constant wins over a symbol.
Dim unify(const InferContext& c, const Dim& a, const Dim& b, const char* what) {
  if (a == b) return a;
  if (a.is_const() && b.is_const()) c.error(what, ": ", a.value(), " != ", b.value());
  return a.is_const() ? a : b;
}

// numel(in) / product(out without `skip`): Reshape's -1. Equal factors cancel first, so that symbolic dims stay
// readable: [b, 3, h, w] -> [b, -1] gives 3*h*w, [b*s, 768] -> [b, s, 12, -1] gives 64.
Dim infer_minus_one(const InferContext& c, const std::vector<Dim>& in, const std::vector<Dim>& out, size_t skip) {
  int64_t num_c = 1, den_c = 1;
  std::vector<Dim> num, den;
  for (const Dim& d : in) {
    if (d.is_const()) num_c *= d.value();
    else num.push_back(d);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == skip) continue;
    if (out[i].is_const()) den_c *= out[i].value();
    else den.push_back(out[i]);
  }
  if (den_c == 0) c.error("cannot infer the -1 dim: the other dims of the new shape have 0 elements");
  for (auto it = den.begin(); it != den.end();) {
    auto m = std::find(num.begin(), num.end(), *it);
    if (m != num.end()) {
      num.erase(m);
      it = den.erase(it);
    } else {
      ++it;
    }
  }
  // What is left of the denominator may be the product of several numerator dims (or the reverse).
  if (!den.empty() && num.size() <= 12) {
    Dim dp = dims_product(den);
    for (uint32_t mask = 1; mask < (1u << num.size()); ++mask) {
      std::vector<Dim> pick, rest;
      for (size_t k = 0; k < num.size(); ++k) (mask >> k & 1 ? pick : rest).push_back(num[k]);
      if (dims_product(pick) == dp) {
        num = rest;
        den.clear();
        break;
      }
    }
  }
  if (den.empty() && num.empty()) {
    if (num_c % den_c != 0)
      c.error("cannot reshape ", num_c, " elements: the other dims of the new shape multiply to ", den_c);
    return Dim(num_c / den_c);
  }
  if (den.empty() && num_c % den_c == 0) return Dim(num_c / den_c) * dims_product(num);
  return Dim::floordiv(Dim(num_c) * dims_product(num), Dim(den_c) * dims_product(den));
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze: same elements, new dims

void infer_reshape(InferContext& c) {
  expect_dtype(c, 1, {DType::i64});
  expect_rank1(c, 1, "shape");
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  bool allowzero = c.i("allowzero") != 0;
  const std::vector<Dim>* target = c.input_dims_value(1);
  if (!target) {
    auto n = known_length(c, 1);
    c.set_output(0, dt, n ? infer::fresh_shape(c, size_t(*n)) : Shape::unknown_rank());
    return;
  }
  std::vector<Dim> out = *target;
  int64_t minus_one = -1;
  bool has_zero = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_const()) continue;
    int64_t v = out[i].value();
    if (v == -1) {
      if (minus_one >= 0) c.error("the new shape ", dims_str(*target), " has more than one -1");
      minus_one = int64_t(i);
    } else if (v == 0) {
      has_zero = true;
      if (allowzero) continue;
      if (!in.rank_known()) out[i] = c.fresh_dim();
      else if (i >= in.rank())
        c.error("the new shape ", dims_str(*target), " has 0 at index ", i, " (copy the input dim), but the input ",
                in.str(), " has rank ", in.rank());
      else out[i] = in[i];
    } else if (v < -1) {
      c.error("the new shape ", dims_str(*target), " has an invalid dim ", v);
    }
  }
  if (allowzero && has_zero && minus_one >= 0)
    c.error("with allowzero=1 the new shape ", dims_str(*target), " may not contain both 0 and -1");
  if (minus_one >= 0) {
    out[size_t(minus_one)] = in.rank_known() ? infer_minus_one(c, in.dims(), out, size_t(minus_one)) : c.fresh_dim();
  } else if (in.rank_known()) {
    Dim a = in.numel(), b = dims_product(out);
    if (a.is_const() && b.is_const() && a.value() != b.value())
      c.error("cannot reshape ", in.str(), " (", a.value(), " elements) to ", dims_str(out), " (", b.value(),
              " elements)");
  }
  c.set_output(0, dt, Shape(out));
  pass_dims_value(c);
}

void infer_flatten(InferContext& c) {
  const Shape& in = c.input_shape(0);
  int64_t r = int64_t(c.input_rank(0));
  int64_t axis = c.i("axis");
  if (axis < -r || axis > r) c.error("axis ", axis, " is out of range [", -r, ", ", r, "] for rank ", r);
  if (axis < 0) axis += r;
  std::vector<Dim> head(in.dims().begin(), in.dims().begin() + axis);
  std::vector<Dim> tail(in.dims().begin() + axis, in.dims().end());
  c.set_output(0, c.input_dtype(0), Shape({dims_product(head), dims_product(tail)}));
}

void infer_squeeze(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  if (c.has_input(1)) {
    expect_dtype(c, 1, {DType::i64});
    expect_rank1(c, 1, "axes");
  }
  if (!in.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank());
  std::vector<bool> drop(size_t(r), false);
  if (c.has_input(1)) {
    auto axes = known_ints(c, 1);
    if (!axes) {
      c.set_output(0, dt, Shape::unknown_rank());
      return;
    }
    for (int64_t a : *axes) {
      int64_t k = normalize_axis(c, a, r);
      if (drop[size_t(k)]) c.error("axes lists axis ", a, " twice");
      const Dim& d = in[size_t(k)];
      if (d.is_const() && d.value() != 1)
        c.error("cannot squeeze axis ", a, " of ", in.str(), ": its size is ", d.value(), ", not 1");
      drop[size_t(k)] = true;
    }
  } else {
    for (int64_t k = 0; k < r; ++k) {
      const Dim& d = in[size_t(k)];
      if (!d.is_const()) {
        // Whether a symbolic dim is 1 is only known at run time, and with it the output rank.
        c.set_output(0, dt, Shape::unknown_rank());
        return;
      }
      drop[size_t(k)] = d.value() == 1;
    }
  }
  std::vector<Dim> out;
  for (int64_t k = 0; k < r; ++k)
    if (!drop[size_t(k)]) out.push_back(in[size_t(k)]);
  c.set_output(0, dt, Shape(out));
  pass_dims_value(c);
}

void infer_unsqueeze(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::i64});
  // A scalar names one axis: ONNX's reference and ONNX Runtime accept it (AffineGrid's function body passes one).
  if (const Shape& as = c.input_shape(1); as.rank_known() && as.rank() > 1)
    c.error("axes (input 1) must be a 1-D tensor or a scalar, got shape ", as.str());
  auto axes = known_ints(c, 1);
  if (!axes || !in.rank_known()) {
    auto n = known_length(c, 1);
    if (n && in.rank_known()) c.set_output(0, dt, infer::fresh_shape(c, in.rank() + size_t(*n)));
    else c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank() + axes->size());
  std::vector<bool> ones(size_t(r), false);
  for (int64_t a : *axes) {
    int64_t k = normalize_axis(c, a, r);
    if (ones[size_t(k)]) c.error("axes lists axis ", a, " twice");
    ones[size_t(k)] = true;
  }
  std::vector<Dim> out;
  size_t next = 0;
  for (int64_t k = 0; k < r; ++k) out.push_back(ones[size_t(k)] ? Dim(1) : in[next++]);
  c.set_output(0, dt, Shape(out));
  pass_dims_value(c);
}

// ---- Transpose, Concat, Split, Slice

std::vector<int64_t> inferred_perm(const InferContext& c, int64_t r) {
  std::string why;
  auto perm = transpose_perm(c.has("perm") ? &c.ints("perm") : nullptr, r, &why);
  if (!perm) c.error(why);
  return *perm;
}

void infer_transpose(InferContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.rank_known()) {
    if (c.has("perm")) c.set_output(0, c.input_dtype(0), infer::fresh_shape(c, c.ints("perm").size()));
    else c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank());
  std::vector<Dim> out;
  for (int64_t p : inferred_perm(c, r)) out.push_back(in[size_t(p)]);
  c.set_output(0, c.input_dtype(0), Shape(out));
}

void infer_concat(InferContext& c) {
  if (c.num_inputs() == 0) c.error("needs at least one input");
  DType dt = c.input_dtype(0);
  int64_t r = -1;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) c.error("input ", i, " is missing");
    if (c.input_dtype(i) != dt)
      c.error("all inputs must have the same dtype: input 0 is ", dtype_name(dt), ", input ", i, " is ",
              dtype_name(c.input_dtype(i)));
    if (c.input_shape(i).rank_known()) {
      int64_t ri = int64_t(c.input_shape(i).rank());
      if (r >= 0 && ri != r)
        c.error("all inputs must have the same rank: ", c.input_shape(0).str(), " vs ", c.input_shape(i).str());
      r = ri;
    }
  }
  if (r < 0) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  if (r == 0) c.error("cannot concatenate scalars (rank 0)");
  int64_t axis = normalize_axis(c, c.i("axis"), r);
  std::vector<Dim> out;
  bool first = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.rank_known()) {
      if (first) out = infer::fresh_shape(c, size_t(r)).dims();
      else out[size_t(axis)] = c.fresh_dim();
      first = false;
      continue;
    }
    if (first) {
      out = s.dims();
      first = false;
      continue;
    }
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis) out[size_t(d)] = out[size_t(d)] + s[size_t(d)];
      else out[size_t(d)] = unify(c, out[size_t(d)], s[size_t(d)], "inputs differ on a dim other than the axis");
    }
  }
  c.set_output(0, dt, Shape(out));
  if (r == 1) {
    std::vector<Dim> v;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      const std::vector<Dim>* dv = c.input_dims_value(i);
      if (!dv) return;
      v.insert(v.end(), dv->begin(), dv->end());
    }
    c.set_output_dims_value(0, std::move(v));
  }
}

void infer_split(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  size_t n = c.num_outputs();
  if (n == 0) c.error("needs at least one output");
  if (c.has_input(1)) {
    expect_dtype(c, 1, {DType::i64});
    expect_rank1(c, 1, "split");
    auto len = known_length(c, 1);
    if (len && size_t(*len) != n) c.error("split has ", *len, " entries but the node has ", n, " outputs");
  }
  if (!in.rank_known()) {
    for (size_t k = 0; k < n; ++k) c.set_output(k, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank());
  if (r == 0) c.error("cannot split a scalar");
  int64_t axis = normalize_axis(c, c.i("axis"), r);
  const Dim& total = in[size_t(axis)];
  std::vector<Dim> sizes;
  if (c.has_input(1)) {
    // The value first: a split into more parts than a dims value tracks is still sized exactly at run time.
    std::optional<std::vector<Dim>> known;
    if (auto ks = known_ints(c, 1)) known = std::vector<Dim>(ks->begin(), ks->end());
    else if (const std::vector<Dim>* dv = c.input_dims_value(1)) known = *dv;
    const std::vector<Dim>* sv = known ? &*known : nullptr;
    if (sv) {
      if (sv->size() != n) c.error("split has ", sv->size(), " entries but the node has ", n, " outputs");
      Dim sum = 0;
      for (const Dim& d : *sv) {
        if (d.is_const() && d.value() < 0) c.error("split sizes must be >= 0, got ", dims_str(*sv));
        sum = sum + d;
      }
      if (sum.is_const() && total.is_const() && sum.value() != total.value())
        c.error("split sizes ", dims_str(*sv), " add up to ", sum.value(), ", but axis ", axis, " of ", in.str(),
                " has ", total.value());
      sizes = *sv;
    } else {
      for (size_t k = 0; k < n; ++k) sizes.push_back(c.fresh_dim());
    }
  } else if (c.i("num_outputs") > 0) {
    // Split-18's num_outputs: parts of ceil(total / n), the last one what remains (smaller when n does not divide
    // the axis).
    if (c.i("num_outputs") != int64_t(n))
      c.error("num_outputs is ", c.i("num_outputs"), " but the node has ", n, " outputs");
    Dim part = Dim::ceildiv(total, Dim(int64_t(n)));
    if (total.is_const() && part.value() * int64_t(n - 1) > total.value())
      c.error("cannot split axis ", axis, " of ", in.str(), " into ", n, " parts of ", part.value(), " or fewer");
    for (size_t k = 0; k + 1 < n; ++k) sizes.push_back(part);
    sizes.push_back(total - part * Dim(int64_t(n - 1)));
  } else {
    if (total.is_const() && total.value() % int64_t(n) != 0)
      c.error("cannot split axis ", axis, " of ", in.str(), " into ", n, " equal parts");
    for (size_t k = 0; k < n; ++k) sizes.push_back(Dim::floordiv(total, Dim(int64_t(n))));
  }
  std::vector<Dim> offsets;  // for the dims values of split shape tensors
  Dim off = 0;
  for (size_t k = 0; k < n; ++k) {
    std::vector<Dim> dims = in.dims();
    dims[size_t(axis)] = sizes[k];
    c.set_output(k, dt, Shape(dims));
    offsets.push_back(off);
    off = off + sizes[k];
  }
  const std::vector<Dim>* dv = c.input_dims_value(0);
  if (dv && r == 1) {
    for (size_t k = 0; k < n; ++k) {
      if (!offsets[k].is_const() || !sizes[k].is_const()) return;
      int64_t b = offsets[k].value(), e = b + sizes[k].value();
      if (b < 0 || e > int64_t(dv->size())) return;
      c.set_output_dims_value(k, std::vector<Dim>(dv->begin() + b, dv->begin() + e));
    }
  }
}

// One sliced axis' length when the dim or the bounds are symbolic. Returns nullopt where no exact expression is
// known (the caller then makes a fresh dim).
std::optional<Dim> symbolic_slice_len(const Dim& dim, const Dim& start, const Dim& end, int64_t step) {
  if (step <= 0) return std::nullopt;  // backward slices of symbolic axes are rare; keep them fresh
  if (maybe_negative(start) && !start.is_const()) return std::nullopt;
  if (maybe_negative(end) && !end.is_const()) return std::nullopt;
  // Ends at or past INT32_MAX mean "to the end": no axis is that long.
  bool to_end = (end.is_const() && end.value() >= std::numeric_limits<int32_t>::max()) || end == dim;
  Dim s, e;
  bool s_zero = false;
  if (start.is_const() && start.value() < 0) {
    if (to_end) {
      Dim len = Dim::min(Dim(-start.value()), dim);
      return step == 1 ? len : Dim::ceildiv(len, Dim(step));
    }
    s = Dim::max(dim + start, Dim(0));
  } else if (start.is_const() && start.value() == 0) {
    s = Dim(0);
    s_zero = true;
  } else if (to_end && start.is_const()) {
    Dim len = Dim::max(dim - start, Dim(0));
    return step == 1 ? len : Dim::ceildiv(len, Dim(step));
  } else {
    s = Dim::min(start, dim);
  }
  if (to_end) e = dim;
  else if (end.is_const() && end.value() < 0) e = Dim::max(dim + end, Dim(0));
  else e = Dim::min(end, dim);
  Dim len = e - s;
  // s <= dim always; the difference can only be negative when the end is not the axis' end.
  if (!s_zero && !to_end) len = Dim::max(len, Dim(0));
  return step == 1 ? len : Dim::ceildiv(len, Dim(step));
}

void infer_slice(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::i32, DType::i64});
  infer::expect_same_dtype(c, 1, 2);
  expect_rank1(c, 1, "starts");
  expect_rank1(c, 2, "ends");
  for (size_t i : {size_t(3), size_t(4)}) {
    if (!c.has_input(i)) continue;
    infer::expect_same_dtype(c, 1, i);
    expect_rank1(c, i, i == 3 ? "axes" : "steps");
  }
  if (!in.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank());
  const std::vector<Dim>* starts = c.input_dims_value(1);
  const std::vector<Dim>* ends = c.input_dims_value(2);
  std::optional<std::vector<int64_t>> axes, steps;
  if (c.has_input(3)) axes = known_ints(c, 3);
  if (c.has_input(4)) steps = known_ints(c, 4);
  std::vector<Dim> out = in.dims();
  bool axes_known = !c.has_input(3) || axes;
  if (!axes_known) {
    // Any axis may be sliced.
    c.set_output(0, dt, infer::fresh_shape(c, size_t(r)));
    return;
  }
  // Count of (start, end) pairs, from whichever of the four inputs tells it.
  std::optional<int64_t> count = starts ? std::optional<int64_t>(int64_t(starts->size())) : known_length(c, 1);
  if (axes) count = int64_t(axes->size());
  if (!count) {
    c.set_output(0, dt, infer::fresh_shape(c, size_t(r)));
    return;
  }
  auto check_len = [&](size_t i, const char* what, std::optional<int64_t> len) {
    if (len && *len != *count) c.error(what, " has ", *len, " entries, but there are ", *count, " slices");
  };
  check_len(1, "starts", starts ? std::optional<int64_t>(int64_t(starts->size())) : known_length(c, 1));
  check_len(2, "ends", ends ? std::optional<int64_t>(int64_t(ends->size())) : known_length(c, 2));
  if (c.has_input(4)) check_len(4, "steps", steps ? std::optional<int64_t>(int64_t(steps->size())) : known_length(c, 4));
  std::vector<int64_t> ax;
  std::vector<bool> seen(size_t(r), false);
  for (int64_t k = 0; k < *count; ++k) {
    int64_t a = axes ? normalize_axis(c, (*axes)[size_t(k)], r) : k;
    if (!axes && k >= r) c.error(*count, " slices for an input of rank ", r);
    if (seen[size_t(a)]) c.error("axes lists axis ", a, " twice");
    seen[size_t(a)] = true;
    ax.push_back(a);
  }
  if (steps)
    for (int64_t s : *steps)
      if (s == 0) c.error("steps may not be 0");
  std::vector<tensor_ops::SliceRange> ranges;  // when all concrete, for the dims value
  bool all_concrete = true;
  for (int64_t k = 0; k < *count; ++k) {
    size_t a = size_t(ax[size_t(k)]);
    const Dim& d = in[a];
    if (!starts || !ends || (c.has_input(4) && !steps)) {
      out[a] = c.fresh_dim();
      all_concrete = false;
      continue;
    }
    const Dim& s = (*starts)[size_t(k)];
    const Dim& e = (*ends)[size_t(k)];
    int64_t step = steps ? (*steps)[size_t(k)] : 1;
    if (d.is_const() && s.is_const() && e.is_const()) {
      auto rg = tensor_ops::slice_range(d.value(), s.value(), e.value(), step);
      out[a] = Dim(rg.len);
      ranges.push_back(rg);
      continue;
    }
    all_concrete = false;
    auto len = symbolic_slice_len(d, s, e, step);
    out[a] = len ? *len : c.fresh_dim();
  }
  c.set_output(0, dt, Shape(out));
  const std::vector<Dim>* dv = c.input_dims_value(0);
  if (dv && r == 1 && all_concrete && int64_t(dv->size()) == (in[0].is_const() ? in[0].value() : -1)) {
    std::vector<Dim> v;
    if (ranges.empty()) {
      v = *dv;
    } else {
      const auto& rg = ranges[0];
      for (int64_t i = 0; i < rg.len; ++i) v.push_back((*dv)[size_t(rg.start + i * rg.step)]);
    }
    c.set_output_dims_value(0, std::move(v));
  }
}

// ---- Gather family

void infer_gather(InferContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::i32, DType::i64});
  if (!data.rank_known() || !idx.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(data.rank());
  if (r == 0) c.error("data must have rank >= 1");
  int64_t axis = normalize_axis(c, c.i("axis"), r);
  std::vector<Dim> out(data.dims().begin(), data.dims().begin() + axis);
  out.insert(out.end(), idx.dims().begin(), idx.dims().end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  c.set_output(0, dt, Shape(out));
  // Gather(Shape(x), i): pick dims.
  const std::vector<Dim>* dv = c.input_dims_value(0);
  if (dv && r == 1 && idx.rank() <= 1) {
    auto ids = known_ints(c, 1);
    if (!ids) return;
    int64_t n = int64_t(dv->size());
    std::vector<Dim> v;
    for (int64_t i : *ids) {
      if (i < -n || i >= n) c.error("index ", i, " is out of range for axis 0 of size ", n);
      v.push_back((*dv)[size_t(i < 0 ? i + n : i)]);
    }
    c.set_output_dims_value(0, std::move(v));
  }
}

void infer_gather_elements(InferContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  expect_dtype(c, 1, {DType::i32, DType::i64});
  if (data.rank_known() && idx.rank_known()) {
    int64_t r = int64_t(data.rank());
    if (r == 0) c.error("data must have rank >= 1");
    if (idx.rank() != data.rank())
      c.error("indices ", idx.str(), " must have the same rank as data ", data.str());
    normalize_axis(c, c.i("axis"), r);
  }
  c.set_output(0, c.input_dtype(0), idx);
}

void infer_gather_nd(InferContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::i64});
  int64_t b = c.i("batch_dims");
  if (!data.rank_known() || !idx.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(data.rank()), q = int64_t(idx.rank());
  if (r < 1 || q < 1) c.error("data and indices must have rank >= 1, got ", data.str(), " and ", idx.str());
  if (b < 0 || b >= std::min(q, r)) c.error("batch_dims ", b, " must be in [0, min(rank(data), rank(indices)))");
  const Dim& last = idx[size_t(q - 1)];
  if (!last.is_const()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t k = last.value();
  if (k < 1 || k > r - b)
    c.error("the last dim of indices ", idx.str(), " must be in [1, ", r - b, "] for data ", data.str(),
            " and batch_dims ", b);
  std::vector<Dim> out;
  for (int64_t d = 0; d < q - 1; ++d)
    out.push_back(d < b ? unify(c, idx[size_t(d)], data[size_t(d)], "batch dims of data and indices differ")
                        : idx[size_t(d)]);
  for (int64_t d = b + k; d < r; ++d) out.push_back(data[size_t(d)]);
  c.set_output(0, dt, Shape(out));
}

void check_reduction(const InferContext& c) {
  const std::string& red = c.s("reduction");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    c.error("reduction must be 'none', 'add', 'mul', 'max' or 'min', got '", red, "'");
}

void infer_scatter_elements(InferContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  const Shape& upd = c.input_shape(2);
  expect_dtype(c, 1, {DType::i32, DType::i64});
  infer::expect_same_dtype(c, 0, 2);
  check_reduction(c);
  if (data.rank_known() && idx.rank_known()) {
    int64_t r = int64_t(data.rank());
    if (r == 0) c.error("data must have rank >= 1");
    if (idx.rank() != data.rank()) c.error("indices ", idx.str(), " must have the same rank as data ", data.str());
    normalize_axis(c, c.i("axis"), r);
  }
  if (idx.rank_known() && upd.rank_known()) {
    if (idx.rank() != upd.rank()) c.error("updates ", upd.str(), " must have the shape of indices ", idx.str());
    for (size_t d = 0; d < idx.rank(); ++d) unify(c, idx[d], upd[d], "updates and indices differ in shape");
  }
  c.set_output(0, c.input_dtype(0), data);
}

void infer_scatter_nd(InferContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  const Shape& upd = c.input_shape(2);
  expect_dtype(c, 1, {DType::i64});
  infer::expect_same_dtype(c, 0, 2);
  check_reduction(c);
  if (data.rank_known() && idx.rank_known() && upd.rank_known()) {
    int64_t r = int64_t(data.rank()), q = int64_t(idx.rank());
    if (r < 1 || q < 1) c.error("data and indices must have rank >= 1, got ", data.str(), " and ", idx.str());
    const Dim& last = idx[size_t(q - 1)];
    if (last.is_const()) {
      int64_t k = last.value();
      if (k < 1 || k > r) c.error("the last dim of indices ", idx.str(), " must be in [1, ", r, "]");
      std::vector<Dim> want(idx.dims().begin(), idx.dims().end() - 1);
      want.insert(want.end(), data.dims().begin() + k, data.dims().end());
      if (upd.rank() != want.size())
        c.error("updates ", upd.str(), " must have shape ", dims_str(want), " (indices ", idx.str(), ", data ",
                data.str(), ")");
      for (size_t d = 0; d < want.size(); ++d) unify(c, want[d], upd[d], "updates has the wrong shape");
    }
  }
  c.set_output(0, c.input_dtype(0), data);
}

// ---- Expand, Tile, Pad: shapes read from inputs

void infer_expand(InferContext& c) {
  expect_dtype(c, 1, {DType::i64});
  expect_rank1(c, 1, "shape");
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  const std::vector<Dim>* target = c.input_dims_value(1);
  if (!target) {
    auto n = known_length(c, 1);
    if (n && in.rank_known()) c.set_output(0, dt, infer::fresh_shape(c, std::max(in.rank(), size_t(*n))));
    else c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  for (const Dim& d : *target)
    if (d.is_const() && d.value() < 0) c.error("the shape ", dims_str(*target), " has a negative dim");
  c.set_output(0, dt, infer::broadcast(c, in, Shape(*target)));
}

void infer_tile(InferContext& c) {
  expect_dtype(c, 1, {DType::i64});
  expect_rank1(c, 1, "repeats");
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  if (!in.rank_known()) {
    auto n = known_length(c, 1);
    c.set_output(0, dt, n ? infer::fresh_shape(c, size_t(*n)) : Shape::unknown_rank());
    return;
  }
  auto n = known_length(c, 1);
  if (n && *n != int64_t(in.rank()))
    c.error("repeats has ", *n, " entries; it needs one per dim of the input ", in.str());
  const std::vector<Dim>* reps = c.input_dims_value(1);
  if (!reps) {
    c.set_output(0, dt, infer::fresh_shape(c, in.rank()));
    return;
  }
  if (reps->size() != in.rank())
    c.error("repeats has ", reps->size(), " entries; it needs one per dim of the input ", in.str());
  std::vector<Dim> out;
  for (size_t d = 0; d < in.rank(); ++d) {
    const Dim& rep = (*reps)[d];
    if (rep.is_const() && rep.value() < 0) c.error("repeats must be >= 0, got ", dims_str(*reps));
    out.push_back(in[d] * rep);
  }
  c.set_output(0, dt, Shape(out));
}

void infer_pad(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::i64});
  expect_rank1(c, 1, "pads");
  const std::string& mode = c.s("mode");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    c.error("mode must be 'constant', 'reflect', 'edge' or 'wrap', got '", mode, "'");
  if (c.has_input(2)) {
    if (c.input_dtype(2) != dt)
      c.error("constant_value has dtype ", dtype_name(c.input_dtype(2)), " but data has ", dtype_name(dt));
    expect_scalar_like(c, 2, "constant_value");
  }
  if (c.has_input(3)) {
    expect_dtype(c, 3, {DType::i32, DType::i64});
    expect_rank1(c, 3, "axes");
  }
  if (!in.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  size_t r = in.rank();
  // With axes (Pad-18), pads holds a begin and an end per listed axis; the others are not padded.
  std::optional<std::vector<int64_t>> axes;
  if (c.has_input(3)) {
    axes = known_ints(c, 3);
    if (!axes) {
      c.set_output(0, dt, infer::fresh_shape(c, r));
      return;
    }
    for (int64_t& a : *axes) a = normalize_axis(c, a, int64_t(r));
  }
  size_t listed = axes ? axes->size() : r;
  auto n = known_length(c, 1);
  if (n && *n != int64_t(2 * listed)) c.error("pads has ", *n, " entries; data ", in.str(), " needs ", 2 * listed);
  const std::vector<Dim>* given = c.input_dims_value(1);
  if (!given) {
    c.set_output(0, dt, infer::fresh_shape(c, r));
    return;
  }
  if (given->size() != 2 * listed)
    c.error("pads has ", given->size(), " entries; data ", in.str(), " needs ", 2 * listed);
  std::vector<Dim> full(2 * r, Dim(0));
  for (size_t k = 0; k < listed; ++k) {
    size_t d = axes ? size_t((*axes)[k]) : k;
    full[d] = (*given)[k];
    full[d + r] = (*given)[k + listed];
  }
  const std::vector<Dim>* pads = &full;
  std::vector<Dim> out;
  for (size_t d = 0; d < r; ++d) {
    Dim o = in[d] + (*pads)[d] + (*pads)[d + r];
    if (o.is_const() && o.value() < 0)
      c.error("pads ", dims_str(*pads), " remove more than the ", in[d].str(), " elements of axis ", d);
    if (mode != "constant" && in[d].is_const() && in[d].value() == 0 && !(o.is_const() && o.value() == 0))
      c.error("mode '", mode, "' cannot pad axis ", d, ", which is empty");
    out.push_back(o);
  }
  c.set_output(0, dt, Shape(out));
}

// ---- generators

// Range's element count for integers: ceil((limit - start) / delta), at least 0, without overflow.
int64_t int_range_count(const InferContext& c, int64_t st, int64_t li, int64_t de) {
  if (de == 0) c.error("delta may not be 0");
  int64_t diff;
  if (__builtin_sub_overflow(li, st, &diff)) c.error("range from ", st, " to ", li, " is too large");
  return de > 0 ? (diff > 0 ? (diff - 1) / de + 1 : 0) : (diff < 0 ? (diff + 1) / de + 1 : 0);
}

void infer_range(InferContext& c) {
  DType dt = c.input_dtype(0);
  expect_dtype(c, 0, {DType::f32, DType::f64, DType::i16, DType::i32, DType::i64, DType::f16, DType::bf16});
  for (size_t i = 0; i < 3; ++i) {
    infer::expect_same_dtype(c, 0, i);
    expect_scalar_like(c, i, i == 0 ? "start" : i == 1 ? "limit" : "delta", /*unknown_ok=*/true);
  }
  if (is_float(dt)) {
    const Tensor *s = c.input_value(0), *l = c.input_value(1), *d = c.input_value(2);
    if (!s || !l || !d) {
      c.set_output(0, dt, Shape({c.fresh_dim()}));
      return;
    }
    if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1) c.error("start, limit and delta must be scalars");
    // In the input's precision, as the kernel's start + i * delta is; f16 and bf16 in double, as onnx's
    // reference (np.arange on the Python values) is.
    double cnt = visit_dtype(dt, [&]<class T>() -> double {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        T st = s->data<T>()[0], li = l->data<T>()[0], de = d->data<T>()[0];
        if (de == 0) c.error("delta may not be 0");
        return std::ceil(double(li - st) / double(de));
      } else if constexpr (std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>) {
        double st = float(s->data<T>()[0]), li = float(l->data<T>()[0]), de = float(d->data<T>()[0]);
        if (de == 0) c.error("delta may not be 0");
        return std::ceil((li - st) / de);
      } else {
        return 0;
      }
    });
    if (!std::isfinite(cnt)) c.error("start, limit and delta must be finite");
    if (cnt > double(int64_t(1) << 40)) c.error("a range of ", cnt, " elements is too large");
    c.set_output(0, dt, Shape({Dim(cnt > 0 ? int64_t(cnt) : 0)}));
    return;
  }
  auto st = known_ints(c, 0), li = known_ints(c, 1), de = known_ints(c, 2);
  if (st && li && de) {
    if (st->size() != 1 || li->size() != 1 || de->size() != 1) c.error("start, limit and delta must be scalars");
    int64_t n = int_range_count(c, (*st)[0], (*li)[0], (*de)[0]);
    c.set_output(0, dt, Shape({Dim(n)}));
    if (n <= kMaxDimsValueElements) {
      std::vector<Dim> v;
      for (int64_t i = 0; i < n; ++i) v.push_back(Dim((*st)[0] + i * (*de)[0]));
      c.set_output_dims_value(0, std::move(v));
    }
    return;
  }
  // Range(start, n, delta) with a symbolic n, as models build position ids.
  const std::vector<Dim> *sv = c.input_dims_value(0), *lv = c.input_dims_value(1), *dv = c.input_dims_value(2);
  if (sv && lv && dv && sv->size() == 1 && lv->size() == 1 && dv->size() == 1 && (*dv)[0].is_const() &&
      (*sv)[0].is_const() && (*sv)[0].value() <= 0 && (*dv)[0].value() > 0 && !maybe_negative((*lv)[0])) {
    // limit >= 0 >= start, so the count is never negative.
    Dim len = (*lv)[0] - (*sv)[0];
    c.set_output(0, dt, Shape({Dim::ceildiv(len, (*dv)[0])}));
    return;
  }
  c.set_output(0, dt, Shape({c.fresh_dim()}));
}

void infer_constant_of_shape(InferContext& c) {
  expect_dtype(c, 0, {DType::i64});
  expect_rank1(c, 0, "input");
  const Tensor& value = c.t("value");
  if (value.numel() != 1) c.error("value must hold exactly one element, got ", value.type_str());
  DType dt = value.dtype();
  const std::vector<Dim>* dims = c.input_dims_value(0);
  if (!dims) {
    auto n = known_length(c, 0);
    c.set_output(0, dt, n ? infer::fresh_shape(c, size_t(*n)) : Shape::unknown_rank());
    return;
  }
  for (const Dim& d : *dims)
    if (d.is_const() && d.value() < 0) c.error("the shape ", dims_str(*dims), " has a negative dim");
  c.set_output(0, dt, Shape(*dims));
  // ConstantOfShape([n]) with an int value often feeds shape arithmetic.
  if (!is_float(dt) && dims->size() <= 1) {
    Dim n = dims->empty() ? Dim(1) : (*dims)[0];
    if (n.is_const() && n.value() <= kMaxDimsValueElements)
      c.set_output_dims_value(0, std::vector<Dim>(size_t(n.value()), Dim(value.get_i64(0))));
  }
}

DType eye_like_dtype(const InferContext& c) {
  if (!c.has("dtype")) return c.input_dtype(0);
  auto dt = dtype_from_onnx_id(int(c.i("dtype")));
  if (!dt || *dt == DType::str) c.error("dtype ", c.i("dtype"), " is not a supported ONNX element type here");
  return *dt;
}

void infer_eye_like(InferContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.rank_known() && in.rank() != 2) c.error("input must be 2-D, got ", in.str());
  c.set_output(0, eye_like_dtype(c), in.rank_known() ? in : infer::fresh_shape(c, 2));
}

void infer_trilu(InferContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.rank_known() && in.rank() < 2) c.error("input must have rank >= 2, got ", in.str());
  if (c.has_input(1)) {
    expect_dtype(c, 1, {DType::i64});
    expect_scalar_like(c, 1, "k");
  }
  infer::same_as_input(c);
}

void infer_one_hot(InferContext& c) {
  const Shape& idx = c.input_shape(0);
  DType dt = c.input_dtype(2);
  if (c.input_dtype(0) == DType::boolean) c.error("indices must be numeric, got bool");
  if (c.input_dtype(1) == DType::boolean) c.error("depth must be numeric, got bool");
  expect_scalar_like(c, 1, "depth");
  const Shape& vs = c.input_shape(2);
  if (vs.rank_known() && (vs.rank() != 1 || (vs[0].is_const() && vs[0].value() != 2)))
    c.error("values must be a 1-D tensor of [off_value, on_value], got shape ", vs.str());
  if (!idx.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(idx.rank()) + 1;
  int64_t axis = c.i("axis");
  if (axis < -r || axis >= r) c.error("axis ", axis, " is out of range [", -r, ", ", r - 1, "]");
  if (axis < 0) axis += r;
  Dim depth;
  if (const Tensor* t = c.input_value(1)) {
    if (t->numel() != 1) c.error("depth must be a scalar, got ", t->type_str());
    double v = t->get_f64(0);
    if (!(v >= 1) || v > double(int64_t(1) << 40)) c.error("depth must be a positive number, got ", v);
    depth = Dim(int64_t(v));
  } else if (const std::vector<Dim>* dv = c.input_dims_value(1); dv && dv->size() == 1) {
    depth = (*dv)[0];
  } else {
    depth = c.fresh_dim();
  }
  std::vector<Dim> out = idx.dims();
  out.insert(out.begin() + axis, depth);
  c.set_output(0, dt, Shape(out));
}

// ---- data-dependent sizes: the kernels allocate these outputs

void infer_non_zero(InferContext& c) {
  const Shape& in = c.input_shape(0);
  c.set_output(0, DType::i64, in.rank_known() ? Shape({Dim(int64_t(in.rank())), c.fresh_dim()})
                                              : infer::fresh_shape(c, 2));
}

void infer_compress(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  expect_dtype(c, 1, {DType::boolean});
  expect_rank1(c, 1, "condition");
  if (!c.has("axis")) {
    c.set_output(0, dt, Shape({c.fresh_dim()}));
    return;
  }
  if (!in.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return;
  }
  int64_t r = int64_t(in.rank());
  if (r == 0) c.error("input must have rank >= 1");
  int64_t axis = normalize_axis(c, c.i("axis"), r);
  std::vector<Dim> out = in.dims();
  out[size_t(axis)] = c.fresh_dim();
  c.set_output(0, dt, Shape(out));
}

void infer_unique(InferContext& c) {
  const Shape& in = c.input_shape(0);
  DType dt = c.input_dtype(0);
  int64_t sorted = c.i("sorted");
  if (sorted != 0 && sorted != 1) c.error("sorted must be 0 or 1, got ", sorted);
  Dim u = c.fresh_dim();  // the number of unique elements or slices
  if (!c.has("axis")) {
    c.set_output(0, dt, Shape({u}));
    c.set_output(2, DType::i64, Shape({in.rank_known() ? in.numel() : c.fresh_dim()}));
  } else if (!in.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    c.set_output(2, DType::i64, Shape({c.fresh_dim()}));
  } else {
    int64_t r = int64_t(in.rank());
    if (r == 0) c.error("input must have rank >= 1 to take unique slices along an axis");
    int64_t axis = normalize_axis(c, c.i("axis"), r);
    std::vector<Dim> out = in.dims();
    out[size_t(axis)] = u;
    c.set_output(0, dt, Shape(out));
    c.set_output(2, DType::i64, Shape({in[size_t(axis)]}));
  }
  c.set_output(1, DType::i64, Shape({u}));
  c.set_output(3, DType::i64, Shape({u}));
}

// ---- layout rearrangements

int64_t blocksize(const InferContext& c) {
  int64_t b = c.i("blocksize");
  if (b < 1) c.error("blocksize must be >= 1, got ", b);
  return b;
}

void infer_depth_to_space(InferContext& c) {
  const Shape& in = c.input_shape(0);
  int64_t b = blocksize(c);
  const std::string& mode = c.s("mode");
  if (mode != "DCR" && mode != "CRD") c.error("mode must be 'DCR' or 'CRD', got '", mode, "'");
  if (!in.rank_known()) {
    c.set_output(0, c.input_dtype(0), infer::fresh_shape(c, 4));
    return;
  }
  if (in.rank() != 4) c.error("input must be 4-D [N, C, H, W], got ", in.str());
  if (in[1].is_const() && in[1].value() % (b * b) != 0)
    c.error("channels ", in[1].value(), " are not divisible by blocksize^2 = ", b * b);
  c.set_output(0, c.input_dtype(0), Shape({in[0], Dim::floordiv(in[1], Dim(b * b)), in[2] * b, in[3] * b}));
}

void infer_space_to_depth(InferContext& c) {
  const std::string& mode = c.s("mode");
  if (mode != "DCR" && mode != "CRD") c.error("mode must be 'DCR' or 'CRD', got '", mode, "'");
  const Shape& in = c.input_shape(0);
  int64_t b = blocksize(c);
  if (!in.rank_known()) {
    c.set_output(0, c.input_dtype(0), infer::fresh_shape(c, 4));
    return;
  }
  if (in.rank() != 4) c.error("input must be 4-D [N, C, H, W], got ", in.str());
  for (size_t d : {size_t(2), size_t(3)})
    if (in[d].is_const() && in[d].value() % b != 0)
      c.error("spatial dim ", in[d].value(), " of ", in.str(), " is not divisible by blocksize ", b);
  c.set_output(0, c.input_dtype(0),
               Shape({in[0], in[1] * (b * b), Dim::floordiv(in[2], Dim(b)), Dim::floordiv(in[3], Dim(b))}));
}

void infer_reverse_sequence(InferContext& c) {
  const Shape& in = c.input_shape(0);
  expect_dtype(c, 1, {DType::i64});
  expect_rank1(c, 1, "sequence_lens");
  int64_t ba = c.i("batch_axis"), ta = c.i("time_axis");
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    c.error("batch_axis and time_axis must be 0 and 1 in some order, got ", ba, " and ", ta);
  if (in.rank_known()) {
    if (in.rank() < 2) c.error("input must have rank >= 2, got ", in.str());
    const Shape& sl = c.input_shape(1);
    if (sl.rank_known() && sl.rank() == 1) unify(c, sl[0], in[size_t(ba)], "sequence_lens must have batch_size entries");
  }
  infer::same_as_input(c);
}

}  // namespace

std::optional<std::vector<int64_t>> transpose_perm(const std::vector<int64_t>* given, int64_t r, std::string* why) {
  std::vector<int64_t> perm;
  if (!given) {
    for (int64_t k = r - 1; k >= 0; --k) perm.push_back(k);
    return perm;
  }
  auto no = [&](const auto&... args) -> std::optional<std::vector<int64_t>> {
    if (why) *why = str_cat(args...);
    return std::nullopt;
  };
  perm = *given;
  if (int64_t(perm.size()) != r) return no("perm has ", perm.size(), " entries for an input of rank ", r);
  std::vector<bool> seen(size_t(r), false);
  for (int64_t& p : perm) {
    if (p < -r || p >= r) return no("perm entry ", p, " is out of range for rank ", r);
    if (p < 0) p += r;
    if (seen[size_t(p)]) return no("perm is not a permutation: ", p, " appears twice");
    seen[size_t(p)] = true;
  }
  return perm;
}

std::optional<std::vector<int64_t>> transpose_perm(const Node& n, int64_t r) {
  if (r < 0) return std::nullopt;
  return transpose_perm(n.has_attr("perm") ? &n.attrs().at("perm").ints() : nullptr, r);
}

CUVIL_DEFINE_OP(Reshape) {
  s.inputs(2, 2).attr("allowzero", AttrKind::Int, int64_t(0)).infer_with(infer_reshape).output_views_input(0, 0);
}

CUVIL_DEFINE_OP(Shape) {
  // `end` has no default: absent means "through the last axis".
  s.inputs(1, 1)
      .attr("start", AttrKind::Int, int64_t(0))
      .attr("end", AttrKind::Int, int64_t(std::numeric_limits<int64_t>::max()))
      .infer_with([](InferContext& c) {
        const Shape& in = c.input_shape(0);
        if (!in.rank_known()) {
          c.set_output(0, DType::i64, Shape({c.fresh_dim()}));
          return;
        }
        int64_t r = int64_t(in.rank());
        auto rg = tensor_ops::shape_axis_range(r, c.i("start"), c.has("end"), c.i("end"));
        c.set_output(0, DType::i64, Shape({Dim(rg.end - rg.begin)}));
        c.set_output_dims_value(0, std::vector<Dim>(in.dims().begin() + rg.begin, in.dims().begin() + rg.end));
      });
}

CUVIL_DEFINE_OP(Size) {
  s.inputs(1, 1).infer_with([](InferContext& c) {
    c.set_output(0, DType::i64, Shape());
    const Shape& in = c.input_shape(0);
    if (in.rank_known()) c.set_output_dims_value(0, {in.numel()});
  });
}

CUVIL_DEFINE_OP(Flatten) {
  s.inputs(1, 1).attr("axis", AttrKind::Int, int64_t(1)).infer_with(infer_flatten).output_views_input(0, 0);
}

CUVIL_DEFINE_OP(Squeeze) { s.inputs(1, 2).infer_with(infer_squeeze).output_views_input(0, 0); }

CUVIL_DEFINE_OP(Unsqueeze) { s.inputs(2, 2).infer_with(infer_unsqueeze).output_views_input(0, 0); }

CUVIL_DEFINE_OP(Transpose) {
  // `perm` has no default: absent means reversing the axes.
  s.inputs(1, 1).attr("perm", AttrKind::Ints, std::vector<int64_t>{}).infer_with(infer_transpose);
}

CUVIL_DEFINE_OP(Concat) { s.inputs(1, -1).required_attr("axis", AttrKind::Int).infer_with(infer_concat); }

CUVIL_DEFINE_OP(Split) {
  // num_outputs (Split-18): 0 splits evenly, as Split-13 without `split` does; n splits into parts of ceil(d / n).
  s.inputs(1, 2)
      .outputs(1, -1)
      .attr("axis", AttrKind::Int, int64_t(0))
      .attr("num_outputs", AttrKind::Int, int64_t(0))
      .infer_with(infer_split);
}

CUVIL_DEFINE_OP(Slice) { s.inputs(3, 5).infer_with(infer_slice); }

CUVIL_DEFINE_OP(Gather) { s.inputs(2, 2).attr("axis", AttrKind::Int, int64_t(0)).infer_with(infer_gather); }

CUVIL_DEFINE_OP(GatherElements) {
  s.inputs(2, 2).attr("axis", AttrKind::Int, int64_t(0)).infer_with(infer_gather_elements);
}

CUVIL_DEFINE_OP(GatherND) {
  s.inputs(2, 2).attr("batch_dims", AttrKind::Int, int64_t(0)).infer_with(infer_gather_nd);
}

CUVIL_DEFINE_OP(ScatterElements) {
  // Output element i is data[i] unless an update lands there; the kernel copies data first, so sharing is safe.
  s.inputs(3, 3)
      .attr("axis", AttrKind::Int, int64_t(0))
      .attr("reduction", AttrKind::String, "none")
      .infer_with(infer_scatter_elements)
      .allow_inplace(0, 0);
}

CUVIL_DEFINE_OP(ScatterND) {
  s.inputs(3, 3).attr("reduction", AttrKind::String, "none").infer_with(infer_scatter_nd).allow_inplace(0, 0);
}

CUVIL_DEFINE_OP(Expand) { s.inputs(2, 2).infer_with(infer_expand); }

CUVIL_DEFINE_OP(Tile) { s.inputs(2, 2).infer_with(infer_tile); }

// Inputs data, pads, constant_value, axes (Pad-18); modes of Pad-19 (wrap included).
CUVIL_DEFINE_OP(Pad) { s.inputs(2, 4).attr("mode", AttrKind::String, "constant").infer_with(infer_pad); }

CUVIL_DEFINE_OP(Range) { s.inputs(3, 3).infer_with(infer_range); }

CUVIL_DEFINE_OP(ConstantOfShape) {
  s.inputs(1, 1)
      .attr("value", AttrKind::Tensor, Tensor::from_vector<float>({0.0f}, {1}))
      .infer_with(infer_constant_of_shape);
}

CUVIL_DEFINE_OP(EyeLike) {
  // `dtype` has no default: absent means the input's dtype.
  s.inputs(1, 1)
      .attr("dtype", AttrKind::Int, int64_t(dtype_onnx_id(DType::f32)))
      .attr("k", AttrKind::Int, int64_t(0))
      .infer_with(infer_eye_like);
}

CUVIL_DEFINE_OP(Trilu) {
  s.inputs(1, 2).attr("upper", AttrKind::Int, int64_t(1)).infer_with(infer_trilu).allow_inplace(0, 0);
}

CUVIL_DEFINE_OP(OneHot) { s.inputs(3, 3).attr("axis", AttrKind::Int, int64_t(-1)).infer_with(infer_one_hot); }

CUVIL_DEFINE_OP(NonZero) { s.inputs(1, 1).infer_with(infer_non_zero); }

CUVIL_DEFINE_OP(Compress) {
  // `axis` has no default: absent means the flattened input.
  s.inputs(2, 2).attr("axis", AttrKind::Int, int64_t(0)).infer_with(infer_compress);
}

CUVIL_DEFINE_OP(Unique) {
  // `axis` has no default: absent means the flattened input.
  s.inputs(1, 1)
      .outputs(1, 4)
      .attr("axis", AttrKind::Int, int64_t(0))
      .attr("sorted", AttrKind::Int, int64_t(1))
      .infer_with(infer_unique);
}

CUVIL_DEFINE_OP(DepthToSpace) {
  s.inputs(1, 1)
      .required_attr("blocksize", AttrKind::Int)
      .attr("mode", AttrKind::String, "DCR")
      .infer_with(infer_depth_to_space);
}

CUVIL_DEFINE_OP(SpaceToDepth) {
  // mode (opset 28): DCR (every earlier opset's order) or CRD, as DepthToSpace's.
  s.inputs(1, 1)
      .required_attr("blocksize", AttrKind::Int)
      .attr("mode", AttrKind::String, "DCR")
      .infer_with(infer_space_to_depth);
}

CUVIL_DEFINE_OP(ReverseSequence) {
  s.inputs(2, 2)
      .attr("batch_axis", AttrKind::Int, int64_t(1))
      .attr("time_axis", AttrKind::Int, int64_t(0))
      .infer_with(infer_reverse_sequence);
}

}  // namespace cuvil

namespace cuvil {

// BitCast(x) -> y: `to` is an ONNX TensorProto type id of the same byte width as x's dtype; the shape is kept.
CUVIL_DEFINE_OP(BitCast) {
  s.inputs(1, 1).required_attr("to", AttrKind::Int).infer_with([](InferContext& c) {
    auto to = dtype_from_onnx_id(int(c.i("to")));
    if (!to) c.error("attribute 'to' = ", c.i("to"), " is not an element type Cuvil has");
    DType from = c.input_dtype(0);
    if (from == DType::str || *to == DType::str) c.error("strings have no bits to reinterpret");
    if (dtype_size(from) != dtype_size(*to))
      c.error("cannot reinterpret ", dtype_name(from), " (", dtype_size(from), " bytes) as ", dtype_name(*to), " (",
              dtype_size(*to), " bytes): BitCast needs types of one width");
    c.set_output(0, *to, c.input_shape(0));
  });
}

}  // namespace cuvil
