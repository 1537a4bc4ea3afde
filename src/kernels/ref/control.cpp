// Reference kernels of the control family: they run their regions through the executor (ctx.regions()) and hand
// the region results over as outputs. Data is moved as bytes, so every dtype is handled alike. Loops tell the
// executor about each iteration first (RegionRunner::loop_iteration), where it checks cancellation and limits.
#include <cstring>

#include "kernels/ref/ref_kernels.h"
#include "support/check_failed.h"

namespace cuvil {

namespace {

// The single element of a condition or trip-count tensor.
int64_t single_element(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.error(what, " must hold a single element, got ", t.type_str());
  return t.get_i64(0);
}

bool condition_value(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::boolean) ctx.error(what, " must be bool, got ", t.type_str());
  return single_element(ctx, t, what) != 0;
}

// Fails unless `t` fits the type inference gave output i (dtype, rank, constant dims); later nodes rely on it.
void check_output(const KernelContext& ctx, size_t i, const Tensor& t) {
  const TensorType& want = ctx.node().output(i)->type();
  if (t.dtype() != want.dtype)
    ctx.error("output ", i, " is ", t.type_str(), " at run time but typed ", want.str());
  if (!want.shape.rank_known()) return;
  bool ok = t.rank() == want.shape.rank();
  for (size_t d = 0; ok && d < t.rank(); ++d)
    ok = !want.shape[d].is_const() || want.shape[d].value() == t.dim(d);
  if (!ok) ctx.error("output ", i, " is ", t.type_str(), " at run time but typed ", want.str());
}

// Element `index` of `x` along `axis`: a tensor of rank one less.
Tensor take_along(const Tensor& x, size_t axis, int64_t index) {
  std::vector<int64_t> dims = x.shape();
  int64_t len = dims[axis];
  dims.erase(dims.begin() + std::ptrdiff_t(axis));
  Tensor out = Tensor::zeros(x.dtype(), dims);
  int64_t outer = shape_numel({x.shape().begin(), x.shape().begin() + std::ptrdiff_t(axis)});
  size_t inner = size_t(shape_numel({x.shape().begin() + std::ptrdiff_t(axis) + 1, x.shape().end()})) *
                 dtype_size(x.dtype());
  if (inner == 0) return out;
  auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + size_t(o) * inner, src + size_t(o * len + index) * inner, inner);
  return out;
}

// Stacks same-shaped tensors along a new axis `axis`; with `reverse` the last one comes first.
Tensor stack(const std::vector<Tensor>& elems, DType dtype, const std::vector<int64_t>& elem_shape, size_t axis,
             bool reverse) {
  int64_t len = int64_t(elems.size());
  std::vector<int64_t> dims = elem_shape;
  dims.insert(dims.begin() + std::ptrdiff_t(axis), len);
  Tensor out = Tensor::zeros(dtype, dims);
  int64_t outer = shape_numel({elem_shape.begin(), elem_shape.begin() + std::ptrdiff_t(axis)});
  size_t inner = size_t(shape_numel({elem_shape.begin() + std::ptrdiff_t(axis), elem_shape.end()})) *
                 dtype_size(dtype);
  if (inner == 0) return out;
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t t = 0; t < len; ++t) {
    int64_t pos = reverse ? len - 1 - t : t;
    auto* src = static_cast<const uint8_t*>(elems[size_t(t)].raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + size_t(o * len + pos) * inner, src + size_t(o) * inner, inner);
  }
  // strings: the text of the iterations' values, which go away with the kernel (Tensor::strings)
  return dtype == DType::str ? out.with_own_strings() : out;
}

// Collects the per-iteration values of one scan output, checking they keep their dtype and shape.
struct ScanAccumulator {
  std::vector<Tensor> elems;
  void add(const KernelContext& ctx, size_t output, Tensor t) {
    if (!elems.empty() && (t.dtype() != elems[0].dtype() || t.shape() != elems[0].shape()))
      ctx.error("scan output ", output, " changes between iterations: ", elems[0].type_str(), " in iteration 0, ",
                t.type_str(), " in iteration ", elems.size());
    elems.push_back(std::move(t));
  }
};

