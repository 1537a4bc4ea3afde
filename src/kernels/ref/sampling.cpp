// Reference kernels of the sampling family (semantics and IR forms: src/ir/ops/sampling.cpp), computed in double
// and rounded once; the rules follow the ONNX reference implementation (onnx/reference/ops/op_grid_sample.py,
// op_col2im.py), whose results the node suite holds.
#include <cmath>
#include <vector>

#include "kernels/ref/reduction_util.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// Folds x into [lo, hi] by reflecting at the nearer border until it lands inside.
double reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = int64_t(dx / rng);
    double r = dx - double(n) * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = int64_t(dx / rng);
    double r = dx - double(n) * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys' cubic convolution weights (a = -0.75) of the four taps around a point at fraction t past the second.
void cubic_coeffs(double t, double c[4]) {
  const double a = -0.75;
  t = std::fabs(t);
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

struct GridSampler {
  std::vector<int64_t> dims;     // spatial dims, outermost first
  std::vector<double> lo, hi;    // the borders reflection folds into
  std::string padding;
  const double* img = nullptr;   // one channel

  // The image at integer indices (per dim), by the padding rule; 0 outside for "zeros".
  double at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      int64_t i = idx[d];
      if (i < 0 || i >= dims[d]) {
        if (padding == "zeros") return 0.0;
        if (padding == "border") i = std::clamp<int64_t>(i, 0, dims[d] - 1);
        else i = std::clamp<int64_t>(int64_t(reflect(double(i), lo[d], hi[d])), 0, dims[d] - 1);
      }
      off = off * dims[d] + i;
    }
    return img[off];
  }

  // Sum over the taps of every dim (taps per dim: `n`, first index `first[d]`, weights `w[d][k]`).
  double taps(const std::vector<int64_t>& first, const std::vector<std::vector<double>>& w, int n) const {
    size_t r = dims.size();
    std::vector<int64_t> k(r, 0), idx(r);
    double sum = 0;
    while (true) {
      double wt = 1;
      for (size_t d = 0; d < r; ++d) {
        idx[d] = first[d] + k[d];
        wt *= w[d][size_t(k[d])];
      }
      if (wt != 0) sum += wt * at(idx);
      size_t d = r;
      while (d-- > 0) {
        if (++k[d] < n) break;
        k[d] = 0;
      }
      if (d == size_t(-1)) break;
    }
    return sum;
  }
};

}  // namespace

CUVIL_REF_KERNEL(GridSample) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  size_t r = x.rank() - 2;
  int64_t N = x.dim(0), C = x.dim(1);
  if (grid.rank() != r + 2 || grid.dim(0) != N || grid.dim(grid.rank() - 1) != int64_t(r))
    ctx.error("grid ", grid.type_str(), " does not match X ", x.type_str());
  const std::string mode = ctx.s("mode");
  bool align = ctx.i("align_corners") != 0;
  GridSampler gs;
  gs.padding = ctx.s("padding_mode");
  int64_t plane = 1;
  for (size_t d = 0; d < r; ++d) {
    gs.dims.push_back(x.dim(d + 2));
    plane *= x.dim(d + 2);
    gs.lo.push_back(align ? 0.0 : -0.5);
    gs.hi.push_back(align ? double(x.dim(d + 2)) - 1 : double(x.dim(d + 2)) - 0.5);
  }
  int64_t points = grid.numel() / std::max<int64_t>(1, N * int64_t(r));
  std::vector<double> xs = ref::to_f64_vector(x), gv = ref::to_f64_vector(grid);
  Tensor& y = ctx.output(0);
  std::vector<double> coord(r);
  std::vector<int64_t> first(r), idx(r);
  std::vector<std::vector<double>> w(r);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < points; ++p) {
      const double* g = gv.data() + (n * points + p) * int64_t(r);
      for (size_t d = 0; d < r; ++d) {
        // (x, y, z) lists the innermost dim first. Coordinates are float32 in the ONNX reference.
        double v = g[r - 1 - d], len = double(gs.dims[d]);
        double u = float(align ? (v + 1) / 2.0 * (len - 1) : ((v + 1) * len - 1) / 2.0);
        if (mode == "nearest") u = std::nearbyint(u);  // half to even, like numpy's rint
        if (u < gs.lo[d] || u > gs.hi[d]) {
          if (gs.padding == "border") u = std::clamp(u, 0.0, len - 1);
          else if (gs.padding == "reflection") u = reflect(u, gs.lo[d], gs.hi[d]);
        }
        coord[d] = u;
      }
      for (int64_t c = 0; c < C; ++c) {
        gs.img = xs.data() + (n * C + c) * plane;
        double out;
        if (mode == "nearest") {
          for (size_t d = 0; d < r; ++d) idx[d] = int64_t(coord[d]);  // truncation, as the reference's astype
          out = gs.at(idx);
        } else if (mode == "linear") {
          for (size_t d = 0; d < r; ++d) {
            double f = std::floor(coord[d]);
            first[d] = int64_t(f);
            w[d] = {1 - (coord[d] - f), coord[d] - f};
          }
          out = gs.taps(first, w, 2);
        } else {
          for (size_t d = 0; d < r; ++d) {
            double f = std::floor(coord[d]);
            first[d] = int64_t(f) - 1;
            w[d].assign(4, 0.0);
            cubic_coeffs(coord[d] - f, w[d].data());
          }
          out = gs.taps(first, w, 4);
        }
        ref::set_f64(ctx, y, (n * C + c) * points + p, out);
      }
    }
}

