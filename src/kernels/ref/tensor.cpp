// Reference kernels of the tensor family.
//
// Most of these ops move elements without looking at them, so they copy through an unsigned integer of the
// element's width (visit_width) and work for every dtype at once. Ops that create or combine values (Pad's
// constant, Scatter's reductions, Range, OneHot, Unique, ...) use visit_dtype.
//
// Outputs are sized by shape inference, which already validated attributes and shapes; kernels re-check what
// depends on data (index ranges, sequence lengths) and fail with a clear error rather than read out of bounds.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ir/ops/tensor_helpers.h"
#include "kernels/ref/indexing.h"
#include "kernels/ref/permute.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

using ref::MultiIndex;
using ref::strides_of;

// Calls fn.template operator()<U>() with an unsigned integer type as wide as one element.
template <class Fn>
void visit_width(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1: return fn.template operator()<uint8_t>();
    case 2: return fn.template operator()<uint16_t>();
    case 4: return fn.template operator()<uint32_t>();
    case 8: return fn.template operator()<uint64_t>();
  }
  fail_internal("no element type of ", bytes, " bytes");
}

template <class U>
const U* elems(const Tensor& t) {
  return static_cast<const U*>(t.raw());
}
template <class U>
U* elems(Tensor& t) {
  return static_cast<U*>(t.raw());
}

// Same bytes into the output; a no-op when the runtime placed the output on the input's buffer (in place).
void copy_all(Tensor& out, const Tensor& in) {
  CUVIL_ASSERT(out.nbytes() == in.nbytes(), "copy of ", in.type_str(), " into ", out.type_str());
  if (out.raw() != in.raw() && in.nbytes()) std::memmove(out.raw(), in.raw(), in.nbytes());
}

int64_t prod(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

int64_t norm_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) ctx.error("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// An index into an axis of `n` elements, negative counting from the back; out of range is an error.
int64_t checked_index(const KernelContext& ctx, int64_t i, int64_t n, const char* what) {
  if (i < -n || i >= n) ctx.error(what, " index ", i, " is out of range [", -n, ", ", n - 1, "]");
  return i < 0 ? i + n : i;
}

// ---- the reductions shared by ScatterElements and ScatterND

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const KernelContext& ctx) {
  const std::string& r = ctx.s("reduction");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;  // opset 18
  if (r == "min") return Reduction::Min;
  ctx.error("reduction must be 'none', 'add', 'mul', 'max' or 'min', got '", r, "'");
}

template <class T>
void apply(Reduction red, T& dst, const T& src) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    // add and max of booleans are or, mul and min are and (what numpy gives when casting back)
    if (red == Reduction::None) dst = src;
    else if (red == Reduction::Add || red == Reduction::Max) dst = dst || src;
    else dst = dst && src;
  } else {
    if (red == Reduction::None) dst = src;
    else if (red == Reduction::Add) dst = T(C(C(dst) + C(src)));
    else if (red == Reduction::Mul) dst = T(C(C(dst) * C(src)));
    // max/min as numpy's maximum/minimum (ONNX's reference): NaN wins
    else if (C(dst) != C(dst) || C(src) != C(src)) dst = T(C(C(dst) + C(src)));
    else if (red == Reduction::Max) dst = C(src) > C(dst) ? src : dst;
    else dst = C(src) < C(dst) ? src : dst;
  }
}

}  // namespace

// ---- same elements, new dims

CUVIL_REF_KERNEL(Reshape) { copy_all(ctx.output(0), ctx.input(0)); }
CUVIL_REF_KERNEL(Flatten) { copy_all(ctx.output(0), ctx.input(0)); }
CUVIL_REF_KERNEL(Squeeze) { copy_all(ctx.output(0), ctx.input(0)); }
CUVIL_REF_KERNEL(Unsqueeze) { copy_all(ctx.output(0), ctx.input(0)); }

