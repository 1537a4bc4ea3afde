// decompose-ops: ops that the generated kernels compute as a graph of simpler ops are written out as that graph.
//
// The classification losses. A generated kernel reduces one block of dims per row. NegativeLogLikelihoodLoss
// with reduction 'none' is one: each element's loss is a pick from its row of classes (codegen lowers it). Its
// sum or mean over every element is a second reduction, written out here after the per-element loss:
//   sum:                    ReduceSum(loss)
//   mean:                   ReduceMean(loss)
//   mean, ignore_index:     ReduceSum(loss) / ReduceSum(Cast(target != ignore_index))
//   mean, weights:          ReduceSum(loss) / ReduceSum(weight[target], 0 where ignored)   (a Gather)
// which is the reference's sum(loss) / sum(weights of the counted targets) (0/0 = NaN when all are ignored).
// SoftmaxCrossEntropyLoss is LogSoftmax over the classes (its optional second output) and then that. The
// per-element loss checks its targets before it runs (the reference reports one that is not a class); a Gather of
// the weights reports an index out of its range itself. Kept only where the per-element loss generates.
//
// BatchNormalization in training mode (batch statistics): the mean and population variance over every dim but
// the channels, Y = (X - mean) / sqrt(var + epsilon) * scale + B, and the running statistics
// input_mean * momentum + mean * (1 - momentum) (the same for the variance), as the reference computes them.
// split-reductions then splits the means over (0, 2, 3, ...) into chains that generate.
//
// (DynamicQuantizeLinear is no longer written out: its range reductions fused with the element-wise ops before
// them, whose broadcast operands kept the group from generating, so it ran op by op on the reference; a CPU
// kernel, kernels/cpu/dynamic_quantize.cpp, runs it in two passes.)
//
// 16-bit floats compute in f32 and round once at the end, as the reference computes in double (a loss per
// element is exact in f32: a product of two 16-bit floats).
#include <optional>

#include "ir/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

using rewrite::NodeInserter;

