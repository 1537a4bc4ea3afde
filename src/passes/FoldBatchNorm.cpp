// fold-batch-norm: an inference-mode BatchNormalization whose input is a Conv used by nothing else folds into the
// Conv's weights and bias (once, at compile time), removing a full pass over the activation:
//   y = (conv(x, W) + b - mean) * scale / sqrt(var + eps) + bias
//     = conv(x, W * s) + (b - mean) * s + bias,   with s = scale / sqrt(var + eps) per output channel.
// Needs W, b (when present) and the four BN parameters as constants of one float dtype (f32 or f64). The folded
// weights are computed in double and rounded once.
#include <cmath>

#include "ir/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool is_float_constant(const Value* v, DType t) { return v && v->is_constant() && v->dtype() == t; }

// True when `user` is the only reader of v: no other node, no region, no graph output.
bool only_user(const Graph& g, const Value* v, const Node* user) {
  if (rewrite::is_graph_output(g, v)) return false;
  size_t direct = 0;
  for (auto& node : g.nodes()) {
    for (Value* in : node->inputs()) direct += in == v && node.get() == user;
    for (Value* in : node->inputs())
      if (in == v && node.get() != user) return false;
    if (!node->regions().empty()) {
      std::unordered_set<const Value*> uses;
      rewrite::add_uses_of_node(*node, uses);
      if (uses.count(v) && node.get() != user) return false;
    }
  }
  return direct == 1;
}

template <class T>
std::pair<Tensor, Tensor> folded_params(const Tensor& w, const Tensor* b, const Tensor& scale, const Tensor& bias,
                                        const Tensor& mean, const Tensor& var, double eps) {
  int64_t m = w.dim(0), per = w.numel() / m;
  Tensor nw = Tensor::zeros(w.dtype(), w.shape()), nb = Tensor::zeros(w.dtype(), {m});
  for (int64_t o = 0; o < m; ++o) {
    double s = double(scale.data<T>()[o]) / std::sqrt(double(var.data<T>()[o]) + eps);
    for (int64_t k = 0; k < per; ++k) nw.data<T>()[o * per + k] = T(double(w.data<T>()[o * per + k]) * s);
    double b0 = b ? double(b->data<T>()[o]) : 0.0;
    nb.data<T>()[o] = T((b0 - double(mean.data<T>()[o])) * s + double(bias.data<T>()[o]));
  }
  return {nw, nb};
}

bool fold(Graph& g) {
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* bn = g.nodes()[i].get();
    if (bn->op() != OpKind::BatchNormalization || bn->num_outputs() != 1) continue;
    if (AttrReader(*bn).i("training_mode") != 0) continue;
    Value* y = bn->input(0);
    Node* conv = y ? y->producer() : nullptr;
    if (!conv || conv->op() != OpKind::Conv || conv->graph() != &g || !only_user(g, y, bn)) continue;
    DType t = y->dtype();
    if (t != DType::f32 && t != DType::f64) continue;
    Value *w = conv->input(1), *b = conv->input(2);
    bool params_ok = is_float_constant(w, t) && (!b || is_float_constant(b, t));
    for (size_t k = 1; k < 5; ++k) params_ok = params_ok && is_float_constant(bn->input(k), t);
    if (!params_ok || w->constant().rank() < 1) continue;
    int64_t m = w->constant().dim(0);
    bool shapes_ok = true;
    for (size_t k = 1; k < 5; ++k) shapes_ok = shapes_ok && bn->input(k)->constant().shape() == std::vector<int64_t>{m};
    if (b) shapes_ok = shapes_ok && b->constant().shape() == std::vector<int64_t>{m};
    if (!shapes_ok) continue;
    double eps = AttrReader(*bn).f("epsilon");
    auto [nw, nb] = t == DType::f32
        ? folded_params<float>(w->constant(), b ? &b->constant() : nullptr, bn->input(1)->constant(),
                               bn->input(2)->constant(), bn->input(3)->constant(), bn->input(4)->constant(), eps)
        : folded_params<double>(w->constant(), b ? &b->constant() : nullptr, bn->input(1)->constant(),
                                bn->input(2)->constant(), bn->input(3)->constant(), bn->input(4)->constant(), eps);
    Value* cw = g.add_constant(g.unique_name(w->name() + "_bn"), nw);
    Value* cb = g.add_constant(g.unique_name((b ? b->name() : w->name()) + "_bn_bias"), nb);
    Value* out = bn->output(0);
    Node* fused = g.insert_node(i, OpKind::Conv, {conv->input(0), cw, cb}, {g.unique_name(out->name() + "_conv")},
                                conv->attrs(), conv->loc());
    fused->output(0)->set_type(out->type());
    if (!rewrite::replace_value(g, out, fused->output(0))) {
      g.erase_nodes({fused});
      g.erase_constants({cw, cb});
      continue;
    }
    dead.push_back(bn);
    dead.push_back(conv);
    ++i;  // skip the BatchNormalization, now one further down
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool FoldBatchNormPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fold); }

}  // namespace cuvil
