// fuse-attention: scaled dot-product attention becomes one Attention node (see src/ir/ops/attention.cpp)
//
//   S = MatMul(q', kT')           q' = q, or q * c / q / c for a scalar constant c (scaling q before the product);
//                                 kT' likewise (the exports scale both by 1 / sqrt(sqrt(d)))
//   S = S * c, S / c              optional, any number of scalar constants
//   S = S + Mask                  optional, a Mask that broadcasts to S without enlarging it
//     or Where(Mask, S, c)        a bool Mask (True keeps the score) and a scalar constant c (-inf, a dtype's
//                                 minimum): what torch.export's SDPA decomposition and Hugging Face masks give
//   P = Softmax(S, axis = -1)
//   P = Where(IsNaN(P), 0, P)     optional: PyTorch's safe softmax, as its ONNX exports of SDPA write it
//                                 (the node's nan_probs_zero)
//   y = MatMul(P, v)
//   Y = Transpose(y)              optional
//
// Transposes producing q, kT or v (a chain of them composes), and one applied to y, become the node's
// permutations, so the heads are read from and written to the [S, H, D] layout the projections use, with no
// transpose passes over memory. Every intermediate value must be read only by the next step (a model that also
// returns the attention probabilities keeps them), the batch dims of q, k and v must be equal (no broadcasting),
// and shapes known to be equal where the kernel needs them so: symbolic dims count as equal when their
// expressions are (the batch dims of q, k, v; a mask dim that is not 1 and the scores dim it covers). The kernel
// is prepared per shape signature, like the plan around it.
#include <numeric>

#include "ir/op_schema.h"
#include "ir/ops/transpose.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

using Perm = std::vector<int64_t>;

Perm identity(size_t r) {
  Perm p(r);
  std::iota(p.begin(), p.end(), int64_t(0));
  return p;
}

bool is_ranked_float(const Value* v) { return v && is_float(v->dtype()) && v->shape().rank_known(); }

struct Match {
  std::vector<Node*> nodes;  // replaced (erased once the Attention node takes over the result)
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr, *result = nullptr;
  Perm perm_q, perm_k, perm_v, perm_y;
  double scale = 1.0;
  std::optional<double> mask_fill;  // a bool mask's (Where) fill value
  bool nan_probs_zero = false;      // Where(IsNaN(P), 0, P) after the Softmax
};

class Matcher {
 public:
  Matcher(const rewrite::UseMap& uses, const std::unordered_set<const Node*>& taken) : uses_(uses), taken_(taken) {}

