// simplify-identities: removes nodes that return their input unchanged, and collapses chains of shape-only ops.
//   - Identity(x)                                   -> x
//   - Dropout(x, ...) in inference (no training_mode, or a constant false one) with its mask unused -> x
//   - Cast(x) to x's dtype, CastLike(x, y) with y of x's dtype -> x
//   - CastLike(x, y) otherwise -> Cast(x) to y's dtype (y is read only for its dtype; the Cast generates)
//   - Reshape / Squeeze / Unsqueeze / Flatten whose output type equals its input type -> x
//   - Transpose with the identity perm (or no perm on rank <= 1) -> x
//   - Transpose that moves only dims of size 1, with a static output shape -> Reshape (same bytes in order)
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

// A Transpose whose dims other than size-1 ones keep their order: it does not move any data.
bool moves_only_unit_dims(const Node& n) {
  if (n.op() != OpKind::Transpose || !n.has_attr("perm") || !n.input(0)->shape().is_static()) return false;
  std::vector<int64_t> in = n.input(0)->shape().static_dims();
  int64_t prev = -1;
  for (int64_t p : n.attrs().at("perm").ints()) {
    if (in[size_t(p)] == 1) continue;
    if (p < prev) return false;
    prev = p;
  }
  return true;
}

bool shape_only(const Node& n) { return reshape_like(n.op()) || moves_only_unit_dims(n); }

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
  rewrite::Redirects redirects(g);  // (one walk per sweep, however many nodes go)
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    redirects.apply(*n);
    if (Value* x = passthrough(g, *n, used)) {
      if (redirects.replace_value(n->output(0), x)) dead.push_back(n);
      continue;
    }
    if (n->op() == OpKind::CastLike && n->input(1)) {
      AttrMap to{{"to", Attribute(int64_t(dtype_onnx_id(n->input(1)->dtype())))}};
      if (n->has_attr("round_bf16")) to["round_bf16"] = n->attr("round_bf16");  // (bf16 rounding, opset 19+)
      if (n->has_attr("saturate")) to["saturate"] = n->attr("saturate");        // (float8 targets)
      rewrite::replace_result(g, n, n->output(0), OpKind::Cast, {n->input(0)}, to);
      dead.push_back(n);
      continue;
    }
    // A chain of shape-only ops with a static result: one Reshape of the chain's input.
    Value* y = n->num_outputs() == 1 ? n->output(0) : nullptr;
    Value* mid = n->input(0);
    if (!y || !shape_only(*n) || !y->shape().is_static()) continue;
    // A lone data-free Transpose becomes a Reshape of its own input; a chain, one Reshape of the chain's input.
    bool chain = mid && mid->producer() && mid->graph() == &g && shape_only(*mid->producer());
    if (!chain && n->op() != OpKind::Transpose) continue;
    std::vector<int64_t> dims = y->shape().static_dims();
    bool has_zero = false;
    for (int64_t d : dims) has_zero |= d == 0;
    if (has_zero) continue;
    Value* src = chain ? mid->producer()->input(0) : mid;
    std::string name = rewrite::free_name(g, y);
    Value* shape = g.add_constant(g.unique_name(name + "_shape"),
                                  Tensor::from_vector<int64_t>(dims, {int64_t(dims.size())}));
    Node* r = g.insert_node(i, OpKind::Reshape, {src, shape}, {name}, {}, n->loc());
    r->output(0)->set_type(y->type());
    redirects.replace_all_uses(y, r->output(0));
    dead.push_back(n);
    ++i;  // skip over n, now one position later
  }
  redirects.finish();
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