CUVIL_REF_KERNEL(Shape) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  auto rg = tensor_ops::shape_axis_range(int64_t(in.rank()), ctx.i("start"), ctx.has("end"), ctx.i("end"));
  int64_t* o = out.data<int64_t>();
  for (int64_t a = rg.begin; a < rg.end; ++a) o[a - rg.begin] = in.dim(size_t(a));
}

CUVIL_REF_KERNEL(Size) { ctx.output(0).data<int64_t>()[0] = ctx.input(0).numel(); }

// ---- data movement

CUVIL_REF_KERNEL(Transpose) {
  const Tensor& in = ctx.input(0);
  int64_t r = int64_t(in.rank());
  std::vector<int64_t> perm;
  if (ctx.has("perm")) {
    perm = ctx.ints("perm");
    for (int64_t& p : perm) p = p < 0 ? p + r : p;
  } else {
    for (int64_t k = r - 1; k >= 0; --k) perm.push_back(k);
  }
  ref::permute_into(in, perm, ctx.output(0));
}

CUVIL_REF_KERNEL(Concat) {
  Tensor& out = ctx.output(0);
  int64_t r = int64_t(out.rank());
  int64_t axis = norm_axis(ctx, ctx.i("axis"), r);
  size_t es = dtype_size(out.dtype());
  int64_t outer = prod(out.shape(), 0, size_t(axis));
  int64_t inner = prod(out.shape(), size_t(axis) + 1, out.rank());
  int64_t out_row = out.dim(size_t(axis)) * inner;  // elements per outer index in the output
  auto* dst = static_cast<char*>(out.raw());
  int64_t at = 0;  // where this input starts along the axis
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& in = ctx.input(i);
    int64_t row = in.dim(size_t(axis)) * inner;
    const auto* src = static_cast<const char*>(in.raw());
    if (row > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + size_t(o * out_row + at * inner) * es, src + size_t(o * row) * es, size_t(row) * es);
    at += in.dim(size_t(axis));
  }
}

CUVIL_REF_KERNEL(Split) {
  const Tensor& in = ctx.input(0);
  int64_t r = int64_t(in.rank());
  int64_t axis = norm_axis(ctx, ctx.i("axis"), r);
  size_t es = dtype_size(in.dtype());
  int64_t outer = prod(in.shape(), 0, size_t(axis));
  int64_t inner = prod(in.shape(), size_t(axis) + 1, in.rank());
  int64_t in_row = in.dim(size_t(axis)) * inner;
  int64_t total = 0;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) total += ctx.output(k).dim(size_t(axis));
  if (total != in.dim(size_t(axis)))
    ctx.error("split sizes add up to ", total, ", but axis ", axis, " of the input has ", in.dim(size_t(axis)));
  const auto* src = static_cast<const char*>(in.raw());
  int64_t at = 0;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    Tensor& out = ctx.output(k);
    int64_t row = out.dim(size_t(axis)) * inner;
    auto* dst = static_cast<char*>(out.raw());
    if (row > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + size_t(o * row) * es, src + size_t(o * in_row + at * inner) * es, size_t(row) * es);
    at += out.dim(size_t(axis));
  }
}

CUVIL_REF_KERNEL(Slice) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t r = int64_t(in.rank());
  std::vector<int64_t> starts = ctx.input(1).to_i64_vector(), ends = ctx.input(2).to_i64_vector();
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) axes = ctx.input(3).to_i64_vector();
  else for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (ctx.has_input(4)) steps = ctx.input(4).to_i64_vector();
  else steps.assign(starts.size(), 1);
  std::vector<int64_t> first(size_t(r), 0), step(size_t(r), 1);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = norm_axis(ctx, axes.at(k), r);
    auto rg = tensor_ops::slice_range(in.dim(size_t(a)), starts[k], ends.at(k), steps.at(k));
    CUVIL_ASSERT(rg.len == out.dim(size_t(a)), ctx.node().describe(), ": slice length mismatch");
    first[size_t(a)] = rg.start;
    step[size_t(a)] = rg.step;
  }
  std::vector<int64_t> s = strides_of(in.shape()), read(static_cast<size_t>(r));
  int64_t base = 0;
  for (int64_t d = 0; d < r; ++d) {
    base += first[size_t(d)] * s[size_t(d)];
    read[size_t(d)] = step[size_t(d)] * s[size_t(d)];
  }
  if (out.numel() == 0) return;
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in) + base;
    U* dst = elems<U>(out);
    MultiIndex it(out.shape(), {read});
    for (int64_t n = 0; n < out.numel(); ++n, it.next()) dst[n] = src[it.offset(0)];
  });
}

