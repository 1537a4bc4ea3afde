// simplify-identities: removes nodes that return their input unchanged, and collapses chains of shape-only ops.
//   - Identity(x)                                   -> x
//   - Dropout(x, ...) in inference (no training_mode, or a constant false one) with its mask unused -> x
//   - Cast(x) to x's dtype, CastLike(x, y) with y of x's dtype -> x
//   - Reshape / Squeeze / Unsqueeze / Flatten whose output type equals its input type -> x
//   - Transpose with the identity perm (or no perm on rank <= 1) -> x
//   - Reshape/Squeeze/Unsqueeze/Flatten of the output of another of these, with a static output shape (no zero
//     dims) -> one Reshape of the first one's input to that shape (the inner node is left to dead-code-elimination
//     when nothing else reads it)
// Graph outputs keep their names: the replacement value is renamed to the output's name; where it cannot be (it
// is a graph input or already an output), the node is kept. Repeats until nothing changes, so a second run is a
// no-op.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool reshape_like(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Squeeze || k == OpKind::Unsqueeze || k == OpKind::Flatten;
}

bool only_output_used(const Graph& g, const Node& n, const std::unordered_set<const Value*>& used) {
  for (size_t i = 1; i < n.num_outputs(); ++i)
    if (used.count(n.output(i))) return false;
  return true;
}

// The value n passes through unchanged, or null.
Value* passthrough(const Graph& g, const Node& n, const std::unordered_set<const Value*>& used) {
  Value* x = n.input(0);
  if (!x || n.num_outputs() < 1) return nullptr;
  const Value* y = n.output(0);
  switch (n.op()) {
    case OpKind::Identity: return x;
    case OpKind::Dropout: {
      Value* training = n.input(2);
      if (training) {
        if (!training->is_constant() || training->constant().numel() != 1 || training->constant().get_i64(0) != 0)
          return nullptr;
      }
      return only_output_used(g, n, used) ? x : nullptr;
    }
    case OpKind::Cast:
    case OpKind::CastLike:
      return x->type() == y->type() ? x : nullptr;
    case OpKind::Transpose: {
      if (!x->shape().rank_known()) return nullptr;
      size_t r = x->shape().rank();
      if (!n.has_attr("perm")) return r <= 1 ? x : nullptr;
      const auto& perm = n.attrs().at("perm").ints();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != int64_t(i)) return nullptr;
      return x;
    }
    default:
      if (reshape_like(n.op()) && x->type().shape.rank_known() && x->type() == y->type()) return x;
      return nullptr;
  }
}

bool simplify_once(Graph& g) {
  std::unordered_set<const Value*> used = rewrite::used_values(g);
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (Value* x = passthrough(g, *n, used)) {
      if (rewrite::replace_value(g, n->output(0), x)) dead.push_back(n);
      continue;
    }
    // A chain of shape-only ops with a static result: one Reshape of the chain's input.
    Value* y = n->num_outputs() == 1 ? n->output(0) : nullptr;
    Value* mid = n->input(0);
    if (!y || !reshape_like(n->op()) || !mid || !mid->producer() || mid->graph() != &g ||
        !reshape_like(mid->producer()->op()) || !y->shape().is_static())
      continue;
    std::vector<int64_t> dims = y->shape().static_dims();
    bool has_zero = false;
    for (int64_t d : dims) has_zero |= d == 0;
    if (has_zero) continue;
    Value* src = mid->producer()->input(0);
    std::string name = rewrite::free_name(g, y);
    Value* shape = g.add_constant(g.unique_name(name + "_shape"),
                                  Tensor::from_vector<int64_t>(dims, {int64_t(dims.size())}));
    Node* r = g.insert_node(i, OpKind::Reshape, {src, shape}, {name}, {}, n->loc());
    r->output(0)->set_type(y->type());
    g.replace_all_uses(y, r->output(0));
    dead.push_back(n);
    ++i;  // skip over n, now one position later
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

bool simplify(Graph& g) {
  bool changed = false;
  while (simplify_once(g)) changed = true;
  return changed;
}

}  // namespace

bool SimplifyIdentitiesPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, simplify);
}

}  // namespace cuvil
