// BatchNormalization folded into the weights and bias of the Conv, Gemm or MatMul before it (inference mode):
//   y = (conv(x, W) + b - mean) * scale / sqrt(var + eps) + bias
//     = conv(x, W * s) + (b - mean) * s + bias,   with s = scale / sqrt(var + eps) per output channel.
// One definition for the pass that folds (passes/FoldBatchNorm.cpp) and for the runtime that folds again when an
// artifact's original weights are updated (runtime/weight_recipes.h), so both give the same bits.
#pragma once

#include <cmath>
#include <utility>

#include "ir/tensor.h"

namespace cuvil::bn_fold {

// The folded weights and bias, computed in double and rounded once. Output channel o owns W's row o (by_column
// false: Conv, Gemm with transB) or W's column o (by_column true: a [K, N] matrix). `b` may be null.
template <class T>
std::pair<Tensor, Tensor> folded_params(const Tensor& w, const Tensor* b, const Tensor& scale, const Tensor& bias,
                                        const Tensor& mean, const Tensor& var, double eps, bool by_column) {
  int64_t m = by_column ? w.dim(1) : w.dim(0), per = w.numel() / m;
  Tensor nw = Tensor::zeros(w.dtype(), w.shape()), nb = Tensor::zeros(w.dtype(), {m});
  for (int64_t o = 0; o < m; ++o) {
    double s = double(scale.data<T>()[o]) / std::sqrt(double(var.data<T>()[o]) + eps);
    for (int64_t k = 0; k < per; ++k) {
      int64_t i = by_column ? k * m + o : o * per + k;
      nw.data<T>()[i] = T(double(w.data<T>()[i]) * s);
    }
    double b0 = b ? double(b->data<T>()[o]) : 0.0;
    nb.data<T>()[o] = T((b0 - double(mean.data<T>()[o])) * s + double(bias.data<T>()[o]));
  }
  return {nw, nb};
}

}  // namespace cuvil::bn_fold
