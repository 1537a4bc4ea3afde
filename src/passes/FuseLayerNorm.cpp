// fuse-layer-norm: layer normalization over the last axis written out op by op (how PyTorch exports nn.LayerNorm
// to ONNX opsets < 17) becomes one LayerNormalization node, computed in one pass per row:
//   m = ReduceMean(x, [-1]);  d = x - m;  v = ReduceMean(d^2, [-1]);  n = d / Sqrt(v + eps)
//   y = n * gamma + beta          (the Mul and Add optional; d^2 as Pow(d, 2) or Mul(d, d))
// f32 only (LayerNormalization computes in f32); gamma and beta must be 1-D over the last axis; every
// intermediate value must have no reader outside the pattern.
#include "ir/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// A ReduceMean of v over its last axis with keepdims.
bool mean_over_last_axis(const Node* n, const Value* v) {
  if (!n || n->op() != OpKind::ReduceMean || n->input(0) != v || !v->shape().rank_known()) return false;
  AttrReader a(*n);
  if (a.i("keepdims") != 1 || !n->input(1) || !n->input(1)->is_constant()) return false;
  std::vector<int64_t> axes = n->input(1)->constant().to_i64_vector();
  int64_t r = int64_t(v->shape().rank());
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1);
}

Value* other_of(const Node& n, const Value* known) {
  if (n.num_inputs() != 2) return nullptr;
  return n.input(0) == known ? n.input(1) : n.input(1) == known ? n.input(0) : nullptr;
}

// A 1-D value with one element per entry of x's last axis.
bool per_last_axis(const Value* p, const Value* x) {
  return p && p->dtype() == x->dtype() && p->shape().rank_known() && p->shape().rank() == 1 &&
         p->shape()[0] == x->shape()[x->shape().rank() - 1];
}

bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  std::unordered_set<const Node*> taken;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* sub = g.nodes()[i].get();
    if (sub->op() != OpKind::Sub || taken.count(sub)) continue;
    Value *x = sub->input(0), *m = sub->input(1), *d = sub->output(0);
    if (!x || x->dtype() != DType::f32 || !m || !mean_over_last_axis(m->producer(), x) || d->type() != x->type())
      continue;
    Node* mean = m->producer();
    if (uses.sole_user(m) != sub) continue;
    // d is read by exactly the square and the division (Mul(d, d) reads it twice).
    Node *sq = nullptr, *div = nullptr;
    for (Node* n : uses.users(d)) {
      if ((n->op() == OpKind::Pow && n->input(0) == d && rewrite::scalar_constant(n->input(1)) == 2.0) ||
          (n->op() == OpKind::Mul && n->input(0) == d && n->input(1) == d))
        sq = n;
      if (n->op() == OpKind::Div && n->input(0) == d) div = n;
    }
    size_t want = sq && sq->op() == OpKind::Mul ? 3 : 2;
    if (!sq || !div || uses.users(d).size() != want || uses.pinned(d)) continue;
    Node* var = uses.sole_user(sq->output(0));
    if (!mean_over_last_axis(var, sq->output(0))) continue;
    Node* add_eps = uses.sole_user(var->output(0));
    auto eps = add_eps && add_eps->op() == OpKind::Add ? rewrite::scalar_constant(other_of(*add_eps, var->output(0)))
                                                      : std::nullopt;
    if (!eps) continue;
    Node* sqrt = uses.sole_user(add_eps->output(0));
    if (!sqrt || sqrt->op() != OpKind::Sqrt || uses.sole_user(sqrt->output(0)) != div || div->input(1) != sqrt->output(0))
      continue;
    std::vector<Node*> pattern{mean, sub, sq, var, add_eps, sqrt, div};
    Value* out = div->output(0);
    Value *gamma = nullptr, *beta = nullptr;
    if (Node* mul = uses.sole_user(out); mul && mul->op() == OpKind::Mul && per_last_axis(other_of(*mul, out), x)) {
      gamma = other_of(*mul, out);
      pattern.push_back(mul);
      out = mul->output(0);
      if (Node* add = uses.sole_user(out); add && add->op() == OpKind::Add && per_last_axis(other_of(*add, out), x)) {
        beta = other_of(*add, out);
        pattern.push_back(add);
        out = add->output(0);
      }
    }
    bool free = out->type() == x->type();
    for (Node* n : pattern) free = free && !taken.count(n) && n->graph() == &g;
    if (!free) continue;
    if (!gamma) {
      int64_t c = x->shape()[x->shape().rank() - 1].is_const() ? x->shape()[x->shape().rank() - 1].value() : -1;
      if (c < 0) continue;
      gamma = g.add_constant(g.unique_name("layer_norm_ones"),
                             Tensor::from_vector<float>(std::vector<float>(size_t(c), 1.f), {c}));
    }
    std::vector<Value*> ins{x, gamma};
    if (beta) ins.push_back(beta);
    AttrMap attrs{{"axis", Attribute(int64_t(-1))}, {"epsilon", Attribute(*eps)}};
    rewrite::replace_result(g, out->producer(), out, OpKind::LayerNormalization, ins, attrs);
    for (Node* n : pattern) dead.push_back(n), taken.insert(n);
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool FuseLayerNormPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fuse); }

}  // namespace cuvil
