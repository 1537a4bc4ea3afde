// Op definitions (arity, attributes, shape inference) of the recurrent family: RNN, GRU, LSTM and Resize.
//
// Differences from ONNX (opset 17 forms):
//   - RNN/GRU/LSTM: hidden_size may be omitted; it is then R's last dim. clip's default (+inf) means no clip.
//     A sequence_lens entry of 0 gives zeros in Y_h/Y_c (as ONNX Runtime does).
//   - Resize also accepts coordinate_transformation_mode "tf_half_pixel_for_nn" (opset 11 only, x = (y + 0.5) /
//     scale) and nearest_mode "simple" (Resize-10 and Upsample: floor on upsampled axes, ceil on downsampled
//     ones), so that older models import with their own semantics. The output size ignores roi, like ONNX's shape
//     inference and reference implementation (the spec's text mentions roi there).
//   - Resize with scales_with_sizes = 1 takes both scales and sizes: sizes sets the output dims, scales the
//     coordinate transforms. Resize-18's keep_aspect_ratio_policy imports so (one scale over the resized axes,
//     sizes = its product with each dim, rounded), as ONNX's reference computes it; ONNX itself allows only one.
//     scales may be f64 (that scale, which in f32 moves nearest-mode ties: 3.5 / (7/6) - 0.5 is 2.5 exactly).
#include <limits>

#include "ir/ops/infer_util.h"
#include "ir/ops/recurrent_common.h"