// ---- gathers

CUVIL_REF_KERNEL(Gather) {
  const Tensor& data = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t axis = norm_axis(ctx, ctx.i("axis"), int64_t(data.rank()));
  std::vector<int64_t> idx = ctx.input(1).to_i64_vector();
  int64_t n = data.dim(size_t(axis));
  for (int64_t& i : idx) i = checked_index(ctx, i, n, "gather");
  int64_t outer = prod(data.shape(), 0, size_t(axis));
  int64_t inner = prod(data.shape(), size_t(axis) + 1, data.rank());
  size_t es = dtype_size(data.dtype()), chunk = size_t(inner) * es;
  if (chunk == 0) return;
  const auto* src = static_cast<const char*>(data.raw());
  auto* dst = static_cast<char*>(out.raw());
  int64_t ni = int64_t(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j)
      std::memcpy(dst + size_t(o * ni + j) * chunk, src + size_t(o * n + idx[size_t(j)]) * chunk, chunk);
}

CUVIL_REF_KERNEL(GatherElements) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  Tensor& out = ctx.output(0);
  int64_t r = int64_t(data.rank());
  int64_t axis = norm_axis(ctx, ctx.i("axis"), r);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && indices.dim(size_t(d)) > data.dim(size_t(d)))
      ctx.error("indices ", shape_str(indices.shape()), " are larger than data ", shape_str(data.shape()),
                " on axis ", d);
  std::vector<int64_t> idx = indices.to_i64_vector();
  std::vector<int64_t> s = strides_of(data.shape()), read = s;
  int64_t n = data.dim(size_t(axis)), axis_stride = s[size_t(axis)];
  read[size_t(axis)] = 0;  // the axis coordinate comes from the index instead
  visit_width(dtype_size(data.dtype()), [&]<class U>() {
    const U* src = elems<U>(data);
    U* dst = elems<U>(out);
    MultiIndex it(indices.shape(), {read});
    for (int64_t e = 0; e < out.numel(); ++e, it.next())
      dst[e] = src[it.offset(0) + checked_index(ctx, idx[size_t(e)], n, "gather") * axis_stride];
  });
}

namespace {

// GatherND / ScatterND: the flat element offset of each index tuple (the last dim of `indices`, k entries, into
// the dims of `data` from `first_dim` on), relative to the start of its batch.
std::vector<int64_t> nd_offsets(const KernelContext& ctx, const Tensor& data, const Tensor& indices,
                                size_t first_dim) {
  std::vector<int64_t> idx = indices.to_i64_vector();
  size_t k = size_t(indices.dim(indices.rank() - 1));
  std::vector<int64_t> s = strides_of(data.shape());
  std::vector<int64_t> offs(k ? idx.size() / k : 0);
  for (size_t t = 0; t < offs.size(); ++t) {
    int64_t off = 0;
    for (size_t j = 0; j < k; ++j) {
      size_t d = first_dim + j;
      off += checked_index(ctx, idx[t * k + j], data.dim(d), "tuple") * s[d];
    }
    offs[t] = off;
  }
  return offs;
}

}  // namespace

