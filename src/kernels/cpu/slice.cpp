// Slice with constant starts/ends/axes/steps, for any dtype: the read pattern is resolved once at prepare (base
// offset and per-dim strides, ONNX clamping through tensor_ops::slice_range as the reference does), then runs of
// the innermost dim are copied with memcpy when its step is 1, or gathered with a stride otherwise. Threaded over
// the outer rows when the copy is large. (BERT's packed QKV projection splits into Q, K and V this way.)
#include <cstring>

#include "ir/ops/tensor_helpers.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

struct SlicePlan {
  size_t elem = 4;               // bytes per element
  int64_t base = 0;              // first element read
  std::vector<int64_t> out;      // output dims
  std::vector<int64_t> stride;   // elements to step in the input per output index, by dim
};

void run_slice(const SlicePlan& p, const uint8_t* src, uint8_t* dst) {
  size_t r = p.out.size();
  int64_t inner = r ? p.out[r - 1] : 1, rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= p.out[d];
  if (inner == 0 || rows == 0) return;
  int64_t inner_stride = r ? p.stride[r - 1] : 1;
  size_t row_bytes = size_t(inner) * p.elem;
  parallel_ranges(rows, inner, 1, [&](int64_t begin, int64_t end) {
    // The input offset of row `begin`, then an odometer over the outer dims.
    std::vector<int64_t> idx(r ? r - 1 : 0, 0);
    int64_t off = p.base, rem = begin;
    for (size_t d = idx.size(); d-- > 0;) {
      idx[d] = rem % p.out[d];
      rem /= p.out[d];
      off += idx[d] * p.stride[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      uint8_t* o = dst + size_t(row) * row_bytes;
      const uint8_t* in = src + off * int64_t(p.elem);
      if (inner_stride == 1) {
        std::memcpy(o, in, row_bytes);
      } else {
        for (int64_t j = 0; j < inner; ++j)
          std::memcpy(o + size_t(j) * p.elem, in + j * inner_stride * int64_t(p.elem), p.elem);
      }
      for (size_t d = idx.size(); d-- > 0;) {
        off += p.stride[d];
        if (++idx[d] < p.out[d]) break;
        off -= p.stride[d] * p.out[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_slice(const Node& n, const std::vector<PrepareInput>& in) {
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].present && !in[i].value) return nullptr;  // starts/ends/axes/steps known only at run time
  const std::vector<int64_t>& shape = in[0].shape;
  int64_t r = int64_t(shape.size());
  std::vector<int64_t> starts = in[1].value->to_i64_vector(), ends = in[2].value->to_i64_vector();
  std::vector<int64_t> axes, steps;
  if (in.size() > 3 && in[3].present) axes = in[3].value->to_i64_vector();
  else for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (in.size() > 4 && in[4].present) steps = in[4].value->to_i64_vector();
  else steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || ends.size() != starts.size() || steps.size() != starts.size()) return nullptr;
  SlicePlan p;
  p.elem = dtype_size(in[0].dtype);
  p.out = shape;
  std::vector<int64_t> first(size_t(r), 0), step(size_t(r), 1);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r || steps[k] == 0) return nullptr;  // inference reports these; the reference kernel runs
    auto rg = tensor_ops::slice_range(shape[size_t(a)], starts[k], ends[k], steps[k]);
    first[size_t(a)] = rg.start;
    step[size_t(a)] = rg.step;
    p.out[size_t(a)] = rg.len;
  }
  if (p.out != infer_output_dims(n, in)[0]) return nullptr;
  int64_t s = 1;
  p.stride.assign(size_t(r), 0);
  for (int64_t d = r - 1; d >= 0; --d) {
    p.base += first[size_t(d)] * s;
    p.stride[size_t(d)] = step[size_t(d)] * s;
    s *= shape[size_t(d)];
  }
  return make_kernel(
      [p](KernelContext& ctx) {
        run_slice(p, static_cast<const uint8_t*>(ctx.input(0).raw()), static_cast<uint8_t*>(ctx.output(0).raw()));
      },
      "slice");
}

}  // namespace cuvil::cpu
