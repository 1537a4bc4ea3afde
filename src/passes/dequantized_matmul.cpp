// Part of fuse-matmul: quantize_dynamic's dequantization of an integer product becomes part of the product,
//   MatMulInteger(A, B, za, zb) -> Cast(to f32) -> Mul(., s) [-> Add(., bias)]
//     =>  MatMulInteger(A, B, za, zb, s, s2, bias)  (f32: the op's dequantizing form; ORT's MatMulIntegerToFloat)
// so the int32 sums never reach memory as a tensor of their own and the zero points' correction, the scales and
// the bias are one pass over the output (kernels/onednn/integer_ops.cpp).
// s is a scalar or one value per column; when it is itself a Mul of two such values read by nothing else
// (a_scale * b_scale), both become the op's scale and scale2, multiplied in float first as that Mul did. The bias
// is a 1-D f32 value with one element per column. Each step is taken only when its node is the sole reader of the
// value before it; anything else leaves the chain as it is (the product keeps its int32 sums).
#include "passes/dequantized_matmul.h"

#include "passes/rewrite.h"

namespace cuvil {
namespace {

// A float scale the fused op can apply per column: a scalar, [1], or [N].
bool column_param(const Value* v, const Dim& n) {
  if (!v || v->dtype() != DType::f32 || !v->shape().rank_known()) return false;
  const Shape& s = v->shape();
  if (s.rank() == 0) return true;
  return s.rank() == 1 && s[0].is_const() && ((s[0].value() == 1) || (n.is_const() && s[0].value() == n.value()));
}

Value* other_operand(const Node& n, const Value* v) {
  if (n.num_inputs() != 2) return nullptr;
  Value* o = n.input(0) == v ? n.input(1) : n.input(0);
  return o == v ? nullptr : o;
}

}  // namespace

bool fuse_dequantized_matmul(Graph& g) {
  rewrite::UseMap uses(g);
  std::vector<Node*> dead;
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* root = g.nodes()[i].get();
    if (root->op() != OpKind::MatMulInteger || root->num_outputs() != 1 || root->num_inputs() > 4) continue;
    Value* acc = root->output(0);
    const Value* b = root->input(1);
    if (!acc->shape().rank_known() || !b->shape().rank_known() || b->shape().rank() != 2) continue;
    const Dim& n = acc->shape()[acc->shape().rank() - 1];
    Node* cast = uses.sole_user(acc);
    if (!cast || cast->op() != OpKind::Cast || cast->output(0)->dtype() != DType::f32) continue;
    Value* accf = cast->output(0);
    Node* mul = uses.sole_user(accf);
    if (!mul || mul->op() != OpKind::Mul || mul->output(0)->type() != accf->type()) continue;
    Value* scale = other_operand(*mul, accf);
    if (!column_param(scale, n)) continue;
    Value* scale2 = nullptr;
    std::vector<Node*> chain{root, cast, mul};
    if (Node* p = scale->producer(); p && p->op() == OpKind::Mul && p->num_inputs() == 2 && uses.sole_user(scale) == mul &&
                                      column_param(p->input(0), n) && column_param(p->input(1), n)) {
      chain.push_back(p);
      scale = p->input(0), scale2 = p->input(1);
    }
    Value* y = mul->output(0);
    Value* bias = nullptr;
    if (Node* add = uses.sole_user(y); add && add->op() == OpKind::Add && add->output(0)->type() == y->type()) {
      Value* o = other_operand(*add, y);
      if (o && o->dtype() == DType::f32 && o->shape().rank_known() && o->shape().rank() == 1 && o->shape()[0] == n) {
        bias = o;
        chain.push_back(add);
        y = add->output(0);
      }
    }
    Value* za = root->num_inputs() > 2 ? root->input(2) : nullptr;
    Value* zb = root->num_inputs() > 3 ? root->input(3) : nullptr;
    std::vector<Value*> ins{root->input(0), root->input(1), za, zb, scale, scale2, bias};
    while (ins.size() > 5 && !ins.back()) ins.pop_back();
    rewrite::replace_result(g, y->producer(), y, OpKind::MatMulInteger, ins, {});
    dead.insert(dead.end(), chain.begin(), chain.end());
    changed = true;
  }
  g.erase_nodes(dead);
  return changed;
}

}  // namespace cuvil