CUVIL_REF_KERNEL(GatherND) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  Tensor& out = ctx.output(0);
  size_t b = size_t(ctx.i("batch_dims"));
  size_t q = indices.rank(), k = size_t(indices.dim(q - 1));
  for (size_t d = 0; d < b; ++d)
    if (indices.dim(d) != data.dim(d))
      ctx.error("batch dim ", d, " differs: data ", shape_str(data.shape()), ", indices ",
                shape_str(indices.shape()));
  std::vector<int64_t> offs = nd_offsets(ctx, data, indices, b);
  int64_t batches = prod(data.shape(), 0, b);
  int64_t batch_elems = prod(data.shape(), b, data.rank());  // data elements per batch
  int64_t slice = prod(data.shape(), b + k, data.rank());    // elements copied per tuple
  int64_t per_batch = batches ? int64_t(offs.size()) / batches : 0;
  size_t es = dtype_size(data.dtype());
  const auto* src = static_cast<const char*>(data.raw());
  auto* dst = static_cast<char*>(out.raw());
  if (slice == 0) return;
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < per_batch; ++t) {
      int64_t from = bi * batch_elems + offs[size_t(bi * per_batch + t)];
      std::memcpy(dst + size_t((bi * per_batch + t) * slice) * es, src + size_t(from) * es, size_t(slice) * es);
    }
}

// ---- scatters

CUVIL_REF_KERNEL(ScatterElements) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  int64_t r = int64_t(data.rank());
  int64_t axis = norm_axis(ctx, ctx.i("axis"), r);
  Reduction red = reduction_of(ctx);
  if (indices.shape() != updates.shape())
    ctx.error("updates ", shape_str(updates.shape()), " must have the shape of indices ",
              shape_str(indices.shape()));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && indices.dim(size_t(d)) > data.dim(size_t(d)))
      ctx.error("indices ", shape_str(indices.shape()), " are larger than data ", shape_str(data.shape()),
                " on axis ", d);
  std::vector<int64_t> idx = indices.to_i64_vector();
  std::vector<int64_t> s = strides_of(data.shape()), write = s;
  int64_t n = data.dim(size_t(axis)), axis_stride = s[size_t(axis)];
  write[size_t(axis)] = 0;
  // Validate every index before writing, so a bad one leaves no half-updated output.
  for (int64_t& i : idx) i = checked_index(ctx, i, n, "scatter");
  copy_all(out, data);
  visit_dtype(data.dtype(), [&]<class T>() {
    const T* upd = updates.data<T>();
    T* dst = out.data<T>();
    MultiIndex it(indices.shape(), {write});
    for (int64_t e = 0; e < indices.numel(); ++e, it.next())
      apply<T>(red, dst[it.offset(0) + idx[size_t(e)] * axis_stride], upd[e]);
  });
}

CUVIL_REF_KERNEL(ScatterND) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  Reduction red = reduction_of(ctx);
  size_t q = indices.rank(), k = size_t(indices.dim(q - 1));
  std::vector<int64_t> want(indices.shape().begin(), indices.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + int64_t(k), data.shape().end());
  if (updates.shape() != want)
    ctx.error("updates ", shape_str(updates.shape()), " must have shape ", shape_str(want));
  std::vector<int64_t> offs = nd_offsets(ctx, data, indices, 0);
  int64_t slice = prod(data.shape(), k, data.rank());
  copy_all(out, data);
  visit_dtype(data.dtype(), [&]<class T>() {
    const T* upd = updates.data<T>();
    T* dst = out.data<T>();
    for (size_t t = 0; t < offs.size(); ++t)
      for (int64_t j = 0; j < slice; ++j) apply<T>(red, dst[offs[t] + j], upd[int64_t(t) * slice + j]);
  });
}

// ---- broadcasting and repetition

CUVIL_REF_KERNEL(Expand) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  for (size_t d = 0; d < in.rank(); ++d) {
    int64_t i = in.dim(d), o = out.dim(out.rank() - in.rank() + d);
    if (i != o && i != 1) ctx.error("cannot expand ", shape_str(in.shape()), " to ", shape_str(out.shape()));
  }
  std::vector<int64_t> read = ref::broadcast_strides(in.shape(), out.shape());
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in);
    U* dst = elems<U>(out);
    MultiIndex it(out.shape(), {read});
    for (int64_t n = 0; n < out.numel(); ++n, it.next()) dst[n] = src[it.offset(0)];
  });
}

