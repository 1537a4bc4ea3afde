// common-subexpression-elimination: two nodes with the same op, the same inputs (the same values, in order) and
// equal attributes compute the same thing (every op in the table is deterministic), so the later one's outputs
// are replaced by the earlier one's. Nodes with regions never match (graph attributes are never equal). Equal
// constants (same dtype, shape and bytes) are merged the same way. Each graph and region is handled on its own:
// nothing is merged across a region boundary. The dead duplicates are removed here.
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

struct Key {
  OpKind op;
  std::vector<const Value*> inputs;
  size_t num_outputs;
  bool operator<(const Key& o) const {
    if (op != o.op) return op < o.op;
    if (num_outputs != o.num_outputs) return num_outputs < o.num_outputs;
    return inputs < o.inputs;
  }
};

// Replaces all of dup's outputs by orig's; false (and nothing changed) when a graph output cannot be moved.
bool merge_into(Graph& g, rewrite::Redirects& redirects, const std::vector<Value*>& dup,
                const std::vector<Value*>& orig) {
  for (size_t i = 0; i < dup.size(); ++i)
    if (rewrite::is_graph_output(g, dup[i]) &&
        (orig[i]->is_graph_input() || rewrite::is_graph_output(g, orig[i]) || orig[i]->graph() != &g))
      return false;
  for (size_t i = 0; i < dup.size(); ++i) redirects.replace_value(dup[i], orig[i]);
  return true;
}

bool eliminate(Graph& g) {
  bool changed = false;
  // Uses are redirected as the sweep reaches them (a node reading merged values then matches its twin), in one
  // walk however many merges.
  rewrite::Redirects redirects(g);
  // Constants first, so nodes reading equal constants become equal. Candidates share dtype, shape and a hash of
  // the bytes (thousands of distinct constants of one shape, as folding a long chain leaves, would otherwise
  // compare every pair).
  std::map<std::tuple<DType, std::vector<int64_t>, size_t>, std::vector<Value*>> by_type;
  std::vector<Value*> dead_constants;
  for (Value* c : std::vector<Value*>(g.constants())) {
    const Tensor& t = c->constant();
    size_t hash = std::hash<std::string_view>()(std::string_view(static_cast<const char*>(t.raw()), t.nbytes()));
    auto& same = by_type[{c->dtype(), t.shape(), hash}];
    Value* orig = nullptr;
    for (Value* o : same)
      if (o->constant().same_bytes(c->constant())) {
        orig = o;
        break;
      }
    if (orig && merge_into(g, redirects, {c}, {orig})) dead_constants.push_back(c);
    else if (!orig) same.push_back(c);
  }
  std::map<Key, std::vector<Node*>> seen;
  std::vector<Node*> dead;
  for (auto& up : g.nodes()) {
    Node* n = up.get();
    redirects.apply(*n);
    if (!n->regions().empty()) continue;
    Key k{n->op(), std::vector<const Value*>(n->inputs().begin(), n->inputs().end()), n->num_outputs()};
    auto& cands = seen[k];
    Node* orig = nullptr;
    for (Node* m : cands)
      if (rewrite::attrs_equal(m->attrs(), n->attrs())) {
        orig = m;
        break;
      }
    if (orig && merge_into(g, redirects, n->outputs(), orig->outputs())) dead.push_back(n);
    else if (!orig) cands.push_back(n);
  }
  redirects.finish();
  g.erase_nodes(dead);
  g.erase_constants(dead_constants);
  changed = !dead.empty() || !dead_constants.empty();
  return changed;
}

}  // namespace

bool CommonSubexpressionEliminationPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, eliminate);
}

}  // namespace cuvil
