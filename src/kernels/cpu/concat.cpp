// Concat of any dtype. The output is `outer` rows (the dims before the axis); each row is one run per input, in
// input order. Rows are written one after another (each thread one contiguous span of the output, threaded when
// large), where the reference kernel walks each input over every row. A channels-last Concat has a row per pixel
// and short runs (DenseNet's 32-channel pieces: 128 bytes): those copy in 64-byte steps the compiler inlines
// rather than through a memcpy call each.
#include <cstring>

#include "ir/op_schema.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

namespace {

struct ConcatPlan {
  size_t elem = 4;
  int64_t outer = 1;
  std::vector<int64_t> run;  // bytes per row, by input
  int64_t row = 0;           // output bytes per row
};

inline void copy_run(uint8_t* d, const uint8_t* s, int64_t n) {
  if (n > 512) {
    std::memcpy(d, s, size_t(n));
    return;
  }
  for (; n >= 64; n -= 64, d += 64, s += 64) std::memcpy(d, s, 64);
  if (n > 0) std::memcpy(d, s, size_t(n));
}

void run_concat(const ConcatPlan& p, KernelContext& ctx) {
  auto* dst = static_cast<uint8_t*>(ctx.output(0).raw());
  std::vector<const uint8_t*> src(p.run.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<const uint8_t*>(ctx.input(i).raw());
  if (p.row == 0) return;
  parallel_ranges(p.outer, p.row / int64_t(p.elem), 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      uint8_t* d = dst + o * p.row;
      for (size_t i = 0; i < src.size(); ++i) {
        copy_run(d, src[i] + o * p.run[i], p.run[i]);
        d += p.run[i];
      }
    }
  });
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_concat(const Node& n, const std::vector<PrepareInput>& in) {
  if (in.empty()) return nullptr;
  for (const PrepareInput& x : in)
    if (!x.present || x.shape.size() != in[0].shape.size() || x.dtype != in[0].dtype) return nullptr;
  int64_t r = int64_t(in[0].shape.size()), axis = AttrReader(n).i("axis");
  if (r == 0 || axis < -r || axis >= r) return nullptr;  // inference reports these; the reference kernel runs
  if (axis < 0) axis += r;
  std::vector<int64_t> out = infer_output_dims(n, in)[0];
  if (int64_t(out.size()) != r) return nullptr;
  ConcatPlan p;
  p.elem = dtype_size(in[0].dtype);
  for (int64_t d = 0; d < axis; ++d) p.outer *= out[size_t(d)];
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < r; ++d) inner *= out[size_t(d)];
  for (const PrepareInput& x : in) {
    p.run.push_back(x.shape[size_t(axis)] * inner * int64_t(p.elem));
    p.row += p.run.back();
  }
  if (p.row != out[size_t(axis)] * inner * int64_t(p.elem)) return nullptr;
  return make_kernel([p](KernelContext& ctx) { run_concat(p, ctx); }, "concat");
}

}  // namespace cuvil::cpu