CUVIL_REF_KERNEL(Tile) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  size_t r = in.rank();
  std::vector<int64_t> s = strides_of(in.shape());
  if (out.numel() == 0) return;
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in);
    U* dst = elems<U>(out);
    MultiIndex it(out.shape(), {});
    for (int64_t n = 0; n < out.numel(); ++n, it.next()) {
      int64_t off = 0;
      for (size_t d = 0; d < r; ++d) off += (it.index()[d] % in.dim(d)) * s[d];
      dst[n] = src[off];
    }
  });
}

CUVIL_REF_KERNEL(Pad) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  size_t r = in.rank();
  std::vector<int64_t> pads = ctx.input(1).to_i64_vector();
  if (ctx.has_input(3)) {  // Pad-18: a begin and an end per listed axis
    std::vector<int64_t> axes = ctx.input(3).to_i64_vector(), full(2 * r, 0);
    if (pads.size() != 2 * axes.size()) ctx.error("pads has ", pads.size(), " entries for ", axes.size(), " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      size_t d = size_t(norm_axis(ctx, axes[k], int64_t(r)));
      full[d] = pads[k];
      full[d + r] = pads[k + axes.size()];
    }
    pads = std::move(full);
  }
  const std::string& mode = ctx.s("mode");
  int m = mode == "constant" ? 0 : mode == "edge" ? 1 : mode == "reflect" ? 2 : 3;
  std::vector<int64_t> s = strides_of(in.shape());
  if (out.numel() == 0) return;
  for (size_t d = 0; d < r; ++d)
    if (m != 0 && in.dim(d) == 0) ctx.error("mode '", mode, "' cannot pad axis ", d, ", which is empty");
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    T fill{};
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) fill = ctx.input(2).data<T>()[0];
    MultiIndex it(out.shape(), {});
    for (int64_t n = 0; n < out.numel(); ++n, it.next()) {
      int64_t off = 0;
      bool inside = true;
      for (size_t d = 0; d < r; ++d) {
        int64_t i = it.index()[d] - pads[d], dim = in.dim(d);
        if (i < 0 || i >= dim) {
          if (m == 0) {
            inside = false;
            break;
          }
          i = m == 1 ? std::clamp<int64_t>(i, 0, dim - 1)
              : m == 2 ? tensor_ops::reflect_index(i, dim)
                       : ((i % dim) + dim) % dim;  // wrap: the input repeated
        }
        off += i * s[d];
      }
      dst[n] = inside ? src[off] : fill;
    }
  });
}

// ---- generators

CUVIL_REF_KERNEL(Range) {
  Tensor& out = ctx.output(0);
  for (size_t i = 0; i < 3; ++i)
    if (ctx.input(i).numel() != 1)
      ctx.error(i == 0 ? "start" : i == 1 ? "limit" : "delta", " must hold one element, got ", ctx.input(i).type_str());
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      T start = ctx.input(0).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      T* dst = out.data<T>();
      // start + i * delta (not repeated addition), so float rounding does not accumulate.
      for (int64_t i = 0; i < out.numel(); ++i) dst[i] = T(start + T(i) * delta);
    } else if constexpr (std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>) {
      // Computed in double and rounded once (onnx's reference without stash_type; within an ulp with it).
      double start = float(ctx.input(0).data<T>()[0]), delta = float(ctx.input(2).data<T>()[0]);
      T* dst = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) dst[i] = T(float(start + double(i) * delta));
    } else {
      ctx.error("unsupported dtype ", dtype_name(out.dtype()));
    }
  });
}

CUVIL_REF_KERNEL(ConstantOfShape) {
  Tensor& out = ctx.output(0);
  const Tensor& value = ctx.t("value");
  visit_width(dtype_size(out.dtype()), [&]<class U>() {
    U v = elems<U>(value)[0];
    U* dst = elems<U>(out);
    std::fill(dst, dst + out.numel(), v);
  });
}

