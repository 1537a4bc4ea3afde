#include "runtime/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/qdq_precision.h"
#include "support/error.h"

namespace cuvil {

namespace {

bool quantizable(OpKind k) {
  return k == OpKind::FusedConv || k == OpKind::FusedMatMul || k == OpKind::MatMul || k == OpKind::Gemm;
}

}  // namespace

std::vector<Node*> quant_targets(const Graph& g) {
  std::vector<Node*> r;
  for (const auto& n : g.nodes())
    if (quantizable(n->op()) && n->num_inputs() >= 2 && n->input(0) && n->input(1) && n->input(1)->is_constant() &&
        n->input(0)->dtype() == DType::f32)
      r.push_back(n.get());
  return r;
}

std::vector<Node*> quant_sum_targets(const Graph& g) {
  std::vector<Node*> r;
  for (Node* n : quant_targets(g))
    if (n->op() == OpKind::FusedConv && n->num_inputs() > 3 && n->input(3) && !n->input(3)->is_constant() &&
        n->input(3)->graph() == &g && n->input(3)->dtype() == DType::f32)
      r.push_back(n);
  return r;
}

void set_quant_sum_hint(Node& n, double scale, int64_t zero_point) {
  if (n.op() != OpKind::FusedConv) throw Error(n.describe() + ": only convolutions take a residual grid");
  if (!(scale >= 0) || !std::isfinite(scale) || zero_point < 0 || zero_point > 255)
    throw Error(n.describe() + ": bad int8 residual grid (scale " + std::to_string(scale) + ", zero point " +
                std::to_string(zero_point) + ")");
  n.attrs()["quant_sum_scale"] = Attribute(scale);
  n.attrs()["quant_sum_zero_point"] = Attribute(zero_point);
}

bool has_quant_hints(const Graph& g) {
  for (Node* n : quant_targets(g))
    if (n->has_attr("quant_x_scale") && n->attr("quant_x_scale").f() != 0) return true;
  return false;
}

namespace {
bool model_int8(const Node& n) {
  return n.has_attr("precision") && n.attr("precision").s() == "int8" && n.has_attr("precision_reason") &&
         n.attr("precision_reason").s() == kQdqReason;
}
}  // namespace

int keep_model_int8_in_f32(Graph& g) {
  int changed = 0;
  for (const auto& n : g.nodes()) {
    for (Graph* r : n->regions()) changed += keep_model_int8_in_f32(*r);
    if (!model_int8(*n)) continue;
    n->attrs()["precision"] = Attribute(std::string("fp32"));
    n->attrs()["precision_reason"] = Attribute(std::string(kQdqF32Reason));
    ++changed;
  }
  return changed;
}

int count_model_int8(const Graph& g) {
  int count = 0;
  for (const auto& n : g.nodes()) {
    for (const Graph* r : n->regions()) count += count_model_int8(*r);
    count += model_int8(*n);
  }
  return count;
}

void set_quant_hint(Node& n, double scale, int64_t zero_point) {
  if (!quantizable(n.op())) throw Error(n.describe() + ": only convolutions and matrix products take int8 hints");
  if (!(scale >= 0 || scale == -1) || !std::isfinite(scale) || zero_point < 0 || zero_point > 255)
    throw Error(n.describe() + ": bad int8 grid (scale " + std::to_string(scale) + ", zero point " +
                std::to_string(zero_point) + ")");
  n.attrs()["quant_x_scale"] = Attribute(scale);
  n.attrs()["quant_x_zero_point"] = Attribute(zero_point);
}

std::pair<double, int64_t> u8_grid(double lo, double hi) {
  lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (!std::isfinite(lo) || !std::isfinite(hi)) throw Error("calibration saw a non-finite activation");
  if (hi - lo <= 0) return {1.0, 0};
  double scale = (hi - lo) / 255.0;
  return {scale, std::clamp<int64_t>(std::llround(-lo / scale), 0, 255)};
}

std::vector<Tensor> run_with_values(const std::shared_ptr<Graph>& g, ExecutorOptions options,
                                    const std::vector<Tensor>& inputs, const std::vector<Value*>& values) {
  std::vector<Value*> saved = g->outputs(), all = saved;
  all.insert(all.end(), values.begin(), values.end());
  // At fp32 the float model: a QDQ model's own int8 layers computed in f32 too (their marks lifted meanwhile)
  std::vector<Node*> marked;
  if (options.kernels.precision == Precision::fp32)
    for (const auto& n : g->nodes())
      if (model_int8(*n)) marked.push_back(n.get());
  auto restore = [&] {
    g->set_outputs(saved);
    for (Node* n : marked) n->attrs()["precision"] = Attribute(std::string("int8"));
  };
  for (Node* n : marked) n->attrs()["precision"] = Attribute(std::string());
  g->set_outputs(all);
  std::vector<Tensor> outs;
  try {
    options.kernels.lower_final_outputs = true;
    Executor e(g, options);
    outs = e.run(inputs);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return std::vector<Tensor>(outs.begin() + std::ptrdiff_t(saved.size()), outs.end());
}

void calibrate_minmax(const std::shared_ptr<Graph>& g, const ExecutorOptions& options,
                      const std::vector<std::vector<Tensor>>& samples) {
  if (samples.empty()) throw Error("int8 calibration needs at least one sample");
  std::vector<Node*> targets = quant_targets(*g), sums = quant_sum_targets(*g);
  std::vector<Value*> xs;
  for (Node* n : targets) xs.push_back(n->input(0));
  for (Node* n : sums) xs.push_back(n->input(3));
  std::vector<double> lo(xs.size(), std::numeric_limits<double>::infinity()), hi(xs.size(), -lo[0]);
  ExecutorOptions f32 = options;
  f32.kernels.precision = Precision::fp32;
  for (const auto& sample : samples) {
    std::vector<Tensor> vals = run_with_values(g, f32, sample, xs);
    for (size_t i = 0; i < vals.size(); ++i) {
      const float* p = vals[i].data<float>();
      for (int64_t k = 0; k < vals[i].numel(); ++k) lo[i] = std::min(lo[i], double(p[k])), hi[i] = std::max(hi[i], double(p[k]));
    }
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    auto [scale, zp] = u8_grid(lo[i], hi[i]);
    set_quant_hint(*targets[i], scale, zp);
  }
  for (size_t i = 0; i < sums.size(); ++i) {
    size_t at = targets.size() + i;
    auto [scale, zp] = u8_grid(lo[at], hi[at]);
    set_quant_sum_hint(*sums[i], scale, zp);
  }
}

}  // namespace cuvil
