// dead-code-elimination: removes nodes none of whose outputs is used, and constants nobody uses, in the graph
// and in every region. A node is dead when its outputs are unused and it has no side effects: a run-time check
// (Assert), and a node whose regions hold one, stays (rewrite::erase_dead_nodes). Graph inputs are never removed
// (they are the graph's signature), and a node with some used outputs is kept whole.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

bool eliminate(Graph& g) {
  // Regions were already cleaned (post-order), so the values they use are final.
  bool changed = false;
  std::unordered_set<const Value*> live = rewrite::erase_dead_nodes(g, &changed);
  std::vector<Value*> dead_constants;
  for (Value* c : g.constants())
    if (!live.count(c)) dead_constants.push_back(c);
  g.erase_constants(dead_constants);
  return changed || !dead_constants.empty();
}

}  // namespace

bool DeadCodeEliminationPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, eliminate);
}

}  // namespace cuvil
