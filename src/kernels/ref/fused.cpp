// Reference kernels of the fused ops: the unfused ops' reference kernels run one after the other, so a fused
// node computes exactly what the graph it replaced did.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/ops/activation.h"
#include "ir/ops/attention.h"
#include "kernels/ref/permute.h"
#include "kernels/ref/channels_last.h"
#include "kernels/ref/indexing.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// y = activation(y + sum), elementwise, in T's compute type.
template <class T>
void add_and_activate(Tensor& y, const Tensor* sum, const nn::Activation& act) {
  T* yp = y.data<T>();
  const T* sp = sum ? sum->data<T>() : nullptr;
  for (int64_t i = 0; i < y.numel(); ++i) {
    compute_t<T> v = compute_t<T>(yp[i]);
    if (sp) v += compute_t<T>(sp[i]);
    yp[i] = T(nn::apply_activation(act, v));
  }
}

void epilogue(KernelContext& ctx, Tensor& y, const Tensor* sum) {
  nn::Activation act = nn::read_activation(ctx);
  if (!sum && act.kind == nn::Act::None) return;
  visit_dtype(y.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) add_and_activate<T>(y, sum, act);
    else ctx.error("unsupported dtype ", dtype_name(y.dtype()));
  });
}

void fused_conv_channels_first(KernelContext& ctx) {
  // Conv reads only X, W, B and the conv attributes, which FusedConv shares.
  std::vector<const Tensor*> ins{&ctx.input(0), &ctx.input(1)};
  if (ctx.has_input(2)) ins.push_back(&ctx.input(2));
  std::vector<Tensor> outs{ctx.output(0)};
  KernelContext conv(ctx.node(), ins, &outs, nullptr);
  ref_kernel(OpKind::Conv)(conv);
}

}  // namespace

// The Sum input may share the output's buffer (in-place pair 3 -> 0), so it is read before the conv writes.
CUVIL_REF_KERNEL(FusedConv) {
  Tensor sum;
  if (ctx.has_input(3)) sum = ctx.input(3).clone();
  ref::channels_first_or(ctx, fused_conv_channels_first);
  epilogue(ctx, ctx.output(0), sum.defined() ? &sum : nullptr);
}

CUVIL_REF_KERNEL(FusedMatMul) {
  Tensor sum;
  if (ctx.has_input(3)) sum = ctx.input(3).clone();
  Tensor b = ctx.input(1);
  if (ctx.i("transB")) {
    std::vector<int64_t> perm;
    for (size_t d = 0; d < b.rank(); ++d) perm.push_back(int64_t(d));
    std::swap(perm[b.rank() - 1], perm[b.rank() - 2]);
    b = ref::permuted(b, perm);
  }
  Tensor& y = ctx.output(0);
  {
    std::vector<const Tensor*> ins{&ctx.input(0), &b};
    std::vector<Tensor> outs{y};
    KernelContext mm(ctx.node(), ins, &outs, nullptr);
    ref_kernel(OpKind::MatMul)(mm);
  }
  float alpha = ctx.f("alpha");
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  visit_dtype(y.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      T* yp = y.data<T>();
      int64_t n = y.dim(y.rank() - 1);
      for (int64_t i = 0; i < y.numel(); ++i) {
        compute_t<T> v = compute_t<T>(yp[i]) * compute_t<T>(alpha);
        if (bias) v += compute_t<T>(bias->data<T>()[i % n]);
        yp[i] = T(v);
      }
    } else {
      ctx.error("unsupported dtype ", dtype_name(y.dtype()));
    }
  });
  epilogue(ctx, y, sum.defined() ? &sum : nullptr);
}

