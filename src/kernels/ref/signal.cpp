// Reference kernels of the signal family (semantics and IR forms: src/ir/ops/signal.cpp): DFT as the direct sum
// in double (O(n^2) per transform; the oracle, not a fast path), matching numpy.fft's fft, ifft and irfft.
#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/ref/reduction_util.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

CUVIL_REF_KERNEL(DFT) {
  const Tensor& x = ctx.input(0);
  int64_t r = int64_t(x.rank());
  int64_t axis = -2;
  if (ctx.has_input(2)) {
    const Tensor& a = ctx.input(2);
    if (a.numel() != 1) ctx.error("axis (input 2) must be a scalar, got ", a.type_str());
    axis = a.get_i64(0);
  }
  if (axis < -r || axis >= r - 1) ctx.error("axis ", axis, " is out of range for ", x.type_str());
  if (axis < 0) axis += r;
  bool inverse = ctx.i("inverse") != 0, onesided = ctx.i("onesided") != 0;
  bool complex_in = x.dim(size_t(r - 1)) == 2;
  int64_t n_in = x.dim(size_t(axis));
  int64_t len = inverse && onesided ? 2 * (n_in - 1) : n_in;
  if (ctx.has_input(1)) {
    const Tensor& l = ctx.input(1);
    if (l.numel() != 1) ctx.error("dft_length (input 1) must be a scalar, got ", l.type_str());
    len = l.get_i64(0);
  }
  if (len <= 0) ctx.error("the transform length must be > 0, got ", len);
  Tensor& y = ctx.output(0);
  int64_t n_out = y.dim(size_t(axis));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dim(size_t(d));
  int64_t cin = complex_in ? 2 : 1, cout = y.dim(size_t(r - 1));
  std::vector<double> xs = ref::to_f64_vector(x), ys(size_t(y.numel()), 0.0);
  const double sign = inverse ? 1.0 : -1.0;
  std::vector<double> re(static_cast<size_t>(len)), im(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      // The input along the axis, zero-padded or cut to the transform's length (inverse one-sided: the half
      // spectrum, completed by Hermitian symmetry; the imaginary parts of DC and Nyquist do not count).
      std::fill(re.begin(), re.end(), 0.0);
      std::fill(im.begin(), im.end(), 0.0);
      int64_t take = inverse && onesided ? std::min(n_in, len / 2 + 1) : std::min(n_in, len);
      for (int64_t k = 0; k < take; ++k) {
        const double* v = xs.data() + ((o * n_in + k) * inner + i) * cin;
        re[size_t(k)] = v[0];
        im[size_t(k)] = complex_in ? v[1] : 0.0;
      }
      if (inverse && onesided)
        for (int64_t k = len / 2 + 1; k < len; ++k) re[size_t(k)] = re[size_t(len - k)], im[size_t(k)] = -im[size_t(len - k)];
      for (int64_t k = 0; k < n_out; ++k) {
        double sr = 0, si = 0;
        for (int64_t t = 0; t < len; ++t) {
          // (k * t) mod len keeps the angle small and exact for long transforms.
          double ang = sign * 2.0 * std::numbers::pi * double((k * t) % len) / double(len);
          double c = std::cos(ang), s = std::sin(ang);
          sr += re[size_t(t)] * c - im[size_t(t)] * s;
          si += re[size_t(t)] * s + im[size_t(t)] * c;
        }
        if (inverse) sr /= double(len), si /= double(len);
        double* out = ys.data() + ((o * n_out + k) * inner + i) * cout;
        out[0] = sr;
        if (cout == 2) out[1] = si;
      }
    }
  for (int64_t e = 0; e < y.numel(); ++e) ref::set_f64(ctx, y, e, ys[size_t(e)]);
}

}  // namespace cuvil
