// Op definitions of the sampling family: GridSample (values of an image at normalized grid coordinates) and
// Col2Im (column blocks summed back into an image). Resize lives with the recurrent family for history's sake.
//
// Differences from ONNX: GridSample takes the opset-22 mode names ("linear", "nearest", "cubic"); the importer
// renames opset 16's "bilinear"/"bicubic". Its inputs are floats (ONNX also allows integer images).
#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

constexpr std::initializer_list<DType> kFloats = {DType::f16, DType::bf16, DType::f32, DType::f64};

void infer_grid_sample(InferContext& c) {
  infer::expect_dtype(c, 0, kFloats);
  infer::expect_dtype(c, 1, kFloats);
  const std::string& mode = c.s("mode");
  if (mode != "linear" && mode != "nearest" && mode != "cubic")
    c.error("mode '", mode, "' is not one of linear, nearest, cubic");
  const std::string& pad = c.s("padding_mode");
  if (pad != "zeros" && pad != "border" && pad != "reflection")
    c.error("padding_mode '", pad, "' is not one of zeros, border, reflection");
  const Shape& x = c.input_shape(0);
  const Shape& g = c.input_shape(1);
  if (!x.rank_known() || !g.rank_known()) {
    c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return;
  }
  size_t r = x.rank();
  if (r < 3) c.error("X (input 0) must have rank >= 3, got ", x.str());
  if (g.rank() != r) c.error("grid (input 1) must have X's rank ", r, ", got ", g.str());
  if (g[r - 1].is_const() && g[r - 1].value() != int64_t(r - 2))
    c.error("grid (input 1) must end in ", r - 2, " coordinates, got ", g.str());
  if (mode == "cubic" && r != 4) c.error("mode 'cubic' samples 2-D images only (X of rank 4), got ", x.str());
  std::vector<Dim> out = {x[0], x[1]};
  for (size_t i = 1; i + 1 < r; ++i) out.push_back(g[i]);
  c.set_output(0, c.input_dtype(0), Shape(out));
}

void infer_col2im(InferContext& c) {
  infer::expect_dtype(c, 0, kFloats);
  infer::expect_dtype(c, 1, {DType::i64});
  infer::expect_dtype(c, 2, {DType::i64});
  const Shape& x = c.input_shape(0);
  if (x.rank_known() && x.rank() != 3) c.error("input 0 must have rank 3 [N, C*prod(block), L], got ", x.str());
  auto image = infer::const_ints(c, 1);
  auto block = infer::const_ints(c, 2);
  const Shape& is = c.input_shape(1);
  if (!is.rank_known() || is.rank() != 1 || !is[0].is_const()) {
    c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return;
  }
  size_t r = size_t(is[0].value());
  std::vector<Dim> out;
  out.push_back(x.rank_known() ? x[0] : c.fresh_dim());
  if (block && x.rank_known() && x[1].is_const()) {
    if (block->size() != r) c.error("block_shape has ", block->size(), " dims, image_shape ", r);
    int64_t prod = 1;
    for (int64_t b : *block) {
      if (b <= 0) c.error("block_shape must be positive");
      prod *= b;
    }
    if (x[1].value() % prod != 0) c.error("dim 1 of input 0 (", x[1].value(), ") is not a multiple of ", prod);
    out.push_back(Dim(x[1].value() / prod));
  } else {
    out.push_back(c.fresh_dim());
  }
  for (size_t i = 0; i < r; ++i) out.push_back(image ? Dim(image->at(i)) : c.fresh_dim());
  c.set_output(0, c.input_dtype(0), Shape(out));
}

}  // namespace

// GridSample(X [N, C, D1..Dr], grid [N, O1..Or, r]) -> Y [N, C, O1..Or]; grid's last dim holds (x, y, ...):
// innermost spatial dim first.
CUVIL_DEFINE_OP(GridSample) {
  s.inputs(2, 2)
      .attr("align_corners", AttrKind::Int, int64_t(0))
      .attr("mode", AttrKind::String, "linear")
      .attr("padding_mode", AttrKind::String, "zeros")
      .infer_with(infer_grid_sample);
}

// Col2Im(input [N, C*prod(block), L], image_shape [r], block_shape [r]) -> [N, C, image...]; empty dilations,
// pads or strides mean 1, 0 and 1 on every spatial dim.
CUVIL_DEFINE_OP(Col2Im) {
  s.inputs(3, 3)
      .attr("dilations", AttrKind::Ints, std::vector<int64_t>{})
      .attr("pads", AttrKind::Ints, std::vector<int64_t>{})
      .attr("strides", AttrKind::Ints, std::vector<int64_t>{})
      .infer_with(infer_col2im);
}

}  // namespace cuvil
