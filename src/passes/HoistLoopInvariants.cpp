// hoist-loop-invariants: a node inside a Loop or Scan body whose inputs all come from outside the body (or are
// the body's constants, or outputs of nodes already hoisted) computes the same value in every iteration; it moves
// in front of the loop and runs once. Nodes with regions and Dropout (random in training mode) stay. The moved
// node's results reach the body as outer-scope values.
//
// Hoisting runs a node even when the loop runs zero times; the ops moved are pure, so only the time of a
// never-needed node can be lost (and an error the skipped loop would not have raised).
#include <unordered_set>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// The names of g's values and its regions' (any depth; an explicit stack, no recursion).
void collect_names(const Graph& top, std::unordered_set<std::string>& names) {
  std::vector<const Graph*> pending{&top};
  while (!pending.empty()) {
    const Graph& g = *pending.back();
    pending.pop_back();
    for (const Value* v : g.inputs()) names.insert(v->name());
    for (const Value* v : g.constants()) names.insert(v->name());
    for (auto& n : g.nodes()) {
      for (const Value* v : n->outputs()) names.insert(v->name());
      for (const Graph* r : n->regions()) pending.push_back(r);
    }
  }
}

// A name unused anywhere in the graph and its regions (the text format needs names unique across regions).
std::string fresh_name(std::unordered_set<std::string>& taken, const std::string& hint) {
  std::string name = hint;
  for (int k = 1; taken.count(name); ++k) name = hint + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

// (A check must not move: the loop may run zero times, and it would then fail where the source does not.)
bool hoistable(const Node& m) {
  return m.regions().empty() && m.op() != OpKind::Dropout && !rewrite::has_side_effects(m);
}

// Hoists the invariant nodes of `body` (a region of `loop`, which is a node of g) in front of `loop`.
bool hoist_from(Graph& g, Node* loop, Graph& body, std::unordered_set<std::string>& taken) {
  std::unordered_map<const Value*, Value*> outer;  // body value -> the outer value that replaces it
  std::vector<Node*> moved;
  size_t at = rewrite::node_index(g, loop);  // where the next hoisted node goes: right before the loop
  for (auto& node : body.nodes()) {
    Node* m = node.get();
    if (!hoistable(*m)) continue;
    bool invariant = true;
    for (Value* v : m->inputs())
      invariant = invariant && (!v || v->graph() != &body || v->is_constant() || outer.count(v));
    if (!invariant) continue;
    std::vector<Value*> ins;
    for (Value* v : m->inputs()) {
      if (!v || v->graph() != &body) {
        ins.push_back(v);
      } else if (outer.count(v)) {
        ins.push_back(outer[v]);
      } else {  // a body constant: the outer graph gets its own copy
        Value* c = g.add_constant(fresh_name(taken, v->name() + "_outer"), v->constant());
        outer[v] = c;
        ins.push_back(c);
      }
    }
    std::vector<std::string> names;
    for (Value* o : m->outputs()) names.push_back(fresh_name(taken, o->name() + "_inv"));
    Node* h = g.insert_node(at++, m->op(), ins, names, m->attrs(), m->loc());
    for (size_t k = 0; k < m->num_outputs(); ++k) {
      h->output(k)->set_type(m->output(k)->type());
      outer[m->output(k)] = h->output(k);
    }
    moved.push_back(m);
  }
  if (moved.empty()) return false;
  // The body's uses of moved results read the hoisted ones: one walk of the body for all of them.
  rewrite::Redirects redirects(body);
  for (Node* m : moved)
    for (Value* o : m->outputs()) redirects.replace_all_uses(o, outer[o]);
  for (auto& node : body.nodes()) redirects.apply(*node);
  redirects.finish();
  body.erase_nodes(moved);
  return true;
}

bool hoist(Graph& g) {
  std::unordered_set<std::string> taken;
  collect_names(g, taken);
  bool changed = false;
  // Nodes are inserted in front of each loop: collect the loops first.
  std::vector<Node*> loops;
  for (auto& n : g.nodes())
    if (n->op() == OpKind::Loop || n->op() == OpKind::Scan) loops.push_back(n.get());
  for (Node* loop : loops)
    for (Graph* body : loop->regions()) changed |= hoist_from(g, loop, *body, taken);
  return changed;
}

}  // namespace

// Inner loops first (post-order), so code hoisted out of an inner loop can leave the outer one too.
bool HoistLoopInvariantsPass::run(Graph& g, PassContext&) { return rewrite::for_each_graph_postorder(g, hoist); }

}  // namespace cuvil