namespace cuvil {

namespace {

// Fails when a dim that must equal `want` provably differs from it.
void expect_dim(const InferContext& c, const char* what, size_t input, size_t axis, const Dim& want) {
  const Dim& got = c.input_shape(input)[axis];
  if (got.is_const() && want.is_const() && got.value() != want.value())
    c.error(what, " has shape ", c.input_shape(input).str(), ": dim ", axis, " must be ", want.value());
}

void expect_rank(const InferContext& c, const char* what, size_t input, size_t rank) {
  if (c.input_rank(input) != rank)
    c.error(what, " must have rank ", rank, ", got shape ", c.input_shape(input).str());
}

// Shared by RNN (1 gate), GRU (3) and LSTM (4). Inputs: X, W, R, B, sequence_lens, initial_h[, initial_c, P].
void infer_recurrent(InferContext& c, int gates, const std::vector<std::string>& default_acts, bool lstm) {
  const DType t = c.input_dtype(0);
  infer::expect_dtype(c, 0, {DType::f16, DType::f32, DType::f64});
  const size_t last = lstm ? 7 : 5;
  for (size_t i = 1; i <= last; ++i) {
    if (i == 4 || !c.has_input(i)) continue;
    infer::expect_same_dtype(c, 0, i);
  }
  if (c.has_input(4)) infer::expect_dtype(c, 4, {DType::i32});
  if (!c.has_input(1) || !c.has_input(2)) c.error("inputs W and R are required");

  auto dir = recurrent::parse_direction(c.s("direction"));
  if (!dir) c.error("direction '", c.s("direction"), "' must be forward, reverse or bidirectional");
  const int nd = recurrent::num_directions(*dir);
  const int64_t layout = c.i("layout");
  if (layout != 0 && layout != 1) c.error("layout must be 0 or 1, got ", layout);
  if (c.has("clip") && !(c.f("clip") > 0)) c.error("clip must be positive, got ", c.f("clip"));
  auto acts = recurrent::resolve_activations(c, nd, default_acts, /*lenient_rnn=*/gates == 1);
  if (!acts.error.empty()) c.error(acts.error);

  expect_rank(c, "X", 0, 3);
  expect_rank(c, "W", 1, 3);
  expect_rank(c, "R", 2, 3);
  const Shape& xs = c.input_shape(0);
  Dim seq = layout == 0 ? xs[0] : xs[1];
  Dim batch = layout == 0 ? xs[1] : xs[0];
  Dim input = xs[2];
  Dim hidden = c.input_shape(2)[2];
  if (c.has("hidden_size")) {
    int64_t h = c.i("hidden_size");
    if (h <= 0) c.error("hidden_size must be positive, got ", h);
    hidden = Dim(h);
  }
  expect_dim(c, "W", 1, 0, nd);
  expect_dim(c, "W", 1, 1, hidden * gates);
  expect_dim(c, "W", 1, 2, input);
  expect_dim(c, "R", 2, 0, nd);
  expect_dim(c, "R", 2, 1, hidden * gates);
  expect_dim(c, "R", 2, 2, hidden);
  if (c.has_input(3)) {
    expect_rank(c, "B", 3, 2);
    expect_dim(c, "B", 3, 0, nd);
    expect_dim(c, "B", 3, 1, hidden * (2 * gates));
  }
  if (c.has_input(4)) {
    expect_rank(c, "sequence_lens", 4, 1);
    expect_dim(c, "sequence_lens", 4, 0, batch);
  }
  // initial_h and initial_c share Y_h's layout.
  std::vector<Dim> state = layout == 0 ? std::vector<Dim>{nd, batch, hidden} : std::vector<Dim>{batch, nd, hidden};
  for (size_t i : {size_t(5), size_t(6)}) {
    if (i == 6 && !lstm) break;
    if (!c.has_input(i)) continue;
    const char* what = i == 5 ? "initial_h" : "initial_c";
    expect_rank(c, what, i, 3);
    for (size_t a = 0; a < 3; ++a) expect_dim(c, what, i, a, state[a]);
  }
  if (lstm && c.has_input(7)) {
    expect_rank(c, "P", 7, 2);
    expect_dim(c, "P", 7, 0, nd);
    expect_dim(c, "P", 7, 1, hidden * 3);
  }

  std::vector<Dim> y = layout == 0 ? std::vector<Dim>{seq, nd, batch, hidden}
                                   : std::vector<Dim>{batch, seq, nd, hidden};
  c.set_output(0, t, Shape(y));
  c.set_output(1, t, Shape(state));
  if (lstm) c.set_output(2, t, Shape(state));
}

void recurrent_attrs(OpSchema& s, std::vector<std::string> default_acts) {
  s.attr("activation_alpha", AttrKind::Floats, std::vector<double>{})
      .attr("activation_beta", AttrKind::Floats, std::vector<double>{})
      .attr("activations", AttrKind::Strings, std::move(default_acts))
      .attr("clip", AttrKind::Float, std::numeric_limits<double>::infinity())
      .attr("direction", AttrKind::String, "forward")
      .attr("hidden_size", AttrKind::Int, int64_t(0))
      .attr("layout", AttrKind::Int, int64_t(0));
}

// One output dim of Resize with a known scale: symbolic where floor(in * scale) has an exact symbolic form.
Dim scaled_dim(InferContext& c, const Dim& in, double scale) {
  if (in.is_const()) {
    double o = std::floor(double(in.value()) * scale);
    if (o > 9.0e15) c.error("scale ", scale, " gives an output dim too large to represent");
    return Dim(int64_t(o));
  }
  if (scale == 1.0) return in;
  if (scale == std::floor(scale) && scale < 1e9) return in * int64_t(scale);
  // 1/2^k is exact in float, so floor(in * scale) = in floordiv 2^k.
  for (int64_t k = 1, p = 2; k < 31; ++k, p *= 2)
    if (scale * double(p) == 1.0) return Dim::floordiv(in, p);
  return c.fresh_dim();
}

void infer_resize(InferContext& c) {
  const DType t = c.input_dtype(0);
  if (!recurrent::parse_resize_mode(c.s("mode")))
    c.error("mode '", c.s("mode"), "' must be nearest, linear or cubic");
  auto coord = recurrent::parse_coord_mode(c.s("coordinate_transformation_mode"));
  if (!coord)
    c.error("coordinate_transformation_mode '", c.s("coordinate_transformation_mode"),
            "' must be half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric or "
            "tf_crop_and_resize");
  if (!recurrent::parse_nearest_mode(c.s("nearest_mode")))
    c.error("nearest_mode '", c.s("nearest_mode"), "' must be round_prefer_floor, round_prefer_ceil, floor or ceil");
  if (c.has_input(1)) infer::expect_dtype(c, 1, {DType::f16, DType::f32, DType::f64});
  if (c.has_input(2)) infer::expect_dtype(c, 2, {DType::f32, DType::f64});  // f64: keep_aspect_ratio_policy's
  if (c.has_input(3)) infer::expect_dtype(c, 3, {DType::i64});
  const size_t rank = c.input_rank(0);
  for (size_t i = 1; i <= 3; ++i)
    if (c.has_input(i)) expect_rank(c, i == 1 ? "roi" : i == 2 ? "scales" : "sizes", i, 1);
  if (*coord == recurrent::CoordMode::TfCropAndResize) {
    if (!c.has_input(1)) c.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input");
    expect_dim(c, "roi", 1, 0, Dim(int64_t(2 * rank)));
  }

  // Whether scales / sizes are present and non-empty; nullopt when their length is not known yet.
  auto presence = [&](size_t i) -> std::optional<bool> {
    if (!c.has_input(i)) return false;
    const Dim& n = c.input_shape(i)[0];
    if (!n.is_const()) return std::nullopt;
    return n.value() > 0;
  };
  std::optional<bool> has_scales = presence(2), has_sizes = presence(3);
  const bool scales_with_sizes = c.i("scales_with_sizes") != 0;
  if (has_scales == false && has_sizes == false) c.error("one of 'scales' and 'sizes' must be given and non-empty");
  if (has_scales == true && has_sizes == true && !scales_with_sizes)
    c.error("only one of 'scales' and 'sizes' may be given (the other must be omitted or empty)");
  if (scales_with_sizes && (has_scales == false || has_sizes == false))
    c.error("scales_with_sizes needs both 'scales' and 'sizes'");
  if (scales_with_sizes && has_scales == true) expect_dim(c, "scales", 2, 0, Dim(int64_t(rank)));
  // The input that decides the output size: 3 (sizes), 2 (scales), or 0 while that is not known yet.
  size_t which = 0;
  if (has_sizes == true || has_scales == false) which = 3;
  else if (has_scales == true || has_sizes == false) which = 2;
  if (which == 0) {
    c.set_output(0, t, infer::fresh_shape(c, rank));
    return;
  }
  expect_dim(c, which == 2 ? "scales" : "sizes", which, 0, Dim(int64_t(rank)));

  const Shape& xs = c.input_shape(0);
  // Concrete shapes (always at run time): the kernel's own computation, so both agree exactly.
  if (xs.is_static() && c.input_value(which) && (!c.has_input(5 - which) || c.input_value(5 - which))) {
    auto r = recurrent::resize_axes(xs.static_dims(), c.input_value(2), c.input_value(3), scales_with_sizes);
    if (!r.error.empty()) c.error(r.error);
    std::vector<int64_t> out;
    for (auto& a : r.axes) out.push_back(a.out);
    c.set_output(0, t, Shape::of(out));
    return;
  }
  std::vector<Dim> out;
  if (which == 3) {
    const std::vector<Dim>* v = c.input_dims_value(3);
    if (v && v->size() == rank) out = *v;
  } else if (const Tensor* sc = c.input_value(2); sc && size_t(sc->numel()) == rank) {
    for (size_t i = 0; i < rank; ++i) {
      double s = sc->get_f64(int64_t(i));
      if (!(s > 0) || !std::isfinite(s)) c.error("scales[", i, "] = ", s, " must be positive and finite");
      out.push_back(scaled_dim(c, xs[i], s));
    }
  }
  if (out.empty()) {
    c.set_output(0, t, infer::fresh_shape(c, rank));
    return;
  }
  for (size_t i = 0; i < rank; ++i)
    if (out[i].is_const() && out[i].value() < 0) c.error("sizes[", i, "] = ", out[i].value(), " is negative");
  c.set_output(0, t, Shape(out));
}

}  // namespace

CUVIL_DEFINE_OP(RNN) {
  s.inputs(3, 6).outputs(0, 2);
  recurrent_attrs(s, {"Tanh", "Tanh"});
  s.infer_with([](InferContext& c) { infer_recurrent(c, 1, {"Tanh"}, false); });
}

CUVIL_DEFINE_OP(GRU) {
  s.inputs(3, 6).outputs(0, 2);
  recurrent_attrs(s, {});
  s.attr("linear_before_reset", AttrKind::Int, int64_t(0));
  s.infer_with([](InferContext& c) { infer_recurrent(c, 3, {"Sigmoid", "Tanh"}, false); });
}

CUVIL_DEFINE_OP(LSTM) {
  s.inputs(3, 8).outputs(0, 3);
  recurrent_attrs(s, {});
  s.attr("input_forget", AttrKind::Int, int64_t(0));
  s.infer_with([](InferContext& c) { infer_recurrent(c, 4, {"Sigmoid", "Tanh", "Tanh"}, true); });
}

CUVIL_DEFINE_OP(Resize) {
  s.inputs(1, 4)
      .outputs(1, 1)
      .attr("antialias", AttrKind::Int, int64_t(0))  // opset 18: linear/cubic downsampling widens the filter
      .attr("coordinate_transformation_mode", AttrKind::String, "half_pixel")
      .attr("cubic_coeff_a", AttrKind::Float, -0.75)
      .attr("exclude_outside", AttrKind::Int, int64_t(0))
      .attr("extrapolation_value", AttrKind::Float, 0.0)
      .attr("mode", AttrKind::String, "nearest")
      .attr("nearest_mode", AttrKind::String, "round_prefer_floor")
      .attr("scales_with_sizes", AttrKind::Int, int64_t(0))  // keep_aspect_ratio_policy's form (see the top)
      .infer_with(infer_resize);
}

}  // namespace cuvil
