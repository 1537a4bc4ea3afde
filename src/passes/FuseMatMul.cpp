// fuse-matmul: a matrix product and the element-wise work that follows it become one FusedMatMul
//   Y = activation(alpha * A B' + bias + sum)
// absorbing, in this order and each only when it is the sole reader of the value before it:
//   - Mul / Div by a constant scalar (attention's 1/sqrt(d) scaling) -> alpha
//   - Add of a 1-D value with one element per output column -> bias
//   - Add of a value of the output's shape (a residual) -> sum
//   - an activation (Relu, Clip, Gelu, ...)
// and quantize_dynamic's MatMulInteger -> Cast -> Mul(scales) [-> Add(bias)] becomes one dequantizing
// MatMulInteger (dequantized_matmul.cpp).
// A MatMul's B that is a Transpose swapping the last two dims (attention's K^T), read by nothing else, is read
// through strides instead (transB).
// Roots: MatMul with operands of rank >= 2, and Gemm without transA whose C is absent, 1-D, [1, N] (a constant,
// reshaped) or the output's shape, with beta = 1.
#include "passes/dequantized_matmul.h"
#include "passes/fusion.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {


bool rank_at_least(const Value* v, size_t r) { return v && v->shape().rank_known() && v->shape().rank() >= r; }

// The Add's other operand when it adds a per-column bias [N] to y.
Value* bias_operand(const Node& add, const Value* y) {
  Value* other = add.input(0) == y ? add.input(1) : add.input(0);
  if (!other || other == y || other->dtype() != y->dtype() || !other->shape().rank_known()) return nullptr;
  if (other->shape().rank() != 1 || other->shape()[0] != y->shape()[y->shape().rank() - 1]) return nullptr;
  return other;
}

Value* sum_operand(const Node& add, const Value* y) {
  Value* other = add.input(0) == y ? add.input(1) : add.input(0);
  if (!other || other == y || other->type() != y->type()) return nullptr;
  return other;
}

// The Transpose producing v when it swaps v's last two dims and keeps the others, else null.
Node* swaps_last_two(const Value* v) {
  Node* t = v->producer();
  if (!t || t->op() != OpKind::Transpose || !t->has_attr("perm")) return nullptr;
  const auto& perm = t->attrs().at("perm").ints();
  size_t r = perm.size();
  if (r < 2) return nullptr;
  for (size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != int64_t(i)) return nullptr;
  return perm[r - 2] == int64_t(r - 1) && perm[r - 1] == int64_t(r - 2) ? t : nullptr;
}

bool fuse(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  std::unordered_set<const Node*> taken;
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* root = g.nodes()[i].get();
    Value* y = root->num_outputs() == 1 ? root->output(0) : nullptr;
    if (!y || !is_float(y->dtype()) || taken.count(root)) continue;
    Value *a = root->input(0), *b = root->input(1), *bias = nullptr, *sum = nullptr;
    double alpha = 1.0;
    int64_t trans_b = 0;
    Node* b_transpose = nullptr;
    if (root->op() == OpKind::MatMul) {
      if (!rank_at_least(a, 2) || !rank_at_least(b, 2)) continue;
      if (Node* t = swaps_last_two(b); t && uses.sole_user(b) == root && !taken.count(t)) {
        b_transpose = t;
        b = t->input(0);
        trans_b = 1;
      }
    } else if (root->op() == OpKind::Gemm) {
      AttrReader at(*root);
      if (at.i("transA") != 0) continue;
      trans_b = at.i("transB");
      alpha = at.f("alpha");
      if (Value* c = root->num_inputs() > 2 ? root->input(2) : nullptr) {
        if (at.f("beta") != 1.0f || !c->shape().rank_known()) continue;
        const Shape& cs = c->shape();
        const Dim& n = y->shape()[1];
        if (cs.rank() == 1 && cs[0] == n) {
          bias = c;
        } else if (cs.rank() == 2 && cs[0] == Dim(1) && cs[1] == n && c->is_constant()) {
          bias = g.add_constant(g.unique_name(c->name() + "_row"), c->constant().reshaped({c->constant().dim(1)}));
        } else if (c->type() == y->type()) {
          sum = c;
        } else {
          continue;
        }
      }
    } else {
      continue;
    }
    std::vector<Node*> chain{root};
    Value* cur = y;
    nn::Activation act;
    for (;;) {
      Node* u = uses.sole_user(cur);
      if (!u || taken.count(u) || u->num_outputs() != 1) break;
      if (!bias && !sum && (u->op() == OpKind::Mul || u->op() == OpKind::Div) && u->num_inputs() == 2) {
        Value* other = u->input(0) == cur ? u->input(1) : u->input(0);
        auto k = rewrite::scalar_constant(other);
        if (!k || (u->op() == OpKind::Div && (u->input(0) != cur || *k == 0)) || u->output(0)->type() != cur->type()) break;
        alpha = u->op() == OpKind::Mul ? alpha * *k : alpha / *k;
      } else if (Value* b_ = u->op() == OpKind::Add && !bias && !sum ? bias_operand(*u, cur) : nullptr) {
        bias = b_;
      } else if (Value* s_ = u->op() == OpKind::Add && !sum ? sum_operand(*u, cur) : nullptr) {
        sum = s_;
      } else if (auto a_ = fusion::activation_of(*u); a_ && u->input(0) == cur) {
        act = *a_;
        chain.push_back(u);
        cur = u->output(0);
        break;
      } else {
        break;
      }
      chain.push_back(u);
      cur = u->output(0);
    }
    if (chain.size() == 1 && root->op() == OpKind::MatMul && !b_transpose) continue;  // nothing to fuse
    if (b_transpose) dead.push_back(b_transpose), taken.insert(b_transpose);
    AttrMap attrs{{"alpha", Attribute(alpha)}, {"transB", Attribute(trans_b)}};
    fusion::set_activation(attrs, act);
    // int8 hints and the node's own precision (QDQ models)
    for (const char* q : {"quant_x_scale", "quant_x_zero_point", "quant_w_scales", "precision", "precision_reason"})
      if (root->has_attr(q)) attrs[q] = root->attr(q);
    std::vector<Value*> ins{a, b, bias, sum};
    while (!ins.empty() && !ins.back()) ins.pop_back();
    rewrite::replace_result(g, chain.back(), cur, OpKind::FusedMatMul, ins, attrs);
    for (Node* n : chain) dead.push_back(n), taken.insert(n);
    changed = true;
  }
  g.erase_nodes(dead);
  return changed;
}

}  // namespace

bool FuseMatMulPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, [](Graph& sub) {
    bool integer = fuse_dequantized_matmul(sub);
    return fuse(sub) || integer;
  });
}

}  // namespace cuvil
