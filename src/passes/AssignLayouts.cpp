// assign-layouts: 2-D convolutions and pools run channels-last ([N, H, W, C]), the layout oneDNN's fast fp32
// kernels use; the rest of the graph keeps ONNX's [N, C, H, W]. The change is explicit in the IR:
//   1. every f32 FusedConv / MaxPool (one output) / AveragePool / GlobalAveragePool / GlobalMaxPool on 4-D data
//      becomes Transpose(to NHWC) -> op(channels_last = 1) -> Transpose(back to NCHW); so does a 1-D FusedConv
//      on 3-D data ([N, W, C]: on [N, C, W] oneDNN 2.6 runs it as im2col + gemm, 4-8x slower; Whisper's
//      front-end convolutions);
//   2. a Transpose whose input is another Transpose merges with it (and vanishes when the two cancel), so
//      back-to-back convolutions exchange NHWC tensors directly;
//   3. element-wise ops whose inputs are all transposed the same way (Relu, Add of two branches, the Mul of a
//      squeeze-excitation block by its per-channel scale, ...) run on the untransposed data, moving the Transpose
//      past them so that step 2 can cancel it.
// What remains are the reorders at the edges of channels-last regions; `cuvil inspect` counts them.
#include "ir/ops/layout.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool layout_capable(const Node& n) {
  bool op_ok = n.op() == OpKind::FusedConv || n.op() == OpKind::AveragePool || n.op() == OpKind::GlobalAveragePool ||
               n.op() == OpKind::GlobalMaxPool || (n.op() == OpKind::MaxPool && n.num_outputs() == 1);
  const Value* x = n.input(0);
  if (!op_ok || !x || x->dtype() != DType::f32 || !x->shape().rank_known() || n.attr("channels_last").i() != 0)
    return false;
  return x->shape().rank() == 4 || (x->shape().rank() == 3 && n.op() == OpKind::FusedConv);
}

// Element-wise ops that commute with a transpose of all their inputs (same shape in, same shape out).
bool commutes_with_transpose(const Node& n) {
  switch (n.op()) {
    case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Sigmoid: case OpKind::Tanh: case OpKind::HardSwish:
    case OpKind::HardSigmoid: case OpKind::Gelu: case OpKind::Elu: case OpKind::Neg: case OpKind::Abs:
    case OpKind::Exp: case OpKind::Erf: case OpKind::Sqrt: case OpKind::Identity:
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
      return n.num_outputs() == 1;
    default: return false;
  }
}

const std::vector<int64_t>* transpose_perm(const Value* v) {
  const Node* p = v ? v->producer() : nullptr;
  if (!p || p->op() != OpKind::Transpose || !p->has_attr("perm")) return nullptr;
  return &p->attrs().at("perm").ints();
}

Value* add_transpose(Graph& g, size_t pos, Value* x, const std::vector<int64_t>& perm, const Location& loc) {
  Node* t = g.insert_node(pos, OpKind::Transpose, {x}, {g.unique_name(x->name() + "_t")}, {{"perm", Attribute(perm)}},
                          loc);
  std::vector<Dim> dims;
  for (int64_t p : perm) dims.push_back(x->shape()[size_t(p)]);
  t->output(0)->set_type({x->dtype(), Shape(dims)});
  return t->output(0);
}

