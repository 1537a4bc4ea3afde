// Cases of the detection family (src/ir/ops/detection.cpp): RoiAlign in both modes and coordinate rules, rois
// reaching outside the image; NonMaxSuppression with corner and center boxes, several batches and classes,
// thresholds present and absent, a limit of 0, coarse scores (ties).
#include "harness.h"

namespace cuvil::optest {

void add_detection_cases(Cases& cs) {
  Tensor rois = tensor<float>({0, 0, 4, 4, 1.5f, 0.5f, 6.5f, 3.f, -2, -1, 3, 9, 2, 2, 2.2f, 2.1f}, {4, 4});
  for (const char* mode : {"avg", "max"})
    for (const char* ct : {"half_pixel", "output_half_pixel"})
      cs.add(OpKind::RoiAlign, std::string(mode) + ", " + ct).in(f32({2, 3, 6, 8})).in(val(rois))
          .in(val(vec<int64_t>({0, 1, 1, 0}))).attr("mode", mode).attr("coordinate_transformation_mode", ct)
          .attr("output_height", int64_t(3)).attr("output_width", int64_t(2)).attr("spatial_scale", 0.75);
  cs.add(OpKind::RoiAlign, "sampling_ratio 2").in(f32({1, 2, 5, 5})).in(val(rois))
      .in(val(vec<int64_t>({0, 0, 0, 0}))).attr("sampling_ratio", int64_t(2));

  for (int64_t center : {0, 1}) {
    std::string w = center ? ", center boxes" : "";
    cs.add(OpKind::NonMaxSuppression, "all inputs" + w).in(f32({2, 13, 4}, 0, 5)).in(f32({2, 3, 13}, 0, 1).ties(0.1))
        .in(cst(vec<int64_t>({4}))).in(cst(vec<float>({0.3f}))).in(cst(vec<float>({0.2f})))
        .attr("center_point_box", center);
    cs.add(OpKind::NonMaxSuppression, "no score threshold" + w).in(f32({1, 9, 4}, 0, 3)).in(f32({1, 2, 9}))
        .in(val(scalar<int64_t>(9))).in(val(scalar<float>(0.5f))).attr("center_point_box", center);
  }
  cs.add(OpKind::NonMaxSuppression, "limit absent").in(f32({1, 5, 4})).in(f32({1, 1, 5}));
  cs.add(OpKind::NonMaxSuppression, "no boxes").in(f32({1, 0, 4})).in(f32({1, 2, 0})).in(val(scalar<int64_t>(3)));
}

}  // namespace cuvil::optest
