// MatMul, Gemm and FusedMatMul read as one operation, for the kernels that implement all three (oneDNN's matmul,
// the CPU product of kernels/cpu/gemm.h): Y = act(alpha * A' B' + bias_scale * bias + sum_scale * Sum).
#pragma once

#include <vector>

#include "ir/ops/activation.h"
#include "kernels/prepared_kernel.h"

namespace cuvil {

struct MatMulSpec {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f;
  int bias_input = -1;     // 1-D [N] (or [1, N]) added to every row
  float bias_scale = 1.f;  // Gemm's beta when C is a bias
  int sum_input = -1;      // same shape as Y
  float sum_scale = 1.f;
  nn::Activation act;
};

// The spec of `n` (MatMul, Gemm or FusedMatMul) at these inputs and output dims y (-1 for dims that vary);
// false for a Gemm whose C is neither a row bias nor Y's shape (a column or a scalar: the reference's).
bool read_matmul_spec(const Node& n, const std::vector<PrepareInput>& in, const std::vector<int64_t>& y,
                      MatMulSpec& s);

// A node's inputs and output dims as its IR types give them, -1 for the dims that vary (what a shape-generic
// kernel prepares from: constants keep their values); false when a rank is unknown.
bool symbolic_inputs(const Node& n, std::vector<PrepareInput>& in, std::vector<int64_t>& y);

}  // namespace cuvil
