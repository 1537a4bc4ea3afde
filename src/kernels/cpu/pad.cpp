// Pad of f32 data with constant pads (and axes), every mode, as a gather whose source index along each axis comes
// from a table made once at prepare -- or "the constant" (-1). As for nearest Resize (resize.cpp), the tables come
// from the reference kernel itself, run once on an input holding each element's own flat index plus one with 0 as
// the constant: padding is separable per axis, so the value found along an axis, through an output element that
// reads the input, decodes into that axis's source index, and every mode's rule (reflect, edge, wrap, negative
// pads cropping) stays the reference's alone. silero-vad reflect-pads its audio frame on every call (4 µs of ~66
// on the reference kernel).
#include "kernels/cpu/cpu_util.h"
#include "kernels/ref/ref_interpreter.h"

namespace cuvil::cpu {

namespace {

constexpr int64_t kMaxProbeElements = int64_t(1) << 23;

struct PadPlan {
  std::vector<int64_t> out;               // output dims
  std::vector<int64_t> in_stride;         // input element strides
  std::vector<std::vector<int64_t>> map;  // per axis: output index -> input index, or -1 (the constant)
};

CUVIL_CPU_CLONES void pad_row(const float* src, const int64_t* map, int64_t n, float c, float* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = map[j] < 0 ? c : src[map[j]];
}

void run_pad(const PadPlan& p, const float* x, float c, float* y) {
  const size_t r = p.out.size();
  const int64_t inner = p.out[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= p.out[d];
  std::vector<int64_t> idx(r - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    bool constant = false;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t m = p.map[d][size_t(idx[d])];
      constant |= m < 0;
      off += m * p.in_stride[d];
    }
    float* o = y + row * inner;
    if (constant) {
      for (int64_t j = 0; j < inner; ++j) o[j] = c;
    } else {
      pad_row(x + off, p.map[r - 1].data(), inner, c, o);
    }
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < p.out[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_pad(const Node& n, const std::vector<PrepareInput>& in) {
  if (in.size() < 2 || !in[0].present || in[0].dtype != DType::f32 || in[0].shape.empty()) return nullptr;
  for (size_t i = 1; i < in.size(); ++i)
    if (i != 2 && in[i].present && !in[i].value) return nullptr;  // pads/axes known only at run time
  if (in.size() > 2 && in[2].present && in[2].dtype != DType::f32) return nullptr;
  const std::vector<int64_t>& shape = in[0].shape;
  const size_t r = shape.size();
  std::vector<int64_t> out = infer_output_dims(n, in)[0];
  int64_t in_numel = 1, out_numel = 1;
  for (size_t d = 0; d < r; ++d) in_numel *= shape[d];
  for (int64_t d : out) out_numel *= d;
  // f32 holds every index below 2^24 exactly.
  if (out.size() != r || in_numel == 0 || out_numel == 0 || out_numel > kMaxProbeElements ||
      in_numel >= (int64_t(1) << 24))
    return nullptr;
  Tensor probe = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < in_numel; ++i) probe.data<float>()[i] = float(i + 1);
  std::vector<const Tensor*> args{&probe};
  for (size_t i = 1; i < in.size(); ++i) args.push_back(i != 2 && in[i].present ? in[i].value : nullptr);
  std::vector<Tensor> got = run_reference_node(n, args);
  if (got.size() != 1 || got[0].shape() != out) return nullptr;
  const float* v = got[0].data<float>();
  // An output element that reads the input (none: the output is all constant; the reference runs that).
  int64_t real = 0;
  while (real < out_numel && v[real] == 0.f) ++real;
  if (real == out_numel) return nullptr;
  PadPlan p;
  p.out = out;
  p.in_stride.assign(r, 1);
  std::vector<int64_t> out_stride(r, 1);
  for (size_t d = r - 1; d-- > 0;)
    p.in_stride[d] = p.in_stride[d + 1] * shape[d + 1], out_stride[d] = out_stride[d + 1] * out[d + 1];
  p.map.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t at = real / out_stride[d] % out[d];  // `real`'s index along d
    for (int64_t o = 0; o < out[d]; ++o) {
      const float s = v[real + (o - at) * out_stride[d]];
      p.map[d].push_back(s == 0.f ? -1 : (int64_t(s) - 1) / p.in_stride[d] % shape[d]);
    }
  }
  return make_kernel(
      [p](KernelContext& ctx) {
        const float c = ctx.has_input(2) && ctx.input(2).numel() > 0 ? ctx.input(2).data<float>()[0] : 0.f;
        run_pad(p, ctx.input(0).data<float>(), c, ctx.output(0).data<float>());
      },
      "pad");
}

}  // namespace cuvil::cpu
