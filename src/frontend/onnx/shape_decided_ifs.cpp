#include "frontend/onnx/shape_decided_ifs.h"

#include <optional>

#include "ir/shape_inference.h"

namespace cuvil {
namespace {

// The If's condition as inference knows it: a constant, or a tracked value whose one element is a constant.
std::optional<bool> known_condition(const IncrementalShapeInference& inference, const Value* cond) {
  if (!cond) return std::nullopt;
  if (cond->is_constant()) {
    if (cond->constant().numel() != 1) return std::nullopt;
    return cond->constant().get_i64(0) != 0;
  }
  const std::vector<Dim>* v = inference.dims_value(cond);
  if (!v || v->size() != 1 || !(*v)[0].is_const()) return std::nullopt;
  return (*v)[0].value() != 0;
}

// Every value of `region` and of the regions within it.
void collect_values(const Graph& region, std::unordered_set<const Value*>* out) {
  for (const Value* v : region.inputs()) out->insert(v);
  for (const Value* v : region.constants()) out->insert(v);
  for (const auto& n : region.nodes()) {
    for (const Value* v : n->outputs()) out->insert(v);
    for (const Graph* r : n->regions()) collect_values(*r, out);
  }
}

// Copies `branch`'s constants and nodes into g before position `pos` (fresh names), then makes the If's outputs
// Identities of what the branch yields, under the If's own output names, and erases the If. Returns the number of
// nodes put in its place, or nullopt (g unchanged) when the branch holds regions of its own, whose references to
// the branch's values a copy would have to remap.
std::optional<size_t> inline_branch(Graph& g, size_t pos, Node* if_node, const Graph& branch,
                                    IncrementalShapeInference& inference, InlinedIfs* done) {
  for (const auto& n : branch.nodes())
    if (!n->regions().empty()) return std::nullopt;
  CUVIL_CHECK(branch.outputs().size() >= if_node->num_outputs(), if_node->describe(), ": has ",
              if_node->num_outputs(), " outputs but its taken branch yields ", branch.outputs().size());
  std::unordered_map<const Value*, Value*> copy;
  auto mapped = [&](Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = copy.find(v);
    return it == copy.end() ? v : it->second;  // not the branch's: an outer value, the same in g
  };
  for (Value* c : branch.constants()) {
    Value* k = g.add_constant(g.unique_name(c->name()), c->constant());
    k->set_type(c->type());
    inference.add_constant(k);
    copy[c] = k;
  }
  size_t at = pos;
  for (const auto& n : branch.nodes()) {
    std::vector<Value*> inputs;
    for (Value* v : n->inputs()) inputs.push_back(mapped(v));
    std::vector<std::string> names;
    for (Value* v : n->outputs()) names.push_back(g.unique_name(v->name()));
    Node* c = g.insert_node(at++, n->op(), std::move(inputs), names, n->attrs(), n->loc());
    for (size_t i = 0; i < n->num_outputs(); ++i) copy[n->output(i)] = c->output(i);
  }
  for (size_t i = 0; i < if_node->num_outputs(); ++i) {
    Value* old = if_node->output(i);
    std::string name = old->name();
    g.rename_value(old, g.unique_name(name + "_untaken_if"));
    Node* id = g.insert_node(at++, OpKind::Identity, {mapped(branch.outputs()[i])}, {name}, {}, if_node->loc());
    g.replace_all_uses(old, id->output(0));
    done->replaced[old] = id->output(0);
  }
  for (const Graph* r : if_node->regions()) collect_values(*r, &done->erased);
  g.erase_nodes({if_node});
  ++done->count;
  return at - pos;
}

}  // namespace

InlinedIfs inline_shape_decided_ifs(Graph& g) {
  InlinedIfs done;
  bool any = false;
  for (const auto& n : g.nodes()) {
    if (n->op() == OpKind::If && !(n->input(0) && n->input(0)->is_constant())) any = true;
  }
  if (!any) return done;  // (constant conditions were inlined while importing)
  IncrementalShapeInference inference;
  for (Value* c : g.constants()) inference.add_constant(c);
  for (size_t i = 0; i < g.nodes().size();) {
    Node* n = g.nodes()[i].get();
    if (n->op() == OpKind::If) {
      if (std::optional<bool> cond = known_condition(inference, n->input(0))) {
        const Attribute& branch = n->attr(*cond ? "then_branch" : "else_branch");
        if (inline_branch(g, i, n, *branch.g(), inference, &done)) continue;  // the copies now stand at i
      }
    }
    inference.infer_node(*n);
    ++i;
  }
  return done;
}

}  // namespace cuvil
