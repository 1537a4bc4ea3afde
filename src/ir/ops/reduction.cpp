// Op definitions (arity, attributes, shape inference) of the reduction family: Reduce*, ArgMax/ArgMin, the softmax
// family, CumSum, TopK, the normalizations and the two classification losses.
//
// Differences from ONNX (opset <= 17), all deliberate:
//   - Every Reduce* op has the opset-18 form: `axes` is an optional int64 input (absent or empty: all axes, unless
//     noop_with_empty_axes=1), with attributes keepdims and noop_with_empty_axes. The ONNX importer moves the
//     `axes` attribute of older opsets into a constant input.
//   - Softmax/LogSoftmax/Hardmax have the opset-13 form (one axis). The importer expresses the opset < 13 form
//     (flatten to 2-D at `axis`) as Flatten + op(axis=-1) + Reshape back to Shape(input).
//   - bf16 is accepted wherever ONNX accepts f16, even where an op's ONNX type list predates bf16 (TopK,
//     InstanceNormalization, NegativeLogLikelihoodLoss, ...), so that a graph lowered to bf16 keeps working.
//   - NegativeLogLikelihoodLoss/SoftmaxCrossEntropyLoss: ONNX's `ignore_index` has no default; absent, no class is
//     ignored. The schema's default is a value no valid target can take, and kernels test for presence.
#include <span>

#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

using infer::normalize_axis;

constexpr DType kFloatTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64};
constexpr DType kReduceTypes[] = {DType::u32, DType::u64, DType::i32,  DType::i64,
                                  DType::f16, DType::bf16, DType::f32, DType::f64};
constexpr DType kReduceMinMaxTypes[] = {DType::u8,  DType::i8,   DType::u32, DType::u64, DType::i32,   DType::i64,
                                        DType::f16, DType::bf16, DType::f32, DType::f64, DType::boolean};  // bool: 20
// ArgMax/ArgMin and TopK: every number type.
constexpr DType kNumericTypes[] = {DType::u8,  DType::u16, DType::u32, DType::u64,  DType::i8,  DType::i16,
                                   DType::i32, DType::i64, DType::f16, DType::bf16, DType::f32, DType::f64};
constexpr DType kIndexTypes[] = {DType::i32, DType::i64};
constexpr DType kInt64Only[] = {DType::i64};

// Sentinel default of the losses' ignore_index (see the file comment).
constexpr int64_t kNoIgnoreIndex = INT64_MIN;

void expect_dtype_in(const InferContext& c, size_t i, std::span<const DType> allowed, const char* what) {
  DType t = c.input_dtype(i);
  for (DType a : allowed)
    if (a == t) return;
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  c.error(what, " (input ", i, ") has dtype ", dtype_name(t), "; expected one of ", list);
}

void expect_rank(const InferContext& c, size_t i, size_t rank, const char* what) {
  if (c.input_rank(i) != rank) c.error(what, " (input ", i, ") must have rank ", rank, ", got ", c.input_shape(i).str());
}

bool is_const(const Dim& d, int64_t v) { return d.is_const() && d.value() == v; }

// Fails when two dims are both constant and differ.
void expect_same_dim(const InferContext& c, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_const() && b.is_const() && a.value() != b.value())
    c.error(what, ": ", a.value(), " vs ", b.value());
}

// The contents of an integer input when inference can see them: a constant, or a value whose elements are known
// constant dims (e.g. computed from shapes).
std::optional<std::vector<int64_t>> known_ints(InferContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  if (auto v = infer::const_ints(c, i)) return v;
  const std::vector<Dim>* d = c.input_dims_value(i);
  if (!d) return std::nullopt;
  std::vector<int64_t> r;
  for (const Dim& x : *d) {
    if (!x.is_const()) return std::nullopt;
    r.push_back(x.value());
  }
  return r;
}

// Normalizes a list of axes and rejects duplicates; returns a per-dim mask.
std::vector<bool> axes_mask(const InferContext& c, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<bool> mask(size_t(rank), false);
  for (int64_t a : axes) {
    int64_t n = normalize_axis(c, a, rank);
    if (mask[size_t(n)]) c.error("axis ", a, " is given more than once in axes");
    mask[size_t(n)] = true;
  }
  return mask;
}

// ---- Reduce*

enum class ReduceFold { None, Sum, Prod, Max, Min };