// Binds the bare symbols of a declared type to the dims seen for it.
void bind_symbols(const TensorType& type, const std::vector<int64_t>& dims, SymbolBindings& b) {
  if (!type.shape.rank_known() || type.shape.rank() != dims.size()) return;
  for (size_t d = 0; d < dims.size(); ++d)
    if (type.shape[d].is_symbol()) b.emplace(type.shape[d].symbol_name(), dims[d]);
}

// The element shape of a scan output that no iteration produced: the body's static type where it has one, dims
// the node's inputs determine, and 0 for any dim nothing determines (the result is empty either way).
std::vector<int64_t> unseen_element_shape(const TensorType& elem, const SymbolBindings& b) {
  if (!elem.shape.rank_known()) return {};
  std::vector<int64_t> dims;
  for (const Dim& d : elem.shape.dims()) dims.push_back(std::max<int64_t>(d.eval(b).value_or(0), 0));
  return dims;
}

// Symbol bindings implied by the node's inputs and the shapes of the region inputs they would feed.
SymbolBindings bindings_from_inputs(const KernelContext& ctx, const Graph& region,
                                    const std::vector<std::vector<int64_t>>& region_input_shapes) {
  SymbolBindings b;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) bind_symbols(ctx.node().input(i)->type(), ctx.input(i).shape(), b);
  for (size_t i = 0; i < region_input_shapes.size() && i < region.inputs().size(); ++i)
    bind_symbols(region.inputs()[i]->type(), region_input_shapes[i], b);
  return b;
}

// Runs `body` into `out` (reused by loops); the first `borrowed` results are only read before the next run.
void run_body(KernelContext& ctx, const Graph& body, const std::vector<Tensor>& inputs, size_t min_outputs,
              std::vector<Tensor>& out, size_t borrowed = 0) {
  ctx.regions().run_region(body, inputs, out, borrowed);
  if (out.size() < min_outputs)
    ctx.error("region '", body.name(), "' yielded ", out.size(), " values; expected at least ", min_outputs);
}

// Sets a scalar the loop feeds its body, in place when nothing else holds it (the body's frame has let go of
// last iteration's), so an iteration allocates nothing for it.
template <class T>
void set_scalar(Tensor& t, T v) {
  if (t.sole_owner()) *t.data<T>() = v;
  else t = Tensor::scalar<T>(v);
}

int64_t normalize(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) ctx.error(what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> list_attr(const KernelContext& ctx, const char* name, size_t n, int64_t def) {
  std::vector<int64_t> v = ctx.ints(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n) ctx.error("attribute '", name, "' has ", v.size(), " entries; expected ", n);
  return v;
}

}  // namespace

CUVIL_REF_KERNEL(If) {
  bool cond = condition_value(ctx, ctx.input(0), "cond");
  const Graph& branch = *ctx.g(cond ? "then_branch" : "else_branch");
  std::vector<Tensor> out;
  run_body(ctx, branch, {}, ctx.num_outputs(), out);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    check_output(ctx, i, out[i]);
    ctx.set_output(i, std::move(out[i]));
  }
}

