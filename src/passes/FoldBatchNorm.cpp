// fold-batch-norm: an inference-mode BatchNormalization whose input is a Conv, a Gemm or a 2-D MatMul used by
// nothing else folds into its weights and bias (once, at compile time), removing a full pass over the activation:
//   y = (conv(x, W) + b - mean) * scale / sqrt(var + eps) + bias
//     = conv(x, W * s) + (b - mean) * s + bias,   with s = scale / sqrt(var + eps) per output channel.
// For a matrix product [N, C] the channel is the output column: B's column (row, with transB) c scales by s[c];
// the result is a Gemm with the folded bias as C (Gemm: alpha = beta = 1 and C absent or 1-D).
// Needs W, b (when present) and the four BN parameters as constants of one float dtype (f32 or f64). The folded
// weights are computed in double and rounded once.
#include <cmath>
#include <optional>

#include "ir/op_schema.h"
#include "ir/ops/batchnorm_fold.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool is_float_constant(const Value* v, DType t) { return v && v->is_constant() && v->dtype() == t; }

// How a producer of BN's input can take the folding: its weights and bias inputs, and W's channel layout.
struct Foldable {
  Value* w = nullptr;
  Value* b = nullptr;
  bool by_column = false;
};

std::optional<Foldable> foldable(const Node& p) {
  AttrReader a(p);
  if (p.op() == OpKind::Conv) return Foldable{p.input(1), p.input(2), false};
  const Value* y = p.output(0);
  if (!y->shape().rank_known() || y->shape().rank() != 2) return std::nullopt;
  if (p.op() == OpKind::Gemm) {
    if (a.f("alpha") != 1.0f || (p.input(2) && a.f("beta") != 1.0f)) return std::nullopt;
    Value* c = p.input(2);
    if (c && (!c->shape().rank_known() || c->shape().rank() != 1)) return std::nullopt;
    return Foldable{p.input(1), c, a.i("transB") == 0};
  }
  if (p.op() == OpKind::MatMul && p.input(0)->shape().rank_known() && p.input(0)->shape().rank() == 2)
    return Foldable{p.input(1), nullptr, true};
  return std::nullopt;
}

bool fold(Graph& g) {
  // Built once: a fold only rewires readers of BatchNormalization outputs, never those of a producer's output.
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* bn = g.nodes()[i].get();
    if (bn->op() != OpKind::BatchNormalization || bn->num_outputs() != 1) continue;
    if (AttrReader(*bn).i("training_mode") != 0) continue;
    Value* y = bn->input(0);
    Node* conv = y ? y->producer() : nullptr;
    if (!conv || conv->graph() != &g || uses.sole_user(y) != bn) continue;
    std::optional<Foldable> f = foldable(*conv);
    if (!f) continue;
    DType t = y->dtype();
    if (t != DType::f32 && t != DType::f64) continue;
    Value *w = f->w, *b = f->b;
    bool params_ok = is_float_constant(w, t) && (!b || is_float_constant(b, t));
    for (size_t k = 1; k < 5; ++k) params_ok = params_ok && is_float_constant(bn->input(k), t);
    if (!params_ok || w->constant().rank() < (f->by_column ? 2u : 1u)) continue;
    int64_t m = f->by_column ? w->constant().dim(1) : w->constant().dim(0);
    bool shapes_ok = true;
    for (size_t k = 1; k < 5; ++k) shapes_ok = shapes_ok && bn->input(k)->constant().shape() == std::vector<int64_t>{m};
    if (b) shapes_ok = shapes_ok && b->constant().shape() == std::vector<int64_t>{m};
    if (!shapes_ok) continue;
    double eps = AttrReader(*bn).f("epsilon");
    const Tensor* b0 = b ? &b->constant() : nullptr;
    auto [nw, nb] = t == DType::f32
        ? bn_fold::folded_params<float>(w->constant(), b0, bn->input(1)->constant(), bn->input(2)->constant(),
                               bn->input(3)->constant(), bn->input(4)->constant(), eps, f->by_column)
        : bn_fold::folded_params<double>(w->constant(), b0, bn->input(1)->constant(), bn->input(2)->constant(),
                                bn->input(3)->constant(), bn->input(4)->constant(), eps, f->by_column);
    Value* cw = g.add_constant(g.unique_name(w->name() + "_bn"), nw);
    Value* cb = g.add_constant(g.unique_name((b ? b->name() : w->name()) + "_bn_bias"), nb);
    Value* out = bn->output(0);
    OpKind op = conv->op() == OpKind::Conv ? OpKind::Conv : OpKind::Gemm;
    Node* fused = g.insert_node(i, op, {conv->input(0), cw, cb}, {g.unique_name(out->name() + "_folded")},
                                conv->op() == OpKind::MatMul ? AttrMap{} : conv->attrs(), conv->loc());
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