// Shape (and, for shape-carrying int vectors, symbolic contents) of a Reduce* op's output.
void infer_reduce(InferContext& c, std::span<const DType> types, ReduceFold fold) {
  expect_dtype_in(c, 0, types, "data");
  const Shape& in = c.input_shape(0);
  if (!in.rank_known()) return c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
  int64_t rank = int64_t(c.input_rank(0));
  bool keepdims = c.i("keepdims") != 0;
  bool noop = c.i("noop_with_empty_axes") != 0;
  std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{};
  if (c.has_input(1)) {
    expect_dtype_in(c, 1, kInt64Only, "axes");
    if (c.input_shape(1).rank_known() && c.input_rank(1) != 1)
      c.error("axes (input 1) must be a 1-D tensor, got shape ", c.input_shape(1).str());
    axes = known_ints(c, 1);
  }
  DType dt = c.input_dtype(0);
  if (!axes) {
    // Which axes is only known at run time.
    const Shape& as = c.input_shape(1);
    std::optional<int64_t> count;
    if (as.rank_known() && as[0].is_const()) count = as[0].value();
    if (count && *count == 0) {
      if (noop) c.set_output(0, dt, in);
      else c.set_output(0, dt, keepdims ? Shape(std::vector<Dim>(size_t(rank), Dim(1))) : Shape());
    } else if (keepdims) {
      std::vector<Dim> d;
      for (const Dim& x : in.dims()) d.push_back(is_const(x, 1) ? Dim(1) : c.fresh_dim());
      c.set_output(0, dt, Shape(d));
    } else if (count && *count <= rank) {
      c.set_output(0, dt, infer::fresh_shape(c, size_t(rank - *count)));
    } else {
      c.set_output(0, dt, Shape::unknown_rank());
    }
    return;
  }
  if (axes->empty() && noop) {
    c.set_output(0, dt, in);
    if (const std::vector<Dim>* v = c.input_dims_value(0)) c.set_output_dims_value(0, *v);
    return;
  }
  std::vector<bool> mask = axes->empty() ? std::vector<bool>(size_t(rank), true) : axes_mask(c, *axes, rank);
  std::vector<Dim> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[size_t(d)]) out.push_back(in[size_t(d)]);
    else if (keepdims) out.push_back(Dim(1));
  }
  c.set_output(0, dt, Shape(out));
  // Reducing a shape vector (e.g. ReduceProd(Shape(x)) = element count) keeps its symbolic value.
  if (rank == 1 && mask[0] && fold != ReduceFold::None) {
    const std::vector<Dim>* v = c.input_dims_value(0);
    if (!v || (v->empty() && (fold == ReduceFold::Max || fold == ReduceFold::Min))) return;
    Dim r = fold == ReduceFold::Prod ? Dim(1) : Dim(0);
    for (size_t k = 0; k < v->size(); ++k) {
      const Dim& x = (*v)[k];
      switch (fold) {
        case ReduceFold::Sum: r = r + x; break;
        case ReduceFold::Prod: r = r * x; break;
        case ReduceFold::Max: r = k == 0 ? x : Dim::max(r, x); break;
        case ReduceFold::Min: r = k == 0 ? x : Dim::min(r, x); break;
        case ReduceFold::None: break;
      }
    }
    c.set_output_dims_value(0, {r});
  }
}

void define_reduce(OpSchema& s, std::span<const DType> types, ReduceFold fold) {
  s.inputs(1, 2)
      .outputs(1, 1)
      .attr("keepdims", AttrKind::Int, int64_t(1))
      .attr("noop_with_empty_axes", AttrKind::Int, int64_t(0))
      .infer_with([types, fold](InferContext& c) { infer_reduce(c, types, fold); });
}

// ---- ArgMax / ArgMin

void define_arg_reduce(OpSchema& s) {
  s.inputs(1, 1)
      .outputs(1, 1)
      .attr("axis", AttrKind::Int, int64_t(0))
      .attr("keepdims", AttrKind::Int, int64_t(1))
      .attr("select_last_index", AttrKind::Int, int64_t(0))
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kNumericTypes, "data");
        const Shape& in = c.input_shape(0);
        if (!in.rank_known()) return c.set_output(0, DType::i64, Shape::unknown_rank());
        int64_t rank = int64_t(c.input_rank(0));
        int64_t axis = normalize_axis(c, c.i("axis"), rank);
        if (is_const(in[size_t(axis)], 0)) c.error("cannot take the index of an extreme over the empty axis ", axis);
        std::vector<Dim> out = in.dims();
        if (c.i("keepdims")) out[size_t(axis)] = Dim(1);
        else out.erase(out.begin() + axis);
        c.set_output(0, DType::i64, Shape(out));
      });
}

// ---- Softmax family

