// fuse-conv: Conv, optionally followed by a residual Add of a same-shaped value and then an activation, becomes
// one FusedConv (oneDNN applies the Add and the activation as post-ops while the output is still in cache):
//   Conv(x, W, b) -> Add(., r) -> Relu   =>   FusedConv(x, W, b, r, activation="Relu")
// Each absorbed node must be the only reader of the value before it. Every Conv becomes a FusedConv, even alone,
// so later passes (assign-layouts) and the backends see one op.
#include "passes/fusion.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {


bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  std::unordered_set<const Node*> taken;  // absorbed already (the use map predates this sweep's rewrites)
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* conv = g.nodes()[i].get();
    if (conv->op() != OpKind::Conv || !is_float(conv->output(0)->dtype())) continue;
    std::vector<Node*> chain{conv};
    Value* cur = conv->output(0);
    Value* sum = nullptr;
    nn::Activation act;
    auto next_user = [&](const Value* v) {
      Node* n = uses.sole_user(v);
      return n && !taken.count(n) ? n : nullptr;
    };
    Node* u = next_user(cur);
    if (u && u->op() == OpKind::Add && u->num_inputs() == 2) {
      Value* other = u->input(0) == cur ? u->input(1) : u->input(0);
      if (other && other != cur && other->type() == cur->type() && other->shape().rank_known()) {
        sum = other;
        chain.push_back(u);
        cur = u->output(0);
        u = next_user(cur);
      }
    }
    if (u) {
      if (auto a = fusion::activation_of(*u); a && u->input(0) == cur) {
        act = *a;
        chain.push_back(u);
        cur = u->output(0);
      }
    }
    AttrMap attrs = conv->attrs();
    fusion::set_activation(attrs, act);
    std::vector<Value*> ins{conv->input(0), conv->input(1), conv->num_inputs() > 2 ? conv->input(2) : nullptr};
    if (sum) ins.push_back(sum);
    while (!ins.empty() && !ins.back()) ins.pop_back();
    rewrite::replace_result(g, chain.back(), cur, OpKind::FusedConv, ins, attrs);
    for (Node* n : chain) dead.push_back(n), taken.insert(n);
    changed = true;
  }
  g.erase_nodes(dead);
  return changed;
}

}  // namespace

bool FuseConvolutionPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fuse); }

}  // namespace cuvil