// Step 1.
bool convert_nodes(Graph& g) {
  std::vector<Node*> dead;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (!layout_capable(*n)) continue;
    std::vector<Value*> ins = n->inputs();
    size_t pos = i, rank = ins[0]->shape().rank();
    const std::vector<int64_t> to_last = layout::perm_to_channels_last(rank);
    ins[0] = add_transpose(g, pos++, ins[0], to_last, n->loc());
    if (n->op() == OpKind::FusedConv && ins.size() > 3 && ins[3]) ins[3] = add_transpose(g, pos++, ins[3], to_last, n->loc());
    AttrMap attrs = n->attrs();
    attrs["channels_last"] = Attribute(int64_t(1));
    Value* y = n->output(0);
    Node* cl = g.insert_node(pos + 1, n->op(), ins, {g.unique_name(y->name() + "_nhwc")}, attrs, n->loc());
    cl->output(0)->set_type({y->dtype(), Shape(layout::to_channels_last(y->shape().dims()))});
    std::string name = rewrite::free_name(g, y);
    Value* back = add_transpose(g, pos + 2, cl->output(0), layout::perm_to_channels_first(rank), n->loc());
    g.rename_value(back, name);
    g.replace_all_uses(y, back);
    dead.push_back(n);
    i = pos + 2;
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

// Steps 2 and 3, once over the graph; true when something changed.
bool merge_and_sink(Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (n->op() == OpKind::Transpose && n->has_attr("perm")) {
      const std::vector<int64_t>* inner = transpose_perm(n->input(0));
      if (!inner) continue;
      const std::vector<int64_t>& outer = n->attrs().at("perm").ints();
      std::vector<int64_t> composed;
      bool identity = true;
      for (size_t k = 0; k < outer.size(); ++k) {
        composed.push_back((*inner)[size_t(outer[k])]);
        identity = identity && composed.back() == int64_t(k);
      }
      Value* src = n->input(0)->producer()->input(0);
      if (identity) {
        changed |= rewrite::replace_value(g, n->output(0), src);
      } else {
        n->set_input(0, src);
        n->attrs()["perm"] = Attribute(composed);
        changed = true;
      }
      continue;
    }
    if (!commutes_with_transpose(*n)) continue;
    const std::vector<int64_t>* perm = nullptr;
    bool all = n->num_inputs() > 0;
    const Value* y0 = n->output(0);
    // Inputs of the output's dtype and rank: broadcasting is per axis, so it commutes with one permutation of
    // every input's axes (a squeeze-excitation block's Mul of [1, C, H, W] by [1, C, 1, 1]).
    for (Value* v : n->inputs()) {
      const std::vector<int64_t>* p = transpose_perm(v);
      all = all && p && (!perm || *p == *perm) && v->dtype() == y0->dtype() && v->shape().rank_known() &&
            y0->shape().rank_known() && v->shape().rank() == y0->shape().rank();
      perm = p ? p : perm;
    }
    if (!all || perm->size() != y0->shape().rank()) continue;
    // op(T(a), T(b)) -> T(op(a, b)): the op runs in the source layout, the transpose moves below it.
    std::vector<Value*> srcs;
    for (Value* v : n->inputs()) srcs.push_back(v->producer()->input(0));
    Value* y = n->output(0);
    Node* moved = g.insert_node(i + 1, n->op(), srcs, {g.unique_name(y->name() + "_src")}, n->attrs(), n->loc());
    std::vector<Dim> src_dims(perm->size());  // y = T(moved): y's dim k is moved's dim perm[k]
    for (size_t k = 0; k < perm->size(); ++k) src_dims[size_t((*perm)[k])] = y->shape()[k];
    moved->output(0)->set_type({y->dtype(), Shape(src_dims)});
    std::string name = rewrite::free_name(g, y);
    Value* back = add_transpose(g, i + 2, moved->output(0), *perm, n->loc());
    g.rename_value(back, name);
    g.replace_all_uses(y, back);
    changed = true;
    i += 2;
  }
  return changed;
}

bool assign(Graph& g) {
  if (!convert_nodes(g)) return false;
  // Each sweep sees the previous one's result through sole producers; erasing unread nodes (old transposes, ops
  // moved below a transpose) keeps them sole.
  while (merge_and_sink(g)) rewrite::erase_dead_nodes(g, nullptr);
  rewrite::erase_dead_nodes(g, nullptr);
  return true;
}

}  // namespace

bool AssignLayoutsPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, assign); }

}  // namespace cuvil