// The dtype the written-out graph computes in: f32 for 16-bit floats (rounded once at the end), else t.
DType compute_dtype(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

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

// SoftmaxCrossEntropyLoss, or NegativeLogLikelihoodLoss with a sum or mean, written out: its outputs'
// replacements, or nothing when it stays as it is.
std::optional<std::vector<Value*>> expand_loss(const FusionFacts& facts, NodeInserter& in, const Node& n) {
  bool softmax = n.op() == OpKind::SoftmaxCrossEntropyLoss;
  if (!softmax && AttrReader(n).s("reduction") == "none") return std::nullopt;  // generated as it is
  DType out = n.output(0)->dtype();
  DType t = compute_dtype(out);
  Value* x = in.cast(n.input(0), t);
  Value* log_prob = x;
  if (softmax) log_prob = in.add(OpKind::LogSoftmax, {x}, {t, x->shape()}, {{"axis", Attribute(int64_t(1))}});
  Node* per_element = nullptr;
  std::vector<Value*> r{in.cast(loss_of(in, n, log_prob, t, &per_element), out)};
  if (softmax && n.num_outputs() > 1) r.push_back(in.cast(log_prob, out));
  // The per-element loss must generate: its kernel checks the targets.
  if (!facts.can_generate(*per_element)) return std::nullopt;
  return r;
}

// A [C] parameter in dtype t, shaped [C, 1, ...] to broadcast along dim 1 of a rank-`rank` tensor.
Value* per_channel(NodeInserter& in, Value* p, DType t, size_t rank) {
  p = in.cast(p, t);
  if (rank <= 2) return p;
  std::vector<int64_t> axes;
  std::vector<Dim> dims{p->shape()[0]};
  for (size_t d = 1; d + 1 < rank; ++d) {
    axes.push_back(int64_t(d));
    dims.push_back(Dim(1));
  }
  return in.add(OpKind::Unsqueeze, {p, in.axes(axes)}, {t, Shape(std::move(dims))});
}

// BatchNormalization with training_mode=1 written out: its outputs' replacements.
std::optional<std::vector<Value*>> expand_batch_norm_training(NodeInserter& in, const Node& n) {
  AttrReader at(n);
  if (at.i("training_mode") == 0) return std::nullopt;
  size_t rank = n.input(0)->shape().rank();
  if (rank < 2) return std::nullopt;
  DType out = n.output(0)->dtype();
  DType t = compute_dtype(out);
  Value* x = in.cast(n.input(0), t);
  TensorType full{t, x->shape()};
  std::vector<int64_t> axes{0};
  for (size_t d = 2; d < rank; ++d) axes.push_back(int64_t(d));
  Value* mean = in.reduce(OpKind::ReduceMean, x, axes, true);
  TensorType stat{t, mean->shape()};
  Value* d = in.add(OpKind::Sub, {x, mean}, full);
  Value* var = in.reduce(OpKind::ReduceMean, in.add(OpKind::Mul, {d, d}, full), axes, true);
  Value* var_eps = in.add(OpKind::Add, {var, in.scalar("epsilon", at.f("epsilon"), t)}, stat);
  Value* inv = in.add(OpKind::Div, {in.scalar("one", 1, t), in.add(OpKind::Sqrt, {var_eps}, stat)}, stat);
  Value* y = in.add(OpKind::Mul, {d, inv}, full);
  y = in.add(OpKind::Mul, {y, per_channel(in, n.input(1), t, rank)}, full);
  y = in.add(OpKind::Add, {y, per_channel(in, n.input(2), t, rank)}, full);
  std::vector<Value*> r{in.cast(y, out)};
  // The running statistics: [C] blends of the inputs' and the batch's.
  double momentum = at.f("momentum");
  for (size_t o = 1; o < n.num_outputs(); ++o) {
    Value* prior = n.input(2 + o);  // input_mean, input_var
    TensorType ct{t, prior->shape()};
    Value* flat = in.constant(in.base + "_shape", Tensor::from_vector<int64_t>({-1}, {1}));
    Value* batch = in.add(OpKind::Reshape, {o == 1 ? mean : var, flat}, ct);
    Value* kept = in.add(OpKind::Mul, {in.cast(prior, t), in.scalar("momentum", momentum, t)}, ct);
    Value* added = in.add(OpKind::Mul, {batch, in.scalar("rest", 1 - momentum, t)}, ct);
    Value* blend = in.add(OpKind::Add, {kept, added}, ct);
    r.push_back(in.cast(blend, n.output(o)->dtype()));
  }
  return r;
}

bool decompose(const FusionFacts& facts, Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    bool loss = n->op() == OpKind::NegativeLogLikelihoodLoss || n->op() == OpKind::SoftmaxCrossEntropyLoss;
    bool bn = n->op() == OpKind::BatchNormalization;
    if (!(loss || bn) || !n->input(0) || !n->input(0)->shape().rank_known()) continue;
    NodeInserter in(g, i, n->output(0)->name(), n->loc());
    std::optional<std::vector<Value*>> r;
    if (loss) r = expand_loss(facts, in, *n);
    else r = expand_batch_norm_training(in, *n);
    bool ok = r.has_value();
    for (size_t o = 0; ok && o < r->size(); ++o) ok = (*r)[o]->type() == n->output(o)->type();
    if (!ok) {
      in.undo();
      continue;
    }
    // (The replacements are new nodes' outputs, which can always take a graph output's name.)
    for (size_t o = 0; o < r->size(); ++o)
      CUVIL_ASSERT(rewrite::replace_value(g, n->output(o), (*r)[o]), n->describe(),
                   ": decompose-ops could not replace output ", o);
    g.erase_nodes({n});
    changed = true;
    i += in.made.size() - 1;  // past the inserted nodes (none is to be written out again)
  }
  return changed;
}

}  // namespace

bool DecomposeOpsPass::run(Graph& g, PassContext& ctx) {
  return rewrite::for_each_graph_postorder(g, [&](Graph& sub) { return decompose(*ctx.fusion, sub); });
}

}  // namespace cuvil
