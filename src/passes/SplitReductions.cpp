// split-reductions: a reduction over axes that stay scattered once the axes of static size 1 are set aside
// (ReduceSum over (0, 2) of [A, B, C]) becomes a chain of reductions over one block of adjacent axes each, last
// block first, which the generated kernels compute (a kernel reduces one block: a row or a column):
//   ReduceSum(x, (0, 2))  =  ReduceSum(ReduceSum(x, (2), keepdims), (0, 2))
// The last link names every axis again; those reduced before have size 1 by then, so it too reduces one block,
// and it applies the original keepdims. Each link combines what the one before left: sums of sums (SumSquare
// and L1 sum their partial results, LogSum takes the log at the end), means of equally sized means, extremes of
// extremes, products of products, L2 norms of L2 norms, LogSumExp of LogSumExps. Integer sums and products wrap
// alike in any order. 16-bit floats are summed in f32 and f32 products in f64 between the links, as the
// one-node kernels compute them, and cast back at the end.
// MeanVarianceNormalization over such axes (its default (0, 2, 3) at batch > 1) is first written out as the
// reference computes it, (x - mean) / (sqrt(mean((x - mean)^2)) + 1e-9), so that its two means split in turn.
// A split is kept only when every link generates (PassContext::fusion); otherwise the node stays one reduction.
#include <algorithm>
#include <optional>

#include "ir/op_schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// The blocks of adjacent axes among `axes`, axes of static size 1 left out.
std::vector<std::vector<int64_t>> sized_blocks(const std::vector<int64_t>& axes, const Shape& s) {
  std::vector<std::vector<int64_t>> blocks;
  for (int64_t a : axes) {
    if (s[size_t(a)] == Dim(1)) continue;
    if (blocks.empty() || blocks.back().back() != a - 1) blocks.emplace_back();
    blocks.back().push_back(a);
  }
  return blocks;
}

// The dtype the links pass between them: 16-bit floats as f32, f32 products as f64 (the one-node kernels'
// accumulators), else the input's.
DType link_dtype(OpKind op, DType t) {
  if (t == DType::f16 || t == DType::bf16) return DType::f32;
  if (op == OpKind::ReduceProd && t == DType::f32) return DType::f64;
  return t;
}

// The op of a link after the first: what combines the partial results.
OpKind later_link(OpKind op, bool last) {
  switch (op) {
    case OpKind::ReduceSumSquare: case OpKind::ReduceL1: return OpKind::ReduceSum;
    case OpKind::ReduceLogSum: return last ? OpKind::ReduceLogSum : OpKind::ReduceSum;
    default: return op;
  }
}

using rewrite::NodeInserter;

// The chain of reductions replacing reduction n (axes as FusionFacts::reduced_axes gives them, in `blocks`); its
// result.
Value* split_reduction(NodeInserter& in, const Node& n, const std::vector<int64_t>& axes,
                       const std::vector<std::vector<int64_t>>& blocks) {
  const Value* y = n.output(0);
  bool keepdims = AttrReader(n).i("keepdims") != 0;
  Value* v = in.cast(n.input(0), link_dtype(n.op(), n.input(0)->dtype()));
  OpKind op = n.op() == OpKind::ReduceLogSum ? OpKind::ReduceSum : n.op();
  for (size_t b = blocks.size() - 1; b > 0; --b) {
    v = in.reduce(op, v, blocks[b], true);
    op = later_link(n.op(), false);
  }
  v = in.reduce(later_link(n.op(), true), v, axes, keepdims);
  return in.cast(v, y->dtype());
}

// MeanVarianceNormalization as the reference computes it, in f32 for 16-bit floats.
Value* expand_mvn(NodeInserter& in, const Node& n, const std::vector<int64_t>& axes) {
  DType t = link_dtype(n.op(), n.input(0)->dtype());
  Value* x = in.cast(n.input(0), t);
  TensorType full{t, x->shape()};
  Value* mean = in.reduce(OpKind::ReduceMean, x, axes, true);
  Value* d = in.add(OpKind::Sub, {x, mean}, full);
  Value* var = in.reduce(OpKind::ReduceMean, in.add(OpKind::Mul, {d, d}, full), axes, true);
  Value* sd = in.add(OpKind::Sqrt, {var}, {t, var->shape()});
  Value* den = in.add(OpKind::Add, {sd, in.scalar("epsilon", 1e-9, t)}, {t, var->shape()});
  return in.cast(in.add(OpKind::Div, {d, den}, full), n.output(0)->dtype());
}

bool split(const FusionFacts& facts, Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    // (Reductions with axes: the Reduce ops, MeanVarianceNormalization.)
    if (!facts.reduced_axes(*n) || n->num_outputs() != 1 || !n->input(0)) continue;
    if (!n->input(0)->shape().rank_known() || !n->output(0)->shape().rank_known()) continue;
    if (facts.reduced_block(*n)) continue;  // one block: the generator takes it as it is
    auto axes = facts.reduced_axes(*n);
    if (!axes) continue;
    auto blocks = sized_blocks(*axes, n->input(0)->shape());
    if (blocks.size() < 2) continue;
    NodeInserter in(g, i, n->output(0)->name(), n->loc());
    bool mvn = n->op() == OpKind::MeanVarianceNormalization;
    Value* r = mvn ? expand_mvn(in, *n, *axes) : split_reduction(in, *n, *axes, blocks);
    // An expansion's means split in turn (they are visited next); a split's links must generate.
    bool generates = true;
    for (const Node* m : in.made)
      generates = generates && (mvn || !facts.reduced_axes(*m) || facts.can_generate(*m));
    if (!generates || r->type() != n->output(0)->type() || !rewrite::replace_value(g, n->output(0), r)) {
      in.undo();
      continue;
    }
    g.erase_nodes({n});
    changed = true;
    i -= 1;  // visit the inserted nodes, which now stand at i, i + 1, ... (from 0: wraps, then ++i gives 0)
  }
  return changed;
}

}  // namespace

bool SplitReductionsPass::run(Graph& g, PassContext& ctx) {
  return rewrite::for_each_graph_postorder(g, [&](Graph& sub) { return split(*ctx.fusion, sub); });
}

}  // namespace cuvil