CUVIL_REF_KERNEL(EyeLike) {
  Tensor& out = ctx.output(0);
  int64_t rows = out.dim(0), cols = out.dim(1), k = ctx.i("k");
  visit_dtype(out.dtype(), [&]<class T>() {
    T* dst = out.data<T>();
    std::fill(dst, dst + out.numel(), T{});
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) dst[i * cols + j] = T(compute_t<T>(1));
    }
  });
}

CUVIL_REF_KERNEL(Trilu) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t k = 0;
  if (ctx.has_input(1)) {
    if (ctx.input(1).numel() != 1) ctx.error("k must be a scalar, got ", ctx.input(1).type_str());
    k = ctx.input(1).get_i64(0);
  }
  bool upper = ctx.i("upper") != 0;
  size_t r = in.rank();
  int64_t rows = in.dim(r - 2), cols = in.dim(r - 1);
  int64_t mats = rows > 0 && cols > 0 ? in.numel() / (rows * cols) : 0;
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t b = 0; b < mats; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          int64_t e = (b * rows + i) * cols + j;
          // Element-wise in the same position, so an in-place run reads each element before overwriting it.
          bool keep = upper ? j - i >= k : j - i <= k;
          dst[e] = keep ? src[e] : T{};
        }
  });
}

CUVIL_REF_KERNEL(OneHot) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  Tensor& out = ctx.output(0);
  if (values.numel() != 2) ctx.error("values must hold [off_value, on_value], got ", values.type_str());
  int64_t r = int64_t(out.rank());
  int64_t axis = ctx.i("axis");
  if (axis < 0) axis += r;
  int64_t depth = out.dim(size_t(axis));
  int64_t outer = prod(out.shape(), 0, size_t(axis));
  int64_t inner = prod(out.shape(), size_t(axis) + 1, out.rank());
  std::vector<int64_t> idx(static_cast<size_t>(indices.numel()));
  visit_dtype(indices.dtype(), [&]<class T>() {
    const T* src = indices.data<T>();
    for (size_t e = 0; e < idx.size(); ++e) {
      if constexpr (is_float_v<T>) {
        double v = double(compute_t<T>(src[e]));
        // NaN and huge values are no valid class: they give all off_value, like other out-of-range indices.
        idx[e] = std::isfinite(v) && std::fabs(v) < 9e18 ? int64_t(v) : std::numeric_limits<int64_t>::max();
      } else if constexpr (std::is_same_v<T, uint64_t>) {
        idx[e] = src[e] > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                         : int64_t(src[e]);
      } else {
        idx[e] = int64_t(src[e]);
      }
    }
  });
  visit_width(dtype_size(out.dtype()), [&]<class U>() {
    U off = elems<U>(values)[0], on = elems<U>(values)[1];
    U* dst = elems<U>(out);
    std::fill(dst, dst + out.numel(), off);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        int64_t i = idx[size_t(o * inner + in)];
        if (i < -depth || i >= depth) continue;
        if (i < 0) i += depth;
        dst[(o * depth + i) * inner + in] = on;
      }
  });
}

// ---- data-dependent output sizes

namespace {

template <class T>
bool nonzero(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return v;
  else return compute_t<T>(v) != compute_t<T>(0);  // NaN counts as nonzero, as in numpy
}

}  // namespace

CUVIL_REF_KERNEL(NonZero) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> hits;
  visit_dtype(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    for (int64_t e = 0; e < in.numel(); ++e)
      if (nonzero(src[e])) hits.push_back(e);
  });
  int64_t r = int64_t(in.rank()), n = int64_t(hits.size());
  Tensor& out = ctx.allocate_output(0, DType::i64, {r, n});
  int64_t* dst = out.data<int64_t>();
  std::vector<int64_t> s = strides_of(in.shape());
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = hits[size_t(j)];
    for (int64_t d = 0; d < r; ++d) {
      dst[d * n + j] = rest / s[size_t(d)];
      rest %= s[size_t(d)];
    }
  }
}

