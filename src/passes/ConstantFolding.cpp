// constant-folding: a node whose inputs are all constants is evaluated once, with the reference kernels, and its
// outputs become constants (named as the outputs were, so graph outputs keep their names). Left alone:
//   - nodes with regions (If/Loop/Scan: their bodies may read outer values; the nodes inside the regions are
//     folded on their own);
//   - nodes whose outputs together would exceed ctx.max_fold_elements and their inputs' element count (folding
//     would bloat the weights, e.g. an Expand or ConstantOfShape of a large size; a DequantizeLinear of large
//     weights folds); data-dependent sizes (NonZero, Unique) are checked after evaluating;
//   - nodes whose evaluation fails (the same error is then raised when the graph runs, where it belongs).
// Shape and Size of a value whose shape is static fold too, without its data.
// The folded node is removed; inputs it leaves unused are left to dead-code-elimination.
#include <algorithm>

#include "ir/op_schema.h"
#include "ir/ops/tensor_helpers.h"
#include "ir/shape_inference.h"
#include "kernels/ref/ref_interpreter.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// The size limit for n's outputs: max_elements, or as many elements as its inputs hold when that is more (a node
// that does not grow its data, such as a DequantizeLinear of a QDQ model's large weights, always folds).
int64_t fold_limit(const Node& n, int64_t max_elements) {
  int64_t in = 0;
  for (Value* v : n.inputs())
    if (v && v->is_constant()) in += v->constant().numel();
  return std::max(max_elements, in);
}

bool foldable(const Node& n, int64_t max_elements) {
  if (!n.regions().empty()) return false;
  for (Value* v : n.inputs())
    if (v && !v->is_constant()) return false;
  max_elements = fold_limit(n, max_elements);
  int64_t total = 0;
  for (Value* v : n.outputs()) {
    if (!v->shape().is_static()) continue;  // data-dependent: checked after evaluation
    total += shape_numel(v->shape().static_dims());
    if (total > max_elements) return false;
  }
  return true;
}

// Evaluates n on its constant inputs with the reference kernels; nullopt when it fails or the result is too large.
std::optional<std::vector<Tensor>> evaluate(const Node& n, int64_t max_elements) {
  max_elements = fold_limit(n, max_elements);
  try {
    std::vector<const Tensor*> ins;
    for (const Value* v : n.inputs()) ins.push_back(v ? &v->constant() : nullptr);
    std::vector<Tensor> result = run_reference_node(n, ins);
    int64_t total = 0;
    for (const Tensor& t : result) {
      if (!t.defined()) return std::nullopt;
      total += t.numel();
    }
    if (total > max_elements) return std::nullopt;
    return result;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Shape / Size of an input with a static shape: the answer is in the type, whatever the data.
std::optional<std::vector<Tensor>> shape_query(const Node& n) {
  if (n.op() != OpKind::Shape && n.op() != OpKind::Size) return std::nullopt;
  const Value* x = n.input(0);
  if (!x || !x->shape().is_static()) return std::nullopt;
  std::vector<int64_t> dims = x->shape().static_dims();
  if (n.op() == OpKind::Size) return std::vector<Tensor>{Tensor::scalar<int64_t>(shape_numel(dims))};
  AttrReader a(n);
  tensor_ops::AxisRange r = tensor_ops::shape_axis_range(int64_t(dims.size()), a.i("start"), a.has("end"), a.has("end") ? a.i("end") : 0);
  std::vector<int64_t> part(dims.begin() + r.begin, dims.begin() + r.end);
  return std::vector<Tensor>{Tensor::from_vector<int64_t>(part, {int64_t(part.size())})};
}

bool fold(Graph& g, int64_t max_elements) {
  std::vector<Node*> dead;
  rewrite::Redirects redirects(g);  // (a chain of constant nodes folds in one walk)
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    redirects.apply(*n);
    auto result = shape_query(*n);
    if (!result && foldable(*n, max_elements)) result = evaluate(*n, max_elements);
    if (!result) continue;
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      Value* old = n->output(k);
      std::string name = rewrite::free_name(g, old);
      Value* c = g.add_constant(name, (*result)[k]);
      redirects.replace_all_uses(old, c);
    }
    dead.push_back(n);
  }
  redirects.finish();
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool ConstantFoldingPass::run(Graph& g, PassContext& ctx) {
  int64_t max_elements = ctx.max_fold_elements;
  return rewrite::for_each_graph_postorder(g, [&](Graph& sub) { return fold(sub, max_elements); });
}

}  // namespace cuvil
