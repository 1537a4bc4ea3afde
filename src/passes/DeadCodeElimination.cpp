// dead-code-elimination: removes nodes none of whose outputs is used, and constants nobody uses, in the graph
// and in every region. No op in the table has side effects (random ops are out of scope), so a node is dead
// exactly when its outputs are unused; has_side_effects() is where such ops would be listed. Graph inputs are
// never removed (they are the graph's signature), and a node with some used outputs is kept whole.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool has_side_effects(const Node&) { return false; }

bool eliminate(Graph& g) {
  // Regions were already cleaned (post-order), so the values they use are final. One reverse sweep suffices:
  // nodes are in topological order, so every use of a node's outputs comes after it.
  std::unordered_set<const Value*> live;
  for (Value* v : g.outputs()) live.insert(v);
  std::vector<Node*> dead;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    Node& n = **it;
    bool used = has_side_effects(n);
    for (Value* v : n.outputs()) used |= live.count(v) != 0;
    if (used) rewrite::add_uses_of_node(n, live);
    else dead.push_back(&n);
  }
  std::vector<Value*> dead_constants;
  for (Value* c : g.constants())
    if (!live.count(c)) dead_constants.push_back(c);
  g.erase_nodes(dead);
  g.erase_constants(dead_constants);
  return !dead.empty() || !dead_constants.empty();
}

}  // namespace

bool DeadCodeEliminationPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, eliminate);
}

}  // namespace cuvil