CUVIL_REF_KERNEL(Compress) {
  const Tensor& in = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  const bool* keep = cond.data<bool>();
  bool flat = !ctx.has("axis");
  int64_t axis = flat ? 0 : norm_axis(ctx, ctx.i("axis"), int64_t(in.rank()));
  int64_t len = flat ? in.numel() : in.dim(size_t(axis));
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!keep[i]) continue;
    if (i >= len) ctx.error("condition selects index ", i, ", past the ", len, " elements along the axis");
    picked.push_back(i);
  }
  std::vector<int64_t> shape = flat ? std::vector<int64_t>{int64_t(picked.size())} : in.shape();
  if (!flat) shape[size_t(axis)] = int64_t(picked.size());
  Tensor& out = ctx.allocate_output(0, in.dtype(), shape);
  int64_t outer = flat ? 1 : prod(in.shape(), 0, size_t(axis));
  int64_t inner = flat ? 1 : prod(in.shape(), size_t(axis) + 1, in.rank());
  size_t es = dtype_size(in.dtype()), chunk = size_t(inner) * es;
  if (chunk == 0) return;
  const auto* src = static_cast<const char*>(in.raw());
  auto* dst = static_cast<char*>(out.raw());
  int64_t np = int64_t(picked.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < np; ++j)
      std::memcpy(dst + size_t(o * np + j) * chunk, src + size_t(o * len + picked[size_t(j)]) * chunk, chunk);
}

CUVIL_REF_KERNEL(Unique) {
  const Tensor& in = ctx.input(0);
  bool flat = !ctx.has("axis");
  int64_t axis = flat ? 0 : norm_axis(ctx, ctx.i("axis"), int64_t(in.rank()));
  // View the input as [outer, n, inner]: unique over the n slices (each outer x inner elements).
  int64_t n = flat ? in.numel() : in.dim(size_t(axis));
  int64_t outer = flat ? 1 : prod(in.shape(), 0, size_t(axis));
  int64_t inner = flat ? 1 : prod(in.shape(), size_t(axis) + 1, in.rank());
  bool sorted = ctx.i("sorted") != 0;
  std::vector<int64_t> first;    // per unique slice: where it first occurs, in output order
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  visit_dtype(in.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* src = in.data<T>();
    // Compares values, with all NaNs equal to each other and after every number (numpy's unique).
    auto cmp = [](C a, C b) -> int {
      if constexpr (is_float_v<T>) {
        bool na = std::isnan(double(a)), nb = std::isnan(double(b));
        if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
      }
      return a < b ? -1 : (b < a ? 1 : 0);
    };
    auto cmp_slice = [&](int64_t x, int64_t y) -> int {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int c = cmp(C(src[(o * n + x) * inner + i]), C(src[(o * n + y) * inner + i]));
          if (c) return c;
        }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    // Stable, so within a group of equal slices the first occurrence comes first.
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return cmp_slice(x, y) < 0; });
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    std::vector<int64_t> group_first, group_count;
    for (size_t p = 0; p < order.size(); ++p) {
      if (p == 0 || cmp_slice(order[p - 1], order[p]) != 0) {
        group_first.push_back(order[p]);
        group_count.push_back(0);
      }
      group_of[size_t(order[p])] = int64_t(group_first.size()) - 1;
      ++group_count.back();
    }
    // Output position of each group: sorted order, or order of first occurrence.
    std::vector<int64_t> pos(group_first.size());
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted) {
      std::vector<int64_t> by_first(group_first.size());
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(),
                [&](int64_t a, int64_t b) { return group_first[size_t(a)] < group_first[size_t(b)]; });
      for (size_t p = 0; p < by_first.size(); ++p) pos[size_t(by_first[p])] = int64_t(p);
    }
    first.assign(group_first.size(), 0);
    counts.assign(group_first.size(), 0);
    for (size_t g = 0; g < group_first.size(); ++g) {
      first[size_t(pos[g])] = group_first[g];
      counts[size_t(pos[g])] = group_count[g];
    }
    for (int64_t i = 0; i < n; ++i) inverse[size_t(i)] = pos[size_t(group_of[size_t(i)])];
  });
  int64_t u = int64_t(first.size());
  std::vector<int64_t> yshape = flat ? std::vector<int64_t>{u} : in.shape();
  if (!flat) yshape[size_t(axis)] = u;
  Tensor& y = ctx.allocate_output(0, in.dtype(), yshape);
  size_t es = dtype_size(in.dtype()), chunk = size_t(inner) * es;
  const auto* src = static_cast<const char*>(in.raw());
  auto* dst = static_cast<char*>(y.raw());
  if (chunk)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < u; ++j)
        std::memcpy(dst + size_t(o * u + j) * chunk, src + size_t(o * n + first[size_t(j)]) * chunk, chunk);
  auto put = [&](size_t k, const std::vector<int64_t>& v) {
    if (k >= ctx.num_outputs()) return;
    Tensor& t = ctx.allocate_output(k, DType::i64, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
  };
  put(1, first);
  put(2, inverse);
  put(3, counts);
}