  // The attention whose Softmax is `sm`, or nullopt.
  std::optional<Match> match(Node* sm) {
    Match m;
    Value* s = sm->input(0);
    if (!is_ranked_float(s) || s->shape().rank() < 2) return std::nullopt;
    size_t r = s->shape().rank();
    int64_t axis = AttrReader(*sm).i("axis");
    if (axis != -1 && axis != int64_t(r) - 1) return std::nullopt;
    m.nodes.push_back(sm);
    // Back from the scores: the mask Add, scalings, the first product.
    Node* mm1 = nullptr;
    if (Node* add = s->producer(); add && add->op() == OpKind::Add && add->num_inputs() == 2 &&
                                   uses_.sole_user(s) == sm && !taken_.count(add)) {
      for (int side : {0, 1}) {
        Match tried = m;
        tried.nodes.push_back(add);
        if (Node* p = scores_product(add->input(side), add, tried);
            p && is_mask(add->input(1 - side), s, s->dtype())) {
          m = tried;
          m.mask = add->input(1 - side);
          mm1 = p;
          break;
        }
      }
    } else if (Node* w = s->producer(); w && w->op() == OpKind::Where && w->num_inputs() == 3 &&
                                        uses_.sole_user(s) == sm && !taken_.count(w)) {
      // Where(Mask, S, c): the kept scores on the true side, a scalar fill on the false side.
      auto fill = rewrite::scalar_constant(w->input(2));
      Value* mask = w->input(0);
      if (!fill || !mask || mask->dtype() != DType::boolean || !is_mask(mask, s, DType::boolean) ||
          w->input(1)->shape() != s->shape())
        return std::nullopt;
      m.nodes.push_back(w);
      mm1 = scores_product(w->input(1), w, m);
      m.mask = mask;
      m.mask_fill = *fill;
    } else {
      mm1 = scores_product(s, sm, m);
    }
    if (!mm1) return std::nullopt;
    // q, possibly scaled, possibly transposed.
    const Node* q_reader = mm1;
    Value* q = unscaled(mm1->input(0), q_reader, m);
    m.q = through_transpose(q, q_reader, m, m.perm_q, r);
    // kT: k, possibly scaled, seen through a transpose whose last two dims are swapped back.
    const Node* k_reader = mm1;
    Value* kt = unscaled(mm1->input(1), k_reader, m);
    m.k = through_transpose(kt, k_reader, m, m.perm_k, r);
    std::swap(m.perm_k[r - 1], m.perm_k[r - 2]);
    // The second product, reading the probabilities as its left operand.
    Value* probs = sm->output(0);
    if (Node* w = safe_softmax(probs)) {
      m.nodes.push_back(w->input(0)->producer());
      m.nodes.push_back(w);
      m.nan_probs_zero = true;
      probs = w->output(0);
    }
    Node* mm2 = only_reader(probs);
    if (!mm2 || mm2->op() != OpKind::MatMul || mm2->input(0) != probs || mm2->input(1) == probs) return std::nullopt;
    m.nodes.push_back(mm2);
    m.v = through_transpose(mm2->input(1), mm2, m, m.perm_v, r);
    m.result = mm2->output(0);
    m.perm_y = identity(r);
    if (Node* t = only_reader(m.result); t && t->op() == OpKind::Transpose && !taken_.count(t)) {
      Perm p = transpose_perm(*t, int64_t(r)).value_or(Perm{});
      if (!p.empty()) {
        m.nodes.push_back(t);
        m.perm_y = p;
        m.result = t->output(0);
      }
    }
    for (Value* v : {m.q, m.k, m.v, m.result})
      if (!is_ranked_float(v) || v->shape().rank() != r || v->dtype() != s->dtype()) return std::nullopt;
    if (!same_batch(m, r)) return std::nullopt;
    for (Node* n : m.nodes)
      if (taken_.count(n)) return std::nullopt;
    return m;
  }

 private:
  const rewrite::UseMap& uses_;
  const std::unordered_set<const Node*>& taken_;

  // The node reading v when nothing else reads it and no other match has taken it.
  Node* only_reader(const Value* v) const {
    Node* u = uses_.sole_user(v);
    return u && !taken_.count(u) ? u : nullptr;
  }

  // The Where of Where(IsNaN(P), 0, P) when P is read by exactly those two nodes and the IsNaN only by the Where.
  Node* safe_softmax(const Value* p) const {
    const std::vector<Node*>& users = uses_.users(p);
    if (users.size() != 2 || uses_.pinned(p)) return nullptr;
    Node* isnan = users[0]->op() == OpKind::IsNaN ? users[0] : users[1];
    Node* w = isnan == users[0] ? users[1] : users[0];
    if (isnan->op() != OpKind::IsNaN || w->op() != OpKind::Where || taken_.count(isnan) || taken_.count(w))
      return nullptr;
    if (uses_.sole_user(isnan->output(0)) != w || w->input(0) != isnan->output(0) || w->input(2) != p) return nullptr;
    auto zero = rewrite::scalar_constant(w->input(1));
    if (!zero || *zero != 0 || w->output(0)->shape() != p->shape() || w->output(0)->dtype() != p->dtype())
      return nullptr;
    return w;
  }

  // v with the multiplications and divisions by scalar constants that produce it peeled off, each read only by
  // the next (`reader` follows to the last node peeled); their factors go into m.scale.
  Value* unscaled(Value* v, const Node*& reader, Match& m) const {
    for (;;) {
      Node* n = v->producer();
      if (!n || uses_.sole_user(v) != reader || taken_.count(n) || n->num_inputs() != 2) return v;
      if (n->op() != OpKind::Mul && n->op() != OpKind::Div) return v;
      int k = rewrite::scalar_constant(n->input(1)) ? 1 : 0;  // the constant's side
      if (n->op() == OpKind::Div && k == 0) return v;           // c / x is not a scaling
      auto c = rewrite::scalar_constant(n->input(size_t(k)));
      Value* x = n->input(size_t(1 - k));
      if (!c || *c == 0 || !is_ranked_float(x) || x->shape() != v->shape()) return v;  // no broadcasting up
      m.scale = n->op() == OpKind::Mul ? m.scale * *c : m.scale / *c;
      m.nodes.push_back(n);
      reader = n;
      v = x;
    }
  }

