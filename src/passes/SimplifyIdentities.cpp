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
//   - Reshape(Transpose(Reshape(x))) that merges x's dims into groups, moves whole groups and splits them back
//     (dims of size 1 aside; static shapes; the result of x's rank) -> one Transpose of x (torch's ONNX exports
//     write attention's k^T so: [B, H, S, D] -> [B*H, S, D] -> [B*H, D, S] -> [B, H, D, S]; as one Transpose,
//     fuse-attention reads k through it)
// Graph outputs keep their names: the replacement value is renamed to the output's name; where it cannot be (it
// is a graph input or already an output), the node is kept. Repeats until nothing changes, so a second run is a
// no-op.
#include <algorithm>

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

// The positions of a shape's dims that are not 1.
std::vector<size_t> non_unit(const std::vector<int64_t>& dims) {
  std::vector<size_t> at;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != 1) at.push_back(d);
  return at;
}

// `parts` (dims > 1) cut into consecutive groups whose products are `whole` in order (each > 1): the groups' end
// positions, or empty when they do not fit.
std::vector<size_t> group_ends(const std::vector<int64_t>& parts, const std::vector<int64_t>& whole) {
  std::vector<size_t> ends;
  size_t at = 0;
  for (int64_t w : whole) {
    int64_t prod = 1;
    while (at < parts.size() && prod < w) prod *= parts[at++];
    if (prod != w) return {};
    ends.push_back(at);
  }
  if (at != parts.size()) return {};
  return ends;
}

// One Transpose of `x` by `perm` (empty: none).
struct TransposeOf {
  Value* x = nullptr;
  std::vector<int64_t> perm;
};

// For n = Reshape(Transpose(Reshape(x))) as in the header, the one Transpose of x it equals; an empty perm when n
// is no such node. Dims of size 1 carry no data and are set aside; the first Reshape must merge x's other
// dims into consecutive groups, the Transpose move whole groups, the last Reshape split them back exactly.
TransposeOf sandwiched_transpose(const Graph& g, const Node& n) {
  if (!reshape_like(n.op()) || n.num_outputs() != 1) return {};
  const Value* mid = n.input(0);
  const Node* t = mid && mid->graph() == &g ? mid->producer() : nullptr;
  if (!t || t->op() != OpKind::Transpose || !t->has_attr("perm")) return {};
  const Value* z = t->input(0);
  const Node* r0 = z && z->graph() == &g ? z->producer() : nullptr;
  if (!r0 || !reshape_like(r0->op())) return {};
  Value* x = r0->input(0);
  for (const Value* v : {static_cast<const Value*>(x), z, mid, static_cast<const Value*>(n.output(0))})
    if (!v || !v->shape().is_static()) return {};
  std::vector<int64_t> xs = x->shape().static_dims(), zs = z->shape().static_dims(), ts = mid->shape().static_dims(),
                       ys = n.output(0)->shape().static_dims();
  const std::vector<int64_t>& p = t->attrs().at("perm").ints();
  if (ys.size() != xs.size() || p.size() != zs.size()) return {};
  auto values = [](const std::vector<int64_t>& dims, const std::vector<size_t>& at) {
    std::vector<int64_t> v;
    for (size_t a : at) v.push_back(dims[a]);
    return v;
  };
  std::vector<size_t> nx = non_unit(xs), nz = non_unit(zs), nt = non_unit(ts), ny = non_unit(ys);
  // x's data dims grouped into z's
  std::vector<size_t> x_ends = group_ends(values(xs, nx), values(zs, nz));
  if (x_ends.empty() && !nz.empty()) return {};
  // t's data dims in terms of z's: which group each is
  std::vector<size_t> order;
  for (size_t i : nt) {
    auto k = size_t(std::find(nz.begin(), nz.end(), size_t(p[i])) - nz.begin());
    if (k == nz.size()) return {};
    order.push_back(k);
  }
  // y's data dims, which must be those groups' x dims in that order
  std::vector<size_t> src;  // positions in nx, in y's order
  for (size_t k : order)
    for (size_t j = k == 0 ? 0 : x_ends[k - 1]; j < x_ends[k]; ++j) src.push_back(j);
  if (src.size() != ny.size()) return {};
  std::vector<int64_t> perm(ys.size(), -1);
  std::vector<bool> taken(xs.size(), false);
  for (size_t j = 0; j < ny.size(); ++j) {
    if (ys[ny[j]] != xs[nx[src[j]]]) return {};
    perm[ny[j]] = int64_t(nx[src[j]]);
    taken[nx[src[j]]] = true;
  }
  size_t next = 0;  // y's dims of size 1 take x's in order
  for (int64_t& q : perm) {
    if (q >= 0) continue;
    while (next < xs.size() && (taken[next] || xs[next] != 1)) ++next;
    if (next == xs.size()) return {};
    q = int64_t(next++);
  }
  return {x, perm};
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
    if (TransposeOf tr = sandwiched_transpose(g, *n); !tr.perm.empty()) {
      Value* y = n->output(0);
      Node* t = g.insert_node(i, OpKind::Transpose, {tr.x}, {rewrite::free_name(g, y)}, {{"perm", Attribute(tr.perm)}},
                              n->loc());
      t->output(0)->set_type(y->type());
      redirects.replace_all_uses(y, t->output(0));
      dead.push_back(n);
      ++i;
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