// ---- layout rearrangements

CUVIL_REF_KERNEL(DepthToSpace) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t b = ctx.i("blocksize");
  bool crd = ctx.s("mode") == "CRD";
  int64_t N = out.dim(0), C = out.dim(1), H = in.dim(2), W = in.dim(3);
  int64_t IC = in.dim(1);
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in);
    U* dst = elems<U>(out);
    int64_t e = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H * b; ++y)
          for (int64_t x = 0; x < W * b; ++x, ++e) {
            int64_t by = y % b, bx = x % b;
            // DCR: channel blocks outermost (depth, column, row); CRD: the output channel outermost.
            int64_t ic = crd ? (c * b + by) * b + bx : (by * b + bx) * C + c;
            dst[e] = src[((n * IC + ic) * H + y / b) * W + x / b];
          }
  });
}

CUVIL_REF_KERNEL(SpaceToDepth) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t b = ctx.i("blocksize");
  int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
  int64_t OH = out.dim(2), OW = out.dim(3), OC = out.dim(1);
  bool crd = ctx.s("mode") == "CRD";
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in);
    U* dst = elems<U>(out);
    int64_t e = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oc = 0; oc < OC; ++oc) {
        // DCR: the block offset outermost in the output channel; CRD: the input channel outermost.
        int64_t c = crd ? oc / (b * b) : oc % C, blk = crd ? oc % (b * b) : oc / C, by = blk / b, bx = blk % b;
        for (int64_t y = 0; y < OH; ++y)
          for (int64_t x = 0; x < OW; ++x, ++e) dst[e] = src[((n * C + c) * H + y * b + by) * W + x * b + bx];
      }
  });
}

CUVIL_REF_KERNEL(ReverseSequence) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  size_t ba = size_t(ctx.i("batch_axis")), ta = size_t(ctx.i("time_axis"));
  std::vector<int64_t> lens = ctx.input(1).to_i64_vector();
  int64_t batch = in.dim(ba), steps = in.dim(ta);
  if (int64_t(lens.size()) != batch)
    ctx.error("sequence_lens has ", lens.size(), " entries for a batch of ", batch);
  for (int64_t l : lens)
    if (l < 0 || l > steps) ctx.error("sequence length ", l, " is out of range [0, ", steps, "]");
  std::vector<int64_t> s = strides_of(in.shape());
  visit_width(dtype_size(in.dtype()), [&]<class U>() {
    const U* src = elems<U>(in);
    U* dst = elems<U>(out);
    MultiIndex it(in.shape(), {});
    for (int64_t e = 0; e < in.numel(); ++e, it.next()) {
      int64_t t = it.index()[ta], len = lens[size_t(it.index()[ba])];
      int64_t from = t < len ? e + (len - 1 - 2 * t) * s[ta] : e;
      dst[e] = src[from];
    }
  });
}

}  // namespace cuvil

namespace cuvil {

// The bytes as they are: a bool's byte reads as a u8 0/1, an f32's four as an i32 (both sides are host order).
CUVIL_REF_KERNEL(BitCast) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.nbytes() != x.nbytes()) ctx.error("output holds ", y.nbytes(), " bytes, input ", x.nbytes());
  if (x.nbytes() > 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
}

}  // namespace cuvil
