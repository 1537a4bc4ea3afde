#include "kernels/ref/channels_last.h"

#include "ir/ops/layout.h"
#include "kernels/ref/permute.h"

namespace cuvil::ref {

void channels_first_or(KernelContext& ctx, KernelFn body) {
  if (ctx.i("channels_last") == 0) return body(ctx);
  const Tensor& x = ctx.input(0);
  Tensor x_cf = permuted(x, layout::perm_to_channels_first(x.rank()));
  std::vector<const Tensor*> ins{&x_cf};
  for (size_t i = 1; i < ctx.num_inputs(); ++i) ins.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  Tensor& y = ctx.output(0);
  std::vector<Tensor> outs{Tensor::zeros(y.dtype(), layout::to_channels_first(y.shape()))};
  KernelContext inner(ctx.node(), ins, &outs, nullptr);
  body(inner);
  permute_into(outs[0], layout::perm_to_channels_last(y.rank()), y);
}

}  // namespace cuvil::ref
