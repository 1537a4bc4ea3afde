// fuse-gelu: the exact GELU written out element by element (how PyTorch exports nn.GELU to ONNX opset <= 17)
// becomes one Gelu node, which the kernels compute in one pass and fuse-matmul / fuse-conv can take as an
// activation:
//   u = x / sqrt(2)  (or x * (1 / sqrt(2)));  a = Erf(u) + 1;  out = (x * a) * 0.5  (or (x * 0.5) * a)
// Every intermediate value must have no reader outside the pattern. Constants match to a relative 1e-4.
#include <cmath>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-4 * std::fabs(want); }

// For a binary node n with one input `known`, the other input (or null when neither input is `known`).
Value* other_input(const Node& n, const Value* known) {
  if (n.num_inputs() != 2) return nullptr;
  if (n.input(0) == known) return n.input(1);
  if (n.input(1) == known) return n.input(0);
  return nullptr;
}

bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  std::unordered_set<const Node*> taken;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* erf = g.nodes()[i].get();
    if (erf->op() != OpKind::Erf || taken.count(erf)) continue;
    Value* u = erf->input(0);
    Node* scale = u->producer();
    if (!scale || scale->graph() != &g || uses.sole_user(u) != erf) continue;
    Value* x = scale->input(0);
    if (scale->op() == OpKind::Div) {
      if (!near(rewrite::scalar_constant(scale->input(1)), std::sqrt(2.0))) continue;
    } else if (scale->op() == OpKind::Mul) {
      if (near(rewrite::scalar_constant(scale->input(1)), std::sqrt(0.5))) x = scale->input(0);
      else if (near(rewrite::scalar_constant(scale->input(0)), std::sqrt(0.5))) x = scale->input(1);
      else continue;
    } else {
      continue;
    }
    if (x->type() != erf->output(0)->type()) continue;  // no broadcasting inside the pattern
    Node* add = uses.sole_user(erf->output(0));
    if (!add || add->op() != OpKind::Add || !near(rewrite::scalar_constant(other_input(*add, erf->output(0))), 1.0))
      continue;
    Node* m1 = uses.sole_user(add->output(0));
    if (!m1 || m1->op() != OpKind::Mul) continue;
    Value* m1_other = other_input(*m1, add->output(0));
    std::vector<Node*> pattern{scale, erf, add, m1};
    Node* last = nullptr;
    if (m1_other == x) {  // (x * a) * 0.5
      Node* m2 = uses.sole_user(m1->output(0));
      if (!m2 || m2->op() != OpKind::Mul || !near(rewrite::scalar_constant(other_input(*m2, m1->output(0))), 0.5))
        continue;
      pattern.push_back(m2);
      last = m2;
    } else if (m1_other && m1_other->producer() && m1_other->producer()->op() == OpKind::Mul &&
               uses.sole_user(m1_other) == m1 &&
               near(rewrite::scalar_constant(other_input(*m1_other->producer(), x)), 0.5)) {  // (x * 0.5) * a
      pattern.push_back(m1_other->producer());
      last = m1;
    } else {
      continue;
    }
    bool free = true;
    for (Node* n : pattern) free = free && !taken.count(n) && n->graph() == &g;
    if (!free || last->output(0)->type() != x->type()) continue;
    rewrite::replace_result(g, last, last->output(0), OpKind::Gelu, {x}, {});
    for (Node* n : pattern) dead.push_back(n), taken.insert(n);
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool FuseGeluPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fuse); }

}  // namespace cuvil