CUVIL_REF_KERNEL(Col2Im) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> image = ctx.input(1).to_i64_vector(), block = ctx.input(2).to_i64_vector();
  size_t r = image.size();
  if (block.size() != r || r == 0) ctx.error("image_shape and block_shape must have one equal, nonzero length");
  auto per_dim = [&](const char* name, int64_t def, size_t count) {
    std::vector<int64_t> v = ctx.ints(name);
    if (v.empty()) v.assign(count, def);
    if (v.size() != count) ctx.error("attribute '", name, "' must have ", count, " values, got ", v.size());
    return v;
  };
  std::vector<int64_t> dil = per_dim("dilations", 1, r), pads = per_dim("pads", 0, 2 * r), str = per_dim("strides", 1, r);
  int64_t K = 1, L = 1;
  std::vector<int64_t> blocks(r);
  for (size_t d = 0; d < r; ++d) {
    if (block[d] <= 0 || dil[d] <= 0 || str[d] <= 0) ctx.error("block_shape, dilations and strides must be positive");
    K *= block[d];
    int64_t span = dil[d] * (block[d] - 1) + 1;
    int64_t room = image[d] + pads[d] + pads[d + r] - span;
    blocks[d] = room < 0 ? 0 : room / str[d] + 1;
    L *= blocks[d];
  }
  int64_t N = x.dim(0);
  if (x.dim(1) % K != 0) ctx.error("dim 1 of input 0 (", x.dim(1), ") is not a multiple of prod(block_shape) ", K);
  if (x.dim(2) != L) ctx.error("input 0 has ", x.dim(2), " blocks; image_shape, block_shape and the attributes give ", L);
  int64_t C = x.dim(1) / K, plane = 1;
  for (int64_t v : image) plane *= v;
  std::vector<double> xs = ref::to_f64_vector(x), ys(size_t(N * C * plane), 0.0);
  std::vector<int64_t> k(r), l(r);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kb = 0; kb < K; ++kb) {
        for (int64_t rest = kb, d = int64_t(r); d-- > 0;) k[size_t(d)] = rest % block[size_t(d)], rest /= block[size_t(d)];
        for (int64_t lb = 0; lb < L; ++lb) {
          for (int64_t rest = lb, d = int64_t(r); d-- > 0;) l[size_t(d)] = rest % blocks[size_t(d)], rest /= blocks[size_t(d)];
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < r && inside; ++d) {
            int64_t i = l[d] * str[d] - pads[d] + k[d] * dil[d];
            inside = i >= 0 && i < image[d];
            off = off * image[d] + i;
          }
          if (inside) ys[size_t((n * C + c) * plane + off)] += xs[size_t(((n * C + c) * K + kb) * L + lb)];
        }
      }
  Tensor& y = ctx.output(0);
  for (int64_t i = 0; i < y.numel(); ++i) ref::set_f64(ctx, y, i, ys[size_t(i)]);
}

}  // namespace cuvil
