// Reference kernels of the detection family (semantics and IR forms: src/ir/ops/detection.cpp), following the
// ONNX reference implementation (onnx/reference/ops/op_roi_align.py, op_non_max_suppression.py) step for step.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/reduction_util.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// One bilinear sample: four pixel offsets and their weights (all zero outside the image).
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

Sample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > double(height) || x < -1.0 || x > double(width)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = int64_t(y), x_low = int64_t(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = double(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = double(x_low);
  } else {
    x_high = x_low + 1;
  }
  double ly = y - double(y_low), lx = x - double(x_low), hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx, s.w[1] = hy * lx, s.w[2] = ly * hx, s.w[3] = ly * lx;
  return s;
}

// Whether box i's IoU with box j exceeds the threshold (boxes as 4 floats: corners in either order, or
// center_point_box: center x, center y, width, height).
bool suppresses(const double* a, const double* b, bool center, double iou_threshold) {
  double ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!center) {
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]), ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]), by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
  } else {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  double ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  double iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  double uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

}  // namespace

CUVIL_REF_KERNEL(RoiAlign) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois_t = ctx.input(1);
  const Tensor& bi = ctx.input(2);
  int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois_t.dim(0);
  if (bi.numel() != R) ctx.error("batch_indices has ", bi.numel(), " entries for ", R, " rois");
  int64_t PH = ctx.i("output_height"), PW = ctx.i("output_width"), ratio = ctx.i("sampling_ratio");
  double scale = ctx.f("spatial_scale");
  bool half_pixel = ctx.s("coordinate_transformation_mode") == "half_pixel";
  bool is_max = ctx.s("mode") == "max";
  std::vector<double> xs = ref::to_f64_vector(x), rois = ref::to_f64_vector(rois_t);
  std::vector<int64_t> batch = bi.to_i64_vector();
  Tensor& y = ctx.output(0);
  double offset = half_pixel ? 0.5 : 0.0;
  for (int64_t n = 0; n < R; ++n) {
    if (batch[size_t(n)] < 0 || batch[size_t(n)] >= x.dim(0))
      ctx.error("batch index ", batch[size_t(n)], " is outside X's ", x.dim(0), " images");
    const double* roi = rois.data() + n * 4;
    double sw = roi[0] * scale - offset, sh = roi[1] * scale - offset;
    double rw = roi[2] * scale - offset - sw, rh = roi[3] * scale - offset - sh;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    double bh = rh / double(PH), bw = rw / double(PW);
    int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(PH)));
    int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(PW)));
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < C; ++c) {
      const double* img = xs.data() + (batch[size_t(n)] * C + c) * H * W;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              Sample s = bilinear_sample(yy, xx, H, W);
              if (!is_max) {
                for (int k = 0; k < 4; ++k) acc += s.w[k] * img[s.pos[k]];
              } else {
                // The ONNX reference's max mode: the largest weighted corner of each sample.
                double v = s.w[0] * img[s.pos[0]];
                for (int k = 1; k < 4; ++k) v = std::max(v, s.w[k] * img[s.pos[k]]);
                acc = first ? v : std::max(acc, v);
                first = false;
              }
            }
          }
          if (!is_max) acc /= count;
          ref::set_f64(ctx, y, ((n * C + c) * PH + ph) * PW + pw, acc);
        }
    }
  }
}

CUVIL_REF_KERNEL(NonMaxSuppression) {
  const Tensor& boxes_t = ctx.input(0);
  const Tensor& scores_t = ctx.input(1);
  int64_t B = boxes_t.dim(0), nb = boxes_t.dim(1), nc = scores_t.dim(1);
  if (scores_t.dim(0) != B || scores_t.dim(2) != nb)
    ctx.error("scores ", scores_t.type_str(), " do not match boxes ", boxes_t.type_str());
  auto scalar = [&](size_t i) -> const Tensor* {
    if (!ctx.has_input(i) || ctx.input(i).numel() == 0) return nullptr;
    if (ctx.input(i).numel() != 1) ctx.error("input ", i, " must hold one value, got ", ctx.input(i).type_str());
    return &ctx.input(i);
  };
  int64_t max_out = 0;
  if (const Tensor* t = scalar(2)) max_out = std::max<int64_t>(t->get_i64(0), 0);
  double iou = 0;
  if (const Tensor* t = scalar(3)) iou = t->get_f64(0);
  const Tensor* score_thr = scalar(4);
  double thr = score_thr ? score_thr->get_f64(0) : 0;
  bool center = ctx.i("center_point_box") != 0;
  std::vector<double> boxes = ref::to_f64_vector(boxes_t), scores = ref::to_f64_vector(scores_t);
  std::vector<int64_t> picked;  // (batch, class, box) triples
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < nc; ++c) {
      const double* sc = scores.data() + (b * nc + c) * nb;
      order.clear();
      for (int64_t i = 0; i < nb; ++i)
        if (!score_thr || sc[i] > thr) order.push_back(i);
      // Highest score first; equal scores: lower index first (NaN last, so the order stays strict and weak).
      auto key = [&](int64_t i) { return std::isnan(sc[i]) ? -INFINITY : sc[i]; };
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return key(i) > key(j); });
      kept.clear();
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (suppresses(boxes.data() + (b * nb + i) * 4, boxes.data() + (b * nb + k) * 4, center, iou)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(i);
        picked.insert(picked.end(), {b, c, i});
      }
    }
  Tensor& y = ctx.allocate_output(0, DType::i64, {int64_t(picked.size() / 3), 3});
  std::copy(picked.begin(), picked.end(), y.data<int64_t>());
}

}  // namespace cuvil