void define_softmax_like(OpSchema& s) {
  s.inputs(1, 1).outputs(1, 1).attr("axis", AttrKind::Int, int64_t(-1)).infer_with([](InferContext& c) {
    expect_dtype_in(c, 0, kFloatTypes, "input");
    if (c.input_shape(0).rank_known()) normalize_axis(c, c.i("axis"), int64_t(c.input_rank(0)));
    infer::same_as_input(c);
  });
}

// ---- Losses

// NegativeLogLikelihoodLoss(input, target, weight) and SoftmaxCrossEntropyLoss(scores, labels, weights) share
// their inputs' rules: input [N, C, d1..dk] float, target [N, d1..dk] int32/int64, weight [C].
void infer_loss(InferContext& c, bool with_log_prob) {
  expect_dtype_in(c, 0, kFloatTypes, "input");
  expect_dtype_in(c, 1, kIndexTypes, "target");
  const Shape& x = c.input_shape(0);
  const Shape& t = c.input_shape(1);
  size_t r = c.input_rank(0);
  if (r < 2) c.error("input (input 0) must have rank >= 2 ([N, C, d1, ...]), got ", x.str());
  if (c.input_rank(1) != r - 1)
    c.error("target (input 1) must have rank ", r - 1, " ([N, d1, ...]) for input ", x.str(), ", got ", t.str());
  for (size_t d = 0; d + 1 < r; ++d)
    expect_same_dim(c, t[d], x[d == 0 ? 0 : d + 1], str_cat("target ", t.str(), " does not match input ", x.str()));
  if (c.has_input(2)) {
    infer::expect_same_dtype(c, 0, 2);
    expect_rank(c, 2, 1, "weight");
    expect_same_dim(c, c.input_shape(2)[0], x[1], "weight must have C elements");
  }
  const std::string& red = c.s("reduction");
  if (red != "none" && red != "sum" && red != "mean")
    c.error("reduction must be 'none', 'sum' or 'mean', got '", red, "'");
  c.set_output(0, c.input_dtype(0), red == "none" ? t : Shape());
  if (with_log_prob) c.set_output(1, c.input_dtype(0), x);
}

void define_loss(OpSchema& s, bool with_log_prob) {
  s.inputs(2, 3)
      .outputs(1, with_log_prob ? 2 : 1)
      .attr("ignore_index", AttrKind::Int, kNoIgnoreIndex)
      .attr("reduction", AttrKind::String, std::string("mean"))
      .infer_with([with_log_prob](InferContext& c) { infer_loss(c, with_log_prob); });
}

// Fails unless input i is a 1-D tensor of `c_dim` elements with a float dtype.
void expect_channel_param(const InferContext& c, size_t i, const Dim& c_dim, const char* what) {
  expect_dtype_in(c, i, kFloatTypes, what);
  expect_rank(c, i, 1, what);
  expect_same_dim(c, c.input_shape(i)[0], c_dim, str_cat(what, " must have one element per channel"));
}

}  // namespace

CUVIL_DEFINE_OP(ReduceSum) { define_reduce(s, kReduceTypes, ReduceFold::Sum); }
CUVIL_DEFINE_OP(ReduceMean) { define_reduce(s, kReduceTypes, ReduceFold::None); }
CUVIL_DEFINE_OP(ReduceMax) { define_reduce(s, kReduceMinMaxTypes, ReduceFold::Max); }
CUVIL_DEFINE_OP(ReduceMin) { define_reduce(s, kReduceMinMaxTypes, ReduceFold::Min); }
CUVIL_DEFINE_OP(ReduceProd) { define_reduce(s, kReduceTypes, ReduceFold::Prod); }
CUVIL_DEFINE_OP(ReduceL1) { define_reduce(s, kReduceTypes, ReduceFold::None); }
CUVIL_DEFINE_OP(ReduceL2) { define_reduce(s, kReduceTypes, ReduceFold::None); }
CUVIL_DEFINE_OP(ReduceLogSum) { define_reduce(s, kReduceTypes, ReduceFold::None); }
CUVIL_DEFINE_OP(ReduceLogSumExp) { define_reduce(s, kReduceTypes, ReduceFold::None); }
CUVIL_DEFINE_OP(ReduceSumSquare) { define_reduce(s, kReduceTypes, ReduceFold::None); }

CUVIL_DEFINE_OP(ArgMax) { define_arg_reduce(s); }
CUVIL_DEFINE_OP(ArgMin) { define_arg_reduce(s); }

CUVIL_DEFINE_OP(Softmax) { define_softmax_like(s); }
CUVIL_DEFINE_OP(LogSoftmax) { define_softmax_like(s); }
CUVIL_DEFINE_OP(Hardmax) { define_softmax_like(s); }

