// fuse-gelu: the exact GELU written out element by element (how PyTorch exports nn.GELU to ONNX opset <= 17)
// becomes one Gelu node, which the kernels compute in one pass and fuse-matmul / fuse-conv can take as an
// activation:
//   u = x / sqrt(2)  (or x * (1 / sqrt(2)));  a = Erf(u) + 1;  out = (x * a) * 0.5  (or (x * 0.5) * a)
// and so does the tanh approximation (GPT-2's gelu_new, Hugging Face's NewGELU), as Gelu(approximate = "tanh"):
//   u = (x + 0.044715 * Pow(x, 3)) * sqrt(2 / pi);  a = Tanh(u) + 1;  out as above
// Every intermediate value must have no reader outside the pattern. Constants match to a relative 1e-4.
// When x is a Reshape's output that nothing else reads (GPT-2's Conv1D: addmm on [B*S, E], then a view), the Gelu
// is computed before the Reshape (element-wise: the same values), so fuse-matmul finds it right after the product.
#include <algorithm>
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

// For a Mul n by a scalar constant near `c` (either side), its other input; else null.
Value* scaled_by(const Node* n, double c) {
  if (!n || n->op() != OpKind::Mul || n->num_inputs() != 2) return nullptr;
  if (near(rewrite::scalar_constant(n->input(1)), c)) return n->input(0);
  if (near(rewrite::scalar_constant(n->input(0)), c)) return n->input(1);
  return nullptr;
}

// The tanh form's argument u = (x + 0.044715 * Pow(x, 3)) * sqrt(2 / pi): x, with its nodes added to `pattern`;
// null when u is not that.
Value* tanh_gelu_input(const rewrite::UseMap& uses, Value* u, const Node* reader, std::vector<Node*>& pattern) {
  Node* scale = u->producer();
  if (!scale || uses.sole_user(u) != reader) return nullptr;
  Value* v = scaled_by(scale, std::sqrt(2.0 / M_PI));
  Node* add = v ? v->producer() : nullptr;
  if (!add || add->op() != OpKind::Add || add->num_inputs() != 2 || uses.sole_user(v) != scale) return nullptr;
  for (int side : {0, 1}) {
    Value* x = add->input(size_t(side));
    Value* w = add->input(size_t(1 - side));
    Node* wn = w->producer();
    Value* cube = scaled_by(wn, 0.044715);
    Node* pow = cube ? cube->producer() : nullptr;
    if (!pow || pow->op() != OpKind::Pow || pow->input(0) != x || !near(rewrite::scalar_constant(pow->input(1)), 3.0))
      continue;
    if (uses.sole_user(w) != add || uses.sole_user(cube) != wn) continue;
    pattern.insert(pattern.end(), {pow, wn, add, scale});
    return x;
  }
  return nullptr;
}

bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  std::unordered_set<const Node*> taken;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* erf = g.nodes()[i].get();  // Erf, or Tanh for the approximation
    if ((erf->op() != OpKind::Erf && erf->op() != OpKind::Tanh) || taken.count(erf)) continue;
    bool tanh_form = erf->op() == OpKind::Tanh;
    Value* u = erf->input(0);
    Node* scale = u->producer();
    if (!scale || scale->graph() != &g || uses.sole_user(u) != erf) continue;
    std::vector<Node*> pattern;
    Value* x = scale->input(0);
    if (tanh_form) {
      x = tanh_gelu_input(uses, u, erf, pattern);
      if (!x) continue;
    } else if (scale->op() == OpKind::Div) {
      if (!near(rewrite::scalar_constant(scale->input(1)), std::sqrt(2.0))) continue;
      pattern.push_back(scale);
    } else if (scale->op() == OpKind::Mul) {
      if (near(rewrite::scalar_constant(scale->input(1)), std::sqrt(0.5))) x = scale->input(0);
      else if (near(rewrite::scalar_constant(scale->input(0)), std::sqrt(0.5))) x = scale->input(1);
      else continue;
      pattern.push_back(scale);
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
    pattern.insert(pattern.end(), {erf, add, m1});
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
    AttrMap attrs;
    if (tanh_form) attrs.emplace("approximate", Attribute(std::string("tanh")));
    // x * 0.5 and Pow(x, 3) read x besides the pattern's other nodes: x's readers must all be in the pattern for
    // the Gelu to move above a Reshape producing it.
    Node* reshape = x->producer();
    bool through = reshape && reshape->op() == OpKind::Reshape && reshape->graph() == &g && !uses.pinned(x) &&
                   !taken.count(reshape) && reshape->input(0)->dtype() == x->dtype();
    for (Node* r : uses.users(x))
      through = through && std::find(pattern.begin(), pattern.end(), r) != pattern.end();
    if (through) {
      Value* y = reshape->input(0);
      Node* gelu = g.insert_node(rewrite::node_index(g, reshape), OpKind::Gelu, {y},
                                 {g.unique_name(y->name() + "_gelu")}, attrs, last->loc());
      gelu->output(0)->set_type(y->type());
      rewrite::replace_result(g, last, last->output(0), OpKind::Reshape, {gelu->output(0), reshape->input(1)},
                              reshape->attrs());
      dead.push_back(reshape), taken.insert(reshape);
    } else {
      rewrite::replace_result(g, last, last->output(0), OpKind::Gelu, {x}, attrs);
    }
    for (Node* n : pattern) dead.push_back(n), taken.insert(n);
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool FuseGeluPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fuse); }

}  // namespace cuvil
