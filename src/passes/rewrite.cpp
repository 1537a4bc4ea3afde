#include "passes/rewrite.h"

#include <algorithm>
#include <cstring>

namespace cuvil::rewrite {

bool for_each_graph_postorder(Graph& g, const std::function<bool(Graph&)>& f) {
  bool changed = false;
  for (auto& n : g.nodes())
    for (Graph* r : n->regions()) changed |= for_each_graph_postorder(*r, f);
  changed |= f(g);
  return changed;
}

void add_uses_of_node(const Node& n, std::unordered_set<const Value*>& out) {
  for (Value* v : n.inputs())
    if (v) out.insert(v);
  for (Graph* r : n.regions()) {
    for (auto& m : r->nodes()) add_uses_of_node(*m, out);
    for (Value* v : r->outputs()) out.insert(v);
  }
}

std::unordered_set<const Value*> used_values(const Graph& g) {
  std::unordered_set<const Value*> used;
  for (auto& n : g.nodes()) add_uses_of_node(*n, used);
  for (Value* v : g.outputs()) used.insert(v);
  return used;
}

bool is_graph_output(const Graph& g, const Value* v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

std::string free_name(Graph& g, Value* v) {
  std::string name = v->name();
  g.rename_value(v, g.unique_name(name + "_dead"));
  return name;
}

bool replace_value(Graph& g, Value* old, Value* repl) {
  if (old == repl) return false;
  if (!is_graph_output(g, old)) {
    g.replace_all_uses(old, repl);
    return true;
  }
  if (repl->graph() != &g || repl->is_graph_input() || is_graph_output(g, repl)) return false;
  std::string name = free_name(g, old);
  g.replace_all_uses(old, repl);
  g.rename_value(repl, name);
  return true;
}

bool attr_equal(const Attribute& a, const Attribute& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case AttrKind::Int: return a.i() == b.i();
    case AttrKind::Float: {
      double x = a.f(), y = b.f();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    case AttrKind::String: return a.s() == b.s();
    case AttrKind::Ints: return a.ints() == b.ints();
    case AttrKind::Floats:
      return a.floats().size() == b.floats().size() &&
             std::memcmp(a.floats().data(), b.floats().data(), a.floats().size() * sizeof(double)) == 0;
    case AttrKind::Strings: return a.strings() == b.strings();
    case AttrKind::Tensor: return a.t().same_bytes(b.t());
    case AttrKind::Graph:
    case AttrKind::Graphs: return false;
  }
  return false;
}

bool attrs_equal(const AttrMap& a, const AttrMap& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first || !attr_equal(ia->second, ib->second)) return false;
  return true;
}

}  // namespace cuvil::rewrite
