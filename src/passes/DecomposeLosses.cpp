// decompose-losses: the classification losses become the nodes the generated kernels compute.
//
// A generated kernel reduces one block of dims per row. NegativeLogLikelihoodLoss with reduction 'none' is one:
// each element's loss is a pick from its row of classes (codegen lowers it). Its sum or mean over every element is
// a second reduction, written out here after the per-element loss:
//   sum:                    ReduceSum(loss)
//   mean:                   ReduceMean(loss)
//   mean, ignore_index:     ReduceSum(loss) / ReduceSum(Cast(target != ignore_index))
//   mean, weights:          ReduceSum(loss) / ReduceSum(weight[target], 0 where ignored)   (a Gather)
// which is the reference's sum(loss) / sum(weights of the counted targets) (0/0 = NaN when all are ignored).
// SoftmaxCrossEntropyLoss is LogSoftmax over the classes (its optional second output) and then that.
// 16-bit floats compute in f32 and round once at the end, as the reference computes in double: the loss per
// element is exact in f32 (a product of two 16-bit floats), and the sums accumulate in f32.
//
// The per-element loss checks its targets before it runs (the reference reports one that is not a class); a
// Gather of the weights reports an index out of its range itself.
#include "codegen/lower.h"
#include "ir/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

using rewrite::NodeInserter;

bool is_loss(const Node& n) {
  return n.op() == OpKind::NegativeLogLikelihoodLoss || n.op() == OpKind::SoftmaxCrossEntropyLoss;
}

// The loss of node n (NegativeLogLikelihoodLoss or SoftmaxCrossEntropyLoss) written out from `log_prob` (of the
// compute dtype `t`), in `t`; sets *per_element to its loss per element.
Value* loss_of(NodeInserter& in, const Node& n, Value* log_prob, DType t, Node** per_element) {
  AttrReader at(n);
  const std::string& red = at.s("reduction");
  Value* target = n.input(1);
  Value* weight = n.num_inputs() > 2 && n.input(2) ? in.cast(n.input(2), t) : nullptr;
  AttrMap attrs{{"reduction", Attribute(std::string("none"))}};
  if (at.has("ignore_index")) attrs["ignore_index"] = Attribute(at.i("ignore_index"));
  std::vector<Value*> ins{log_prob, target};
  if (weight) ins.push_back(weight);
  Value* loss = in.add(OpKind::NegativeLogLikelihoodLoss, ins, {t, target->shape()}, attrs);
  *per_element = loss->producer();
  if (red == "none") return loss;
  if (red == "mean" && !weight && !at.has("ignore_index")) return in.reduce(OpKind::ReduceMean, loss, {}, false);
  Value* sum = in.reduce(OpKind::ReduceSum, loss, {}, false);
  if (red == "sum") return sum;
  // The weight of each counted target: 1 (or its class's weight), 0 where ignored.
  TensorType bool_type{DType::boolean, target->shape()}, t_type{t, target->shape()};
  Value* ignored = nullptr;
  if (at.has("ignore_index")) {
    Tensor idx = target->dtype() == DType::i32 ? Tensor::scalar<int32_t>(int32_t(at.i("ignore_index")))
                                               : Tensor::scalar<int64_t>(at.i("ignore_index"));
    ignored = in.add(OpKind::Equal, {target, in.constant(in.base + "_ignore_index", std::move(idx))}, bool_type);
  }
  Value* counted;
  if (!weight) {
    counted = in.cast(in.add(OpKind::Not, {ignored}, bool_type), t);
  } else {
    Value* index = target;
    if (ignored) {  // the ignored index may be no class: gather class 0 there instead
      Tensor zero = target->dtype() == DType::i32 ? Tensor::scalar<int32_t>(0) : Tensor::scalar<int64_t>(0);
      index = in.add(OpKind::Where, {ignored, in.constant(in.base + "_class0", std::move(zero)), target},
                     target->type());
    }
    counted = in.add(OpKind::Gather, {weight, index}, t_type, {{"axis", Attribute(int64_t(0))}});
    if (ignored) counted = in.add(OpKind::Where, {ignored, in.scalar("zero", 0, t), counted}, t_type);
  }
  Value* total = in.reduce(OpKind::ReduceSum, counted, {}, false);
  return in.add(OpKind::Div, {sum, total}, sum->type());
}

bool decompose(Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    if (!is_loss(*n) || !n->input(0) || !n->input(0)->shape().rank_known()) continue;
    bool softmax = n->op() == OpKind::SoftmaxCrossEntropyLoss;
    if (!softmax && AttrReader(*n).s("reduction") == "none") continue;  // generated as it is
    DType out = n->output(0)->dtype();
    DType t = out == DType::f16 || out == DType::bf16 ? DType::f32 : out;
    NodeInserter in(g, i, n->output(0)->name(), n->loc());
    Value* x = in.cast(n->input(0), t);
    Value* log_prob = x;
    if (softmax) log_prob = in.add(OpKind::LogSoftmax, {x}, {t, x->shape()}, {{"axis", Attribute(int64_t(1))}});
    Node* per_element = nullptr;
    Value* loss = in.cast(loss_of(in, *n, log_prob, t, &per_element), out);
    Value* log_prob_out = softmax && n->num_outputs() > 1 ? in.cast(log_prob, out) : nullptr;
    // Kept only when the per-element loss generates (and so checks its targets). (The replacements are new
    // nodes' outputs, which can always take a graph output's name.)
    bool ok = codegen::can_generate(*per_element) && loss->type() == n->output(0)->type() &&
              (!log_prob_out || log_prob_out->type() == n->output(1)->type());
    if (!ok) {
      in.undo();
      continue;
    }
    bool replaced = rewrite::replace_value(g, n->output(0), loss) &&
                    (!log_prob_out || rewrite::replace_value(g, n->output(1), log_prob_out));
    CUVIL_CHECK(replaced, n->describe(), ": internal error: decompose-losses could not replace its outputs");
    g.erase_nodes({n});
    changed = true;
    i += in.made.size() - 1;  // past the inserted nodes (none is a loss to decompose again)
  }
  return changed;
}

}  // namespace

bool DecomposeLossesPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, decompose); }

}  // namespace cuvil