CUVIL_REF_KERNEL(Loop) {
  const Graph& body = *ctx.g("body");
  size_t n = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  if (body.inputs().size() != 2 + n || body.outputs().size() < 1 + n)
    ctx.error("body signature does not match the node: it takes ", body.inputs().size(), " inputs and yields ",
              body.outputs().size(), " values for ", n, " loop-carried values");
  size_t k_outs = body.outputs().size() - 1 - n;
  bool has_m = ctx.has_input(0), has_cond = ctx.has_input(1);
  if (!has_m && !has_cond) ctx.error("has neither a trip count M nor a condition, so it never terminates");
  int64_t max_trips = 0;
  if (has_m) {
    if (ctx.input(0).dtype() != DType::i64) ctx.error("trip count M must be i64, got ", ctx.input(0).type_str());
    max_trips = single_element(ctx, ctx.input(0), "trip count M");
  }
  // The condition fed to the body: the cond input, then each iteration's condition output. It only stops the
  // loop when the node has a cond input (ONNX ignores it otherwise).
  bool cond = has_cond ? condition_value(ctx, ctx.input(1), "cond") : true;
  // The body's inputs, reused every iteration: iteration number, condition, loop-carried values.
  std::vector<Tensor> in{Tensor::scalar<int64_t>(0), Tensor::scalar<bool>(cond)};
  for (size_t k = 0; k < n; ++k) in.push_back(ctx.input(2 + k));
  std::vector<Tensor> out;
  std::vector<ScanAccumulator> scans(k_outs);
  int64_t iter = 0;
  for (; (!has_m || iter < max_trips) && (!has_cond || cond); ++iter) {
    ctx.regions().loop_iteration(ctx.node(), iter);  // cancellation, time and iteration limits
    set_scalar<int64_t>(in[0], iter);
    set_scalar<bool>(in[1], cond);
    run_body(ctx, body, in, 1 + n + k_outs, out, /*borrowed=*/1);
    cond = condition_value(ctx, out[0], "the body's condition output");
    out[0] = Tensor();  // it may alias in[1] (a body passing its condition through), which is set next
    for (size_t k = 0; k < n; ++k) {
      if (out[1 + k].dtype() != in[2 + k].dtype())
        ctx.error("loop-carried value ", k, " changes dtype: ", in[2 + k].type_str(), " -> ", out[1 + k].type_str());
      in[2 + k] = std::move(out[1 + k]);
    }
    for (size_t k = 0; k < k_outs; ++k) scans[k].add(ctx, k, std::move(out[1 + n + k]));
  }
  std::vector<Tensor> carried(in.begin() + 2, in.end());
  SymbolBindings bindings;
  if (iter == 0) {
    std::vector<std::vector<int64_t>> first{{}, {}};
    for (const Tensor& t : carried) first.push_back(t.shape());
    bindings = bindings_from_inputs(ctx, body, first);
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor t;
    if (i < n) {
      // With no iteration the result is the input itself, which the caller must not alias (it may be an arena
      // buffer that is reused once this node is done).
      t = iter == 0 ? carried[i].clone() : carried[i];
    } else {
      const ScanAccumulator& acc = scans[i - n];
      const TensorType& elem = body.outputs()[1 + i]->type();
      t = acc.elems.empty() ? stack({}, elem.dtype, unseen_element_shape(elem, bindings), 0, false)
                            : stack(acc.elems, acc.elems[0].dtype(), acc.elems[0].shape(), 0, false);
    }
    check_output(ctx, i, t);
    ctx.set_output(i, std::move(t));
  }
}