// CumSum(x, axis): axis is an int32/int64 scalar (or 1-element 1-D tensor), only needed by the kernel.
CUVIL_DEFINE_OP(CumSum) {
  s.inputs(2, 2)
      .outputs(1, 1)
      .attr("exclusive", AttrKind::Int, int64_t(0))
      .attr("reverse", AttrKind::Int, int64_t(0))
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kReduceTypes, "x");
        expect_dtype_in(c, 1, kIndexTypes, "axis");
        if (!c.input_shape(0).rank_known()) return infer::same_as_input(c);
        int64_t rank = int64_t(c.input_rank(0));
        const Shape& as = c.input_shape(1);
        if (as.rank_known() && (as.rank() > 1 || (as.rank() == 1 && !as[0].is_const()) ||
                                (as.rank() == 1 && as[0].value() != 1)))
          c.error("axis (input 1) must be a scalar, got shape ", as.str());
        if (auto a = known_ints(c, 1); a && a->size() == 1) normalize_axis(c, (*a)[0], rank);
        infer::same_as_input(c);
      });
}

// CumProd(x, axis): CumSum's form and inference, products instead of sums (ONNX opset 26).
CUVIL_DEFINE_OP(CumProd) { define_op_CumSum(s); }

// TopK(X, K) -> Values, Indices: K is a 1-element int64 tensor; the axis dim becomes K.
CUVIL_DEFINE_OP(TopK) {
  s.inputs(2, 2)
      .outputs(1, 2)
      .attr("axis", AttrKind::Int, int64_t(-1))
      .attr("largest", AttrKind::Int, int64_t(1))
      .attr("sorted", AttrKind::Int, int64_t(1))
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kNumericTypes, "X");
        expect_dtype_in(c, 1, kInt64Only, "K");
        const Shape& in = c.input_shape(0);
        if (!in.rank_known()) {
          c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
          c.set_output(1, DType::i64, Shape::unknown_rank());
          return;
        }
        int64_t rank = int64_t(c.input_rank(0));
        int64_t axis = normalize_axis(c, c.i("axis"), rank);
        const Shape& ks = c.input_shape(1);
        if (ks.rank_known() && (ks.rank() > 1 || (ks.rank() == 1 && ks[0].is_const() && ks[0].value() != 1)))
          c.error("K (input 1) must hold exactly one value, got shape ", ks.str());
        Dim k = c.fresh_dim();
        if (const std::vector<Dim>* kv = c.input_dims_value(1); kv && kv->size() == 1) {
          k = (*kv)[0];
          if (k.is_const() && k.value() < 0) c.error("K must be >= 0, got ", k.value());
          const Dim& n = in[size_t(axis)];
          if (k.is_const() && n.is_const() && k.value() > n.value())
            c.error("K = ", k.value(), " is larger than axis ", axis, " of X ", in.str());
        }
        std::vector<Dim> out = in.dims();
        out[size_t(axis)] = k;
        c.set_output(0, c.input_dtype(0), Shape(out));
        c.set_output(1, DType::i64, Shape(out));
      });
}

// LayerNormalization(X, Scale, B?) -> Y, Mean?, InvStdDev?: normalizes over dims [axis, rank); Scale and B
// broadcast (numpy rules) to X's shape. Mean/InvStdDev have dtype stash_type and shape X[:axis] + [1, ...].
CUVIL_DEFINE_OP(LayerNormalization) {
  s.inputs(2, 3)
      .outputs(1, 3)
      .attr("axis", AttrKind::Int, int64_t(-1))
      .attr("epsilon", AttrKind::Float, 1e-5)
      .attr("stash_type", AttrKind::Int, int64_t(1))
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kFloatTypes, "X");
        const Shape& x = c.input_shape(0);
        int64_t rank = int64_t(c.input_rank(0));
        int64_t axis = normalize_axis(c, c.i("axis"), rank);
        for (size_t i = 1; i < 3; ++i) {
          if (!c.has_input(i)) continue;
          infer::expect_same_dtype(c, 0, i);
          const Shape& p = c.input_shape(i);
          if (!p.rank_known()) continue;
          if (int64_t(p.rank()) > rank) c.error(i == 1 ? "Scale " : "B ", p.str(), " has more dims than X ", x.str());
          for (size_t d = 0; d < p.rank(); ++d) {
            const Dim& pd = p[d];
            const Dim& xd = x[size_t(rank) - p.rank() + d];
            if (pd.is_const() && pd.value() != 1 && xd.is_const() && pd.value() != xd.value())
              c.error(i == 1 ? "Scale " : "B ", p.str(), " does not broadcast to X ", x.str());
          }
        }
        auto stash = dtype_from_onnx_id(int(c.i("stash_type")));
        if (!stash || (*stash != DType::f32 && *stash != DType::bf16))
          c.error("stash_type must be 1 (float) or 16 (bfloat16), got ", c.i("stash_type"));
        std::vector<Dim> stat = x.dims();
        for (int64_t d = axis; d < rank; ++d) stat[size_t(d)] = Dim(1);
        c.set_output(0, c.input_dtype(0), x);
        c.set_output(1, *stash, Shape(stat));
        c.set_output(2, *stash, Shape(stat));
      });
}

