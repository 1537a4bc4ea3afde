// Split of any dtype whose part sizes are fixed at prepare (a constant `split`, num_outputs, or even parts): the
// input seen as [outer, total, inner], each output's rows copied with one memcpy per outer index. The part sizes
// come from inference's output dims, so the rules (Split-18's ceil(d / n) parts, negative axes) are the op
// definition's alone. ViT's QKV Split took 13 µs a block on the reference kernel, element by element.
#include <cstring>

#include "kernels/cpu/cpu_util.h"

namespace cuvil::cpu {

std::unique_ptr<PreparedKernel> prepare_split(const Node& n, const std::vector<PrepareInput>& in) {
  if (in.empty() || !in[0].present) return nullptr;
  if (in.size() > 1 && in[1].present && !in[1].value) return nullptr;  // part sizes known only at run time
  const DType t = in[0].dtype;
  if (is_low_precision(t) || dtype_size(t) == 0) return nullptr;
  const std::vector<int64_t>& shape = in[0].shape;
  const int64_t r = int64_t(shape.size());
  int64_t axis = AttrReader(n).i("axis");
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return nullptr;  // inference reports it; the reference kernel runs
  std::vector<std::vector<int64_t>> outs = infer_output_dims(n, in);
  std::vector<int64_t> parts;
  int64_t total = 0;
  for (const auto& o : outs) {
    if (int64_t(o.size()) != r) return nullptr;
    parts.push_back(o[size_t(axis)]);
    total += parts.back();
  }
  if (total != shape[size_t(axis)]) return nullptr;
  int64_t outer = 1, inner = int64_t(dtype_size(t));
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= shape[size_t(d)];
  return make_kernel(
      [parts, outer, inner, total](KernelContext& ctx) {
        const uint8_t* src = static_cast<const uint8_t*>(ctx.input(0).raw());
        int64_t offset = 0;  // bytes into an input row
        for (size_t k = 0; k < parts.size(); ++k) {
          const size_t bytes = size_t(parts[k] * inner);
          if (k < ctx.num_outputs() && bytes) {
            uint8_t* dst = static_cast<uint8_t*>(ctx.output(k).raw());
            for (int64_t o = 0; o < outer; ++o)
              std::memcpy(dst + size_t(o) * bytes, src + size_t(o * total * inner + offset), bytes);
          }
          offset += parts[k] * inner;
        }
      },
      "split");
}

}  // namespace cuvil::cpu