CUVIL_REF_KERNEL(Scan) {
  const Graph& body = *ctx.g("body");
  int64_t m = ctx.i("num_scan_inputs");
  if (m < 1 || m > int64_t(ctx.num_inputs()))
    ctx.error("num_scan_inputs is ", m, " but must be in [1, ", ctx.num_inputs(), "]");
  size_t num_scan = size_t(m), n = ctx.num_inputs() - num_scan;
  if (body.inputs().size() != n + num_scan || body.outputs().size() < n)
    ctx.error("body signature does not match the node: it takes ", body.inputs().size(), " inputs and yields ",
              body.outputs().size(), " values for ", n, " states and ", num_scan, " scan inputs");
  size_t k_outs = body.outputs().size() - n;
  std::vector<int64_t> in_axes = list_attr(ctx, "scan_input_axes", num_scan, 0);
  std::vector<int64_t> in_dirs = list_attr(ctx, "scan_input_directions", num_scan, 0);
  std::vector<int64_t> out_axes = list_attr(ctx, "scan_output_axes", k_outs, 0);
  std::vector<int64_t> out_dirs = list_attr(ctx, "scan_output_directions", k_outs, 0);
  for (int64_t d : in_dirs)
    if (d != 0 && d != 1) ctx.error("scan_input_directions entries must be 0 or 1, got ", d);
  for (int64_t d : out_dirs)
    if (d != 0 && d != 1) ctx.error("scan_output_directions entries must be 0 or 1, got ", d);

  std::vector<size_t> axes(num_scan);
  int64_t len = -1;
  for (size_t j = 0; j < num_scan; ++j) {
    const Tensor& x = ctx.input(n + j);
    if (x.rank() < 1) ctx.error("scan input ", j, " must have rank >= 1, got ", x.type_str());
    axes[j] = size_t(normalize(ctx, in_axes[j], int64_t(x.rank()), "scan_input_axes entry"));
    int64_t d = x.dim(axes[j]);
    if (len >= 0 && d != len)
      ctx.error("scan inputs have different lengths along their scan axes: ", len, " and ", d, " (scan input ", j,
                ", ", x.type_str(), ")");
    len = d;
  }
  std::vector<Tensor> states;
  for (size_t k = 0; k < n; ++k) states.push_back(ctx.input(k));
  std::vector<ScanAccumulator> scans(k_outs);
  for (int64_t t = 0; t < len; ++t) {
    ctx.regions().loop_iteration(ctx.node(), t);  // cancellation, time and iteration limits
    std::vector<Tensor> in = states;
    for (size_t j = 0; j < num_scan; ++j)
      in.push_back(take_along(ctx.input(n + j), axes[j], in_dirs[j] ? len - 1 - t : t));
    std::vector<Tensor> out;
    run_body(ctx, body, in, n + k_outs, out);
    for (size_t k = 0; k < n; ++k) {
      if (out[k].dtype() != states[k].dtype())
        ctx.error("state ", k, " changes dtype: ", states[k].type_str(), " -> ", out[k].type_str());
      states[k] = std::move(out[k]);
    }
    for (size_t k = 0; k < k_outs; ++k) scans[k].add(ctx, k, std::move(out[n + k]));
  }
  SymbolBindings bindings;
  if (len == 0) {
    std::vector<std::vector<int64_t>> first;
    for (const Tensor& t : states) first.push_back(t.shape());
    for (size_t j = 0; j < num_scan; ++j) {
      std::vector<int64_t> elem = ctx.input(n + j).shape();
      elem.erase(elem.begin() + std::ptrdiff_t(axes[j]));
      first.push_back(elem);
    }
    bindings = bindings_from_inputs(ctx, body, first);
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Tensor t;
    if (i < n) {
      t = len == 0 ? states[i].clone() : states[i];  // never alias an input (see Loop)
    } else {
      size_t k = i - n;
      const ScanAccumulator& acc = scans[k];
      const TensorType& elem = body.outputs()[i]->type();
      DType dtype = acc.elems.empty() ? elem.dtype : acc.elems[0].dtype();
      std::vector<int64_t> elem_shape = acc.elems.empty() ? unseen_element_shape(elem, bindings) : acc.elems[0].shape();
      size_t axis = size_t(normalize(ctx, out_axes[k], int64_t(elem_shape.size()) + 1, "scan_output_axes entry"));
      t = stack(acc.elems, dtype, elem_shape, axis, out_dirs[k] == 1);
    }
    check_output(ctx, i, t);
    ctx.set_output(i, std::move(t));
  }
}

CUVIL_REF_KERNEL(Assert) {
  const Tensor& cond = ctx.input(0);
  if (cond.dtype() != DType::boolean) ctx.error("cond must be bool, got ", cond.type_str());
  const bool* p = cond.data<bool>();
  for (int64_t i = 0, n = cond.numel(); i < n; ++i)
    if (!p[i]) {
      const Location& loc = ctx.node().loc();
      std::string where = loc.file.empty() ? loc.name : loc.file + ":" + std::to_string(loc.line);
      throw CheckFailed(ctx.s("exception"), ctx.s("message"), where);
    }
}

}  // namespace cuvil