// Step by step, as the graph it replaces: the permuted operands, scores = scale * q k^T + Mask, a max-subtracted
// Softmax over the last dim (sums in double), y = P v, then Y = y permuted.
CUVIL_REF_KERNEL(Attention) {
  const Tensor& qt = ctx.input(0);
  size_t r = qt.rank();
  Tensor q = ref::permuted(qt, attention_perm(ctx, "perm_q", r));
  std::vector<int64_t> swap_last2 = attention_perm(ctx, "perm_k", r);
  std::swap(swap_last2[r - 1], swap_last2[r - 2]);
  Tensor kt = ref::permuted(ctx.input(1), swap_last2);  // k^T [..., D, Sk]
  Tensor v = ref::permuted(ctx.input(2), attention_perm(ctx, "perm_v", r));
  auto matmul = [&](const Tensor& a, const Tensor& b) {
    std::vector<int64_t> shape = a.shape();
    shape.back() = b.shape().back();
    Tensor out = Tensor::zeros(a.dtype(), shape);
    std::vector<const Tensor*> ins{&a, &b};
    std::vector<Tensor> outs{out};
    KernelContext mm(ctx.node(), ins, &outs, nullptr);
    ref_kernel(OpKind::MatMul)(mm);
    return out;
  };
  Tensor p = matmul(q, kt);  // scores, then probabilities, in place
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  double scale = ctx.f("scale");
  visit_dtype(p.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      T* pp = p.data<T>();
      const std::vector<int64_t>& ps = p.shape();
      int64_t sk = ps[r - 1], rows = p.numel() / std::max<int64_t>(sk, 1);
      std::vector<int64_t> mst = mask ? ref::broadcast_strides(mask->shape(), ps) : std::vector<int64_t>(r, 0);
      std::vector<compute_t<T>> row(static_cast<size_t>(sk));
      // A bool mask selects (Where(Mask, score, mask_fill)); a float one is added.
      const bool* bool_mask = mask && mask->dtype() == DType::boolean ? mask->data<bool>() : nullptr;
      compute_t<T> fill = compute_t<T>(ctx.f("mask_fill"));
      const bool nan_zero = ctx.i("nan_probs_zero") != 0;
      for (int64_t i = 0; i < rows; ++i) {
        // The mask's offset of row i: its index in every dim but the last.
        int64_t m_at = 0;
        for (int64_t rest = i, d = int64_t(r) - 2; d >= 0; --d) {
          m_at += (rest % ps[size_t(d)]) * mst[size_t(d)];
          rest /= ps[size_t(d)];
        }
        T* x = pp + i * sk;
        compute_t<T> m = -std::numeric_limits<compute_t<T>>::infinity();
        for (int64_t j = 0; j < sk; ++j) {
          compute_t<T> s = compute_t<T>(scale) * compute_t<T>(x[j]);
          if (bool_mask) s = bool_mask[m_at + j * mst[r - 1]] ? s : fill;
          else if (mask) s += compute_t<T>(mask->data<T>()[m_at + j * mst[r - 1]]);
          row[size_t(j)] = s;
          m = std::max(m, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < sk; ++j) sum += double(row[size_t(j)] = std::exp(row[size_t(j)] - m));
        for (int64_t j = 0; j < sk; ++j) {
          double pr = double(row[size_t(j)]) / sum;
          x[j] = T(nan_zero && std::isnan(pr) ? 0.0 : pr);
        }
      }
    } else {
      ctx.error("unsupported dtype ", dtype_name(p.dtype()));
    }
  });
  Tensor y = matmul(p, v);
  ref::permute_into(y, attention_perm(ctx, "perm_y", r), ctx.output(0));
}

// The body runs op by op on the executor (whichever kernels it uses); the results are copied into the outputs the
// runtime allocated.
CUVIL_REF_KERNEL(FusedKernel) {
  const Graph& body = *ctx.g("body");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.input(i));
  std::vector<Tensor> outs = ctx.regions().run_region(body, ins);
  CUVIL_CHECK(outs.size() == ctx.num_outputs(), ctx.node().describe(), ": body yields ", outs.size(),
              " values for ", ctx.num_outputs(), " outputs");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!ctx.output_allocated(i)) {
      ctx.set_output(i, std::move(outs[i]));
      continue;
    }
    Tensor& y = ctx.output(i);
    CUVIL_CHECK(y.dtype() == outs[i].dtype() && y.shape() == outs[i].shape(), ctx.node().describe(),
                ": body output ", i, " is ", outs[i].type_str(), " but the node's output is ", y.type_str());
    std::memcpy(y.raw(), outs[i].raw(), y.nbytes());
  }
}

}  // namespace cuvil