  // The MatMul computing the scores `s` (read only by `reader`), through scalings; null when there is none.
  Node* scores_product(Value* s, const Node* reader, Match& m) const {
    s = unscaled(s, reader, m);
    Node* mm = s->producer();
    if (!mm || mm->op() != OpKind::MatMul || uses_.sole_user(s) != reader || taken_.count(mm)) return nullptr;
    if (mm->input(0) == mm->input(1)) return nullptr;
    m.nodes.push_back(mm);
    return mm;
  }

  // The Mask operand of the scores' Add (or Where): of dtype `dt`, and it broadcasts to the scores without
  // enlarging them: each of its dims is 1 or the scores' (a symbolic dim only where its expression is the same).
  static bool is_mask(const Value* mask, const Value* sum, DType dt) {
    if (!mask || !mask->shape().rank_known() || mask->dtype() != dt) return false;
    const Shape& ms = mask->shape();
    const Shape& ss = sum->shape();
    if (ms.rank() > ss.rank()) return false;
    for (size_t d = 0; d < ms.rank(); ++d) {
      const Dim &md = ms[d], &sd = ss[ss.rank() - ms.rank() + d];
      if (!(md.is_const() && md.value() == 1) && md != sd) return false;
    }
    return true;
  }

  // x itself (perm = identity), or, through the chain of Transposes producing x that are each read only by the
  // next step, the chain's input (perm = the Transposes composed, which the node then absorbs).
  Value* through_transpose(Value* x, const Node* reader, Match& m, Perm& perm, size_t r) const {
    perm = identity(r);
    for (;;) {
      Node* t = x->producer();
      if (!t || t->op() != OpKind::Transpose || uses_.sole_user(x) != reader || taken_.count(t)) return x;
      Perm p = transpose_perm(*t, int64_t(r)).value_or(Perm{});
      if (p.empty()) return x;
      // perm applied to Transpose(X, p): dim i is dim perm[i] of t's output, which is dim p[perm[i]] of X.
      Perm composed(r);
      for (size_t i = 0; i < r; ++i) composed[i] = p[size_t(perm[i])];
      perm = composed;
      m.nodes.push_back(t);
      reader = t;
      x = t->input(0);
    }
  }

  static bool same_batch(const Match& m, size_t r) {
    auto dim = [](const Value* v, const Perm& p, size_t d) { return v->shape()[size_t(p[d])]; };
    for (size_t d = 0; d + 2 < r; ++d)
      if (dim(m.q, m.perm_q, d) != dim(m.k, m.perm_k, d) || dim(m.q, m.perm_q, d) != dim(m.v, m.perm_v, d))
        return false;
    return true;
  }
};

AttrMap attention_attrs(const Match& m) {
  AttrMap a{{"scale", Attribute(m.scale)}};
  if (m.mask_fill) a.emplace("mask_fill", Attribute(*m.mask_fill));
  if (m.nan_probs_zero) a.emplace("nan_probs_zero", Attribute(int64_t(1)));
  size_t r = m.perm_q.size();
  auto put = [&](const char* name, const Perm& p) {
    if (p != identity(r)) a.emplace(name, Attribute(p));
  };
  put("perm_q", m.perm_q);
  put("perm_k", m.perm_k);
  put("perm_v", m.perm_v);
  put("perm_y", m.perm_y);
  return a;
}

bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::unordered_set<const Node*> taken;
  std::vector<Node*> dead;
  Matcher matcher(uses, taken);
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* sm = g.nodes()[i].get();
    if (sm->op() != OpKind::Softmax || taken.count(sm)) continue;
    std::optional<Match> m = matcher.match(sm);
    if (!m) continue;
    std::vector<Value*> ins{m->q, m->k, m->v};
    if (m->mask) ins.push_back(m->mask);
    Node* last = m->nodes[0];
    for (Node* n : m->nodes)
      if (rewrite::node_index(g, n) > rewrite::node_index(g, last)) last = n;
    rewrite::replace_result(g, last, m->result, OpKind::Attention, ins, attention_attrs(*m));
    for (Node* n : m->nodes) dead.push_back(n), taken.insert(n);
    changed = true;
  }
  g.erase_nodes(dead);
  return changed;
}

}  // namespace

bool FuseAttentionPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, fuse); }

}  // namespace cuvil
