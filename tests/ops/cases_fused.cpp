// Cases of the fused family (src/ir/ops/nn.cpp, attention.cpp): the ops passes form (FusedConv, FusedMatMul,
// Attention), given directly so oneDNN's kernels meet the reference on each activation and operand layout.
// FusedKernel is exempt: every `generated` run of the other cases goes through one.
#include <limits>

#include "harness.h"

namespace cuvil::optest {
namespace {

constexpr Backend D = Backend::onednn;
const Tol kProduct{1e-4, 1e-4};

}  // namespace

void add_fused_cases(Cases& cs) {
  const std::pair<const char*, std::vector<double>> acts[] = {
      {"", {}},          {"Relu", {}},         {"Clip", {0, 0.5}},          {"LeakyRelu", {0.1}},
      {"Sigmoid", {}},   {"Tanh", {}},         {"HardSigmoid", {0.2, 0.5}}, {"HardSwish", {}},
      {"Gelu", {}},      {"GeluTanh", {}},     {"Elu", {1.5}}};
  for (const auto& [act, params] : acts) {
    OpCase& c = cs.add(OpKind::FusedConv, std::string("NHWC + sum, activation ") + act)
                    .in(f32({2, 9, 11, 6}))
                    .in(f32({10, 6, 3, 3}).cst())
                    .in(f32({10}).cst())
                    .in(f32({2, 5, 6, 10}))
                    .attr("strides", Ints{2, 2})
                    .attr("pads", Ints{1, 1, 1, 1})
                    .attr("channels_last", int64_t(1))
                    .tol(kProduct)
                    .needs({D});
    if (*act) c.attr("activation", act);
    if (!params.empty()) c.attr("activation_params", params);
  }
  cs.add(OpKind::FusedConv, "NCHW depthwise, Clip")
      .in(f32({1, 8, 7, 9}))
      .in(f32({8, 1, 3, 3}).cst())
      .in(f32({8}).cst())
      .attr("group", int64_t(8))
      .attr("pads", Ints{1, 1, 1, 1})
      .attr("activation", "Clip")
      .attr("activation_params", std::vector<double>{0, 6})
      .tol(kProduct)
      .needs({D});
  cs.add(OpKind::FusedMatMul, "transB alpha bias sum gelu")
      .in(f32({2, 4, 9}))
      .in(f32({2, 5, 9}))
      .in(f32({5}).cst())
      .in(f32({2, 4, 5}))
      .attr("transB", int64_t(1))
      .attr("alpha", 0.125)
      .attr("activation", "Gelu")
      .tol(kProduct)
      .needs({D});
  cs.add(OpKind::FusedMatMul, "constant B, relu").in(f32({33, 17})).in(f32({17, 9}).cst()).attr("activation", "Relu")
      .tol(kProduct);
  cs.add(OpKind::Attention, "2-D, no batch").in(f32({7, 4})).in(f32({5, 4})).in(f32({5, 3})).tol({2e-5, 2e-5}).needs({D});
  cs.add(OpKind::Attention, "[B, H, S, D], padding mask")
      .in(f32({2, 3, 6, 8}))
      .in(f32({2, 3, 10, 8}))
      .in(f32({2, 3, 10, 5}))
      .in(f32({2, 1, 1, 10}, -2, 0))
      .tol({2e-5, 2e-5})
      .needs({D});
  cs.add(OpKind::Attention, "[B, H, S, D], bool mask [B, 1, Sq, Sk] filled with float's lowest")
      .in(f32({2, 3, 7, 8}))
      .in(f32({2, 3, 9, 8}))
      .in(f32({2, 3, 9, 5}))
      .in(rnd(DType::boolean, {2, 1, 7, 9}, -1, 1))
      .attr("mask_fill", double(std::numeric_limits<float>::lowest()))
      .attr("scale", 0.125)
      .tol({2e-5, 2e-5})
      .needs({D});
  cs.add(OpKind::Attention, "fully masked row")
      .in(f32({3, 5}))
      .in(f32({4, 5}))
      .in(f32({4, 2}))
      .in(val(tensor<float>({0, 0, 0, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 0, 0, 0}, {3, 4})))
      .tol({2e-5, 2e-5});
}

}  // namespace cuvil::optest
