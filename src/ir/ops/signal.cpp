// Op definitions of the signal family: DFT (audio front ends ship it: spectrograms, STFT written out).
//
// Differences from ONNX: DFT has the opset-20 form (axis an optional input, default -2); the importer moves opset
// 17's `axis` attribute into a constant input. Complex values are a last dim of 2 (real, imaginary); a last dim
// of 1 is a real signal.
#include "ir/ops/infer_util.h"

namespace cuvil {

// DFT(input [..., n, 1|2], dft_length?, axis?) -> [..., L', 2] (L' = L, or L/2+1 one-sided), or [..., L, 1] for an
// inverse one-sided transform (a real signal from half a spectrum). L = dft_length, else n (inverse one-sided:
// 2(n-1)). The inverse divides by L.
CUVIL_DEFINE_OP(DFT) {
  s.inputs(1, 3)
      .attr("inverse", AttrKind::Int, int64_t(0))
      .attr("onesided", AttrKind::Int, int64_t(0))
      .infer_with([](InferContext& c) {
        infer::expect_dtype(c, 0, {DType::f16, DType::bf16, DType::f32, DType::f64});
        if (c.has_input(1)) infer::expect_dtype(c, 1, {DType::i32, DType::i64});
        if (c.has_input(2)) infer::expect_dtype(c, 2, {DType::i64, DType::i32});
        const Shape& x = c.input_shape(0);
        if (!x.rank_known()) {
          c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
          return;
        }
        int64_t r = int64_t(x.rank());
        if (r < 2) c.error("input 0 must have rank >= 2 (a signal axis and the complex dim), got ", x.str());
        const Dim& last = x[size_t(r - 1)];
        if (last.is_const() && last.value() != 1 && last.value() != 2)
          c.error("the last dim of input 0 must be 1 (real) or 2 (complex), got ", x.str());
        bool inverse = c.i("inverse") != 0, onesided = c.i("onesided") != 0;
        int64_t axis = -2;
        if (c.has_input(2)) {
          auto a = infer::const_ints(c, 2);
          if (!a) {
            c.set_output(0, c.input_dtype(0), infer::fresh_shape(c, size_t(r)));
            return;
          }
          if (a->size() != 1) c.error("axis (input 2) must be a scalar");
          axis = (*a)[0];
        }
        if (axis < -r || axis >= r - 1) c.error("axis ", axis, " is out of range for ", x.str(), " (not the last dim)");
        if (axis < 0) axis += r;
        Dim len = x[size_t(axis)];
        if (c.has_input(1)) {
          auto l = infer::const_ints(c, 1);
          if (l && l->size() != 1) c.error("dft_length (input 1) must be a scalar");
          if (l && (*l)[0] <= 0) c.error("dft_length must be > 0, got ", (*l)[0]);
          len = l ? Dim((*l)[0]) : c.fresh_dim();
        } else if (inverse && onesided) {
          len = (len - Dim(1)) * Dim(2);
        }
        std::vector<Dim> out = x.dims();
        if (!inverse && onesided) len = Dim::floordiv(len, Dim(2)) + Dim(1);
        out[size_t(axis)] = len;
        out[size_t(r - 1)] = Dim(inverse && onesided ? 1 : 2);
        c.set_output(0, c.input_dtype(0), Shape(out));
      });
}

}  // namespace cuvil
