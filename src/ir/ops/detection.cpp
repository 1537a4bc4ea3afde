// Op definitions of the detection family: RoiAlign and NonMaxSuppression, the post-processing that detectors
// (Mask R-CNN, SSD, YOLO exports) ship inside their graphs.
#include "ir/ops/infer_util.h"

namespace cuvil {

namespace {

constexpr std::initializer_list<DType> kFloats = {DType::f16, DType::bf16, DType::f32, DType::f64};

void infer_roi_align(InferContext& c) {
  infer::expect_dtype(c, 0, kFloats);
  infer::expect_same_dtype(c, 0, 1);
  infer::expect_dtype(c, 2, {DType::i64, DType::i32});
  const std::string& mode = c.s("mode");
  if (mode != "avg" && mode != "max") c.error("mode '", mode, "' is not one of avg, max");
  const std::string& ct = c.s("coordinate_transformation_mode");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    c.error("coordinate_transformation_mode '", ct, "' is not one of half_pixel, output_half_pixel");
  if (c.i("output_height") <= 0 || c.i("output_width") <= 0) c.error("output_height and output_width must be > 0");
  if (c.i("sampling_ratio") < 0) c.error("sampling_ratio must be >= 0");
  const Shape& x = c.input_shape(0);
  const Shape& rois = c.input_shape(1);
  if (x.rank_known() && x.rank() != 4) c.error("X (input 0) must have rank 4, got ", x.str());
  if (rois.rank_known() && (rois.rank() != 2 || (rois[1].is_const() && rois[1].value() != 4)))
    c.error("rois (input 1) must be [num_rois, 4], got ", rois.str());
  Dim n = rois.rank_known() ? rois[0] : c.fresh_dim();
  Dim ch = x.rank_known() ? x[1] : c.fresh_dim();
  c.set_output(0, c.input_dtype(0), Shape({n, ch, Dim(c.i("output_height")), Dim(c.i("output_width"))}));
}

void infer_nms(InferContext& c) {
  infer::expect_dtype(c, 0, {DType::f32, DType::f64, DType::f16});
  infer::expect_same_dtype(c, 0, 1);
  if (c.has_input(2)) infer::expect_dtype(c, 2, {DType::i64});
  if (c.has_input(3)) infer::expect_dtype(c, 3, {DType::f32});
  if (c.has_input(4)) infer::expect_dtype(c, 4, {DType::f32});
  const Shape& b = c.input_shape(0);
  const Shape& s = c.input_shape(1);
  if (b.rank_known() && (b.rank() != 3 || (b[2].is_const() && b[2].value() != 4)))
    c.error("boxes (input 0) must be [batches, boxes, 4], got ", b.str());
  if (s.rank_known() && s.rank() != 3) c.error("scores (input 1) must be [batches, classes, boxes], got ", s.str());
  if (c.i("center_point_box") != 0 && c.i("center_point_box") != 1) c.error("center_point_box must be 0 or 1");
  c.set_output(0, DType::i64, Shape({c.fresh_dim(), Dim(3)}));
}

}  // namespace

// RoiAlign(X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2), batch_indices [R]) -> [R, C, output_height,
// output_width] (opset 16; "half_pixel" shifts coordinates by -0.5 pixel, opset 10's form is
// "output_half_pixel").
CUVIL_DEFINE_OP(RoiAlign) {
  s.inputs(3, 3)
      .attr("coordinate_transformation_mode", AttrKind::String, "half_pixel")
      .attr("mode", AttrKind::String, "avg")
      .attr("output_height", AttrKind::Int, int64_t(1))
      .attr("output_width", AttrKind::Int, int64_t(1))
      .attr("sampling_ratio", AttrKind::Int, int64_t(0))
      .attr("spatial_scale", AttrKind::Float, 1.0)
      .infer_with(infer_roi_align);
}

// NonMaxSuppression(boxes, scores[, max_output_boxes_per_class, iou_threshold, score_threshold]) -> selected
// [K, 3] of (batch, class, box): per batch and class, boxes by falling score (ties: lower index first), each kept
// unless its IoU with a kept one exceeds the threshold. No max_output_boxes_per_class (or 0) selects nothing.
CUVIL_DEFINE_OP(NonMaxSuppression) {
  s.inputs(2, 5).attr("center_point_box", AttrKind::Int, int64_t(0)).infer_with(infer_nms);
}

}  // namespace cuvil