// InstanceNormalization(input [N, C, d...], scale [C], B [C]).
CUVIL_DEFINE_OP(InstanceNormalization) {
  s.inputs(3, 3).outputs(1, 1).attr("epsilon", AttrKind::Float, 1e-5).infer_with([](InferContext& c) {
    expect_dtype_in(c, 0, kFloatTypes, "input");
    const Shape& x = c.input_shape(0);
    if (c.input_rank(0) < 2) c.error("input must have rank >= 2 ([N, C, d1, ...]), got ", x.str());
    expect_channel_param(c, 1, x[1], "scale");
    expect_channel_param(c, 2, x[1], "B");
    infer::expect_same_dtype(c, 0, 1);
    infer::expect_same_dtype(c, 0, 2);
    infer::same_as_input(c);
  });
}

// BatchNormalization(X [N, C, d...], scale, B, input_mean, input_var: [C]) -> Y, running_mean?, running_var?
// (opset 15). Rank-1 X is [N] with one channel. The running statistics exist only with training_mode=1.
CUVIL_DEFINE_OP(BatchNormalization) {
  s.inputs(5, 5)
      .outputs(1, 3)
      .attr("epsilon", AttrKind::Float, 1e-5)
      .attr("momentum", AttrKind::Float, 0.9)
      .attr("training_mode", AttrKind::Int, int64_t(0))
      .allow_inplace(0, 0)
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kFloatTypes, "X");
        const Shape& x = c.input_shape(0);
        if (c.input_rank(0) < 1) c.error("X must have rank >= 1, got a scalar");
        Dim ch = x.rank() > 1 ? x[1] : Dim(1);
        const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
        for (size_t i = 1; i < 5; ++i) expect_channel_param(c, i, ch, names[i]);
        infer::expect_same_dtype(c, 1, 2);
        infer::expect_same_dtype(c, 3, 4);
        if (c.i("training_mode") == 0 && c.num_outputs() > 1)
          c.error("running_mean/running_var outputs need training_mode=1");
        c.set_output(0, c.input_dtype(0), x);
        c.set_output(1, c.input_dtype(3), Shape({ch}));
        c.set_output(2, c.input_dtype(4), Shape({ch}));
      });
}

// LRN(X [N, C, d...]): normalizes each element over a window of `size` neighbouring channels.
CUVIL_DEFINE_OP(LRN) {
  s.inputs(1, 1)
      .outputs(1, 1)
      .attr("alpha", AttrKind::Float, 1e-4)
      .attr("beta", AttrKind::Float, 0.75)
      .attr("bias", AttrKind::Float, 1.0)
      .required_attr("size", AttrKind::Int)
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kFloatTypes, "X");
        if (c.input_rank(0) < 2) c.error("X must have rank >= 2 ([N, C, d1, ...]), got ", c.input_shape(0).str());
        if (c.i("size") <= 0) c.error("size must be positive, got ", c.i("size"));
        infer::same_as_input(c);
      });
}

// MeanVarianceNormalization(X): (X - mean) / (sqrt(var) + 1e-9) over `axes`.
CUVIL_DEFINE_OP(MeanVarianceNormalization) {
  s.inputs(1, 1)
      .outputs(1, 1)
      .attr("axes", AttrKind::Ints, std::vector<int64_t>{0, 2, 3})
      .infer_with([](InferContext& c) {
        expect_dtype_in(c, 0, kFloatTypes, "X");
        axes_mask(c, c.ints("axes"), int64_t(c.input_rank(0)));
        infer::same_as_input(c);
      });
}

CUVIL_DEFINE_OP(NegativeLogLikelihoodLoss) { define_loss(s, /*with_log_prob=*/false); }
CUVIL_DEFINE_OP(SoftmaxCrossEntropyLoss) { define_loss(s, /*with_log_prob=*/true); }

}  // namespace cuvil
