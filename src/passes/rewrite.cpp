#include "passes/rewrite.h"

#include <algorithm>
#include <cstring>

#include "ir/op_schema.h"

namespace cuvil::rewrite {

bool for_each_graph_postorder(Graph& g, const std::function<bool(Graph&)>& f) {
  // The recursive walk's order (each node's regions in turn, depth first, then the graph), with an explicit stack:
  // nothing here grows the machine stack with the nesting.
  struct Frame {
    explicit Frame(Graph* g) : graph(g) {}
    Graph* graph;
    size_t node = 0;              // the next node whose regions to visit
    std::vector<Graph*> regions;  // regions of the node before it, still to visit from `region` on
    size_t region = 0;
  };
  bool changed = false;
  std::vector<Frame> stack;
  stack.emplace_back(&g);
  while (!stack.empty()) {
    Frame& top = stack.back();
    while (top.region == top.regions.size() && top.node < top.graph->nodes().size()) {
      const Node& n = *top.graph->nodes()[top.node++];
      top.regions.clear();
      top.region = 0;
      if (n.op() == OpKind::FusedKernel) continue;  // a generated kernel's body is not rewritten on its own
      top.regions = n.regions();
    }
    if (top.region < top.regions.size()) {
      Graph* r = top.regions[top.region++];
      stack.emplace_back(r);  // (invalidates `top`)
      continue;
    }
    Graph* done = top.graph;
    stack.pop_back();
    changed |= f(*done);
  }
  return changed;
}

void add_uses_of_node(const Node& n, std::unordered_set<const Value*>& out) {
  for (Value* v : n.inputs())
    if (v) out.insert(v);
  std::vector<const Graph*> pending;  // regions at any depth, without recursion
  for (Graph* r : n.regions()) pending.push_back(r);
  while (!pending.empty()) {
    const Graph* r = pending.back();
    pending.pop_back();
    for (auto& m : r->nodes()) {
      for (Value* v : m->inputs())
        if (v) out.insert(v);
      for (Graph* inner : m->regions()) pending.push_back(inner);
    }
    for (Value* v : r->outputs()) out.insert(v);
  }
}

std::unordered_set<const Value*> used_values(const Graph& g) {
  std::unordered_set<const Value*> used;
  for (auto& n : g.nodes()) add_uses_of_node(*n, used);
  for (Value* v : g.outputs()) used.insert(v);
  return used;
}

bool has_side_effects(const Node& n) {
  if (op_schema(n.op()).side_effects) return true;
  std::vector<const Graph*> pending;  // regions at any depth, without recursion
  for (Graph* r : n.regions()) pending.push_back(r);
  while (!pending.empty()) {
    const Graph* r = pending.back();
    pending.pop_back();
    for (auto& m : r->nodes()) {
      if (op_schema(m->op()).side_effects) return true;
      for (Graph* inner : m->regions()) pending.push_back(inner);
    }
  }
  return false;
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

bool Redirects::replace_value(Value* from, Value* to) {
  if (from == to) return false;
  if (is_graph_output(g_, from)) return rewrite::replace_value(g_, from, to);
  to_[from] = to;
  return true;
}

void Redirects::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  if (is_graph_output(g_, from)) g_.replace_all_uses(from, to);
  else to_[from] = to;
}

Value* Redirects::resolve(Value* v) const {
  for (auto it = v ? to_.find(v) : to_.end(); it != to_.end(); it = to_.find(v)) v = it->second;
  return v;
}

void Redirects::apply(Node& n) const {
  if (to_.empty()) return;
  for (size_t k = 0; k < n.num_inputs(); ++k)
    if (Value* v = n.input(k); v && to_.count(v)) n.set_input(k, resolve(v));
}

void Redirects::finish() const {
  if (to_.empty()) return;
  std::vector<Graph*> pending;
  for (auto& n : g_.nodes())
    for (Graph* r : n->regions()) pending.push_back(r);
  while (!pending.empty()) {
    Graph* r = pending.back();
    pending.pop_back();
    for (auto& m : r->nodes()) {
      apply(*m);
      for (Graph* inner : m->regions()) pending.push_back(inner);
    }
    std::vector<Value*> outs = r->outputs();
    bool changed = false;
    for (Value*& v : outs)
      if (Value* w = resolve(v); w != v) v = w, changed = true;
    if (changed) r->set_outputs(std::move(outs));
  }
}

UseMap::UseMap(const Graph& g) {
  for (auto& n : g.nodes()) {
    for (Value* v : n->inputs())
      if (v) users_[v].push_back(n.get());
    if (!n->regions().empty()) {
      std::unordered_set<const Value*> inner;
      for (Graph* r : n->regions()) {
        for (auto& m : r->nodes()) add_uses_of_node(*m, inner);
        for (Value* v : r->outputs()) inner.insert(v);
      }
      pinned_.insert(inner.begin(), inner.end());
    }
  }
  for (Value* v : g.outputs()) pinned_.insert(v);
}

Node* UseMap::sole_user(const Value* v) const {
  if (pinned_.count(v)) return nullptr;
  auto it = users_.find(v);
  if (it == users_.end() || it->second.size() != 1) return nullptr;  // a node reading v twice counts twice
  return it->second[0];
}

Node* replace_result(Graph& g, const Node* last, Value* result, OpKind op, std::vector<Value*> ins, AttrMap attrs) {
  size_t pos = node_index(g, last);
  std::string name = free_name(g, result);
  Node* n = g.insert_node(pos + 1, op, std::move(ins), {name}, std::move(attrs), last->loc());
  n->output(0)->set_type(result->type());
  g.replace_all_uses(result, n->output(0));
  return n;
}

const std::vector<Node*>& UseMap::users(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = users_.find(v);
  return it == users_.end() ? kNone : it->second;
}

std::unordered_set<const Value*> erase_dead_nodes(Graph& g, bool* changed) {
  std::unordered_set<const Value*> live;
  for (Value* v : g.outputs()) live.insert(v);
  std::vector<Node*> dead;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    Node& n = **it;
    bool used = has_side_effects(n);
    for (Value* v : n.outputs()) used |= live.count(v) != 0;
    if (used) add_uses_of_node(n, live);
    else dead.push_back(&n);
  }
  g.erase_nodes(dead);
  if (changed) *changed = !dead.empty();
  return live;
}

std::optional<double> scalar_constant(const Value* v) {
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  return v->constant().get_f64(0);
}

size_t node_index(const Graph& g, const Node* n) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].get() == n) return i;
  fail_internal("node not in graph");
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

Value* NodeInserter::add(OpKind op, std::vector<Value*> ins, TensorType type, AttrMap attrs) {
  std::string name = g.unique_name(base + "_" + std::string(op_name(op)));
  Node* n = g.insert_node(pos++, op, std::move(ins), {name}, std::move(attrs), loc);
  n->output(0)->set_type(std::move(type));
  made.push_back(n);
  return n->output(0);
}

Value* NodeInserter::cast(Value* v, DType to) {
  if (v->dtype() == to) return v;
  return add(OpKind::Cast, {v}, {to, v->shape()}, {{"to", Attribute(int64_t(dtype_onnx_id(to)))}});
}

Value* NodeInserter::constant(const std::string& hint, Tensor t) {
  constants.push_back(g.add_constant(g.unique_name(hint), std::move(t)));
  return constants.back();
}

Value* NodeInserter::axes(const std::vector<int64_t>& a) {
  return constant(base + "_axes", Tensor::from_vector<int64_t>(a, {int64_t(a.size())}));
}

Value* NodeInserter::scalar(const std::string& hint, double v, DType t) {
  return constant(base + "_" + hint, t == DType::f64 ? Tensor::scalar<double>(v) : Tensor::scalar<float>(float(v)));
}

Value* NodeInserter::reduce(OpKind op, Value* x, const std::vector<int64_t>& a, bool keepdims) {
  std::vector<Dim> dims;
  for (size_t d = 0; d < x->shape().rank(); ++d) {
    bool reduced = a.empty() || std::find(a.begin(), a.end(), int64_t(d)) != a.end();
    if (!reduced) dims.push_back(x->shape()[d]);
    else if (keepdims) dims.push_back(Dim(1));
  }
  std::vector<Value*> ins{x};
  if (!a.empty()) ins.push_back(axes(a));
  return add(op, std::move(ins), {x->dtype(), Shape(std::move(dims))}, {{"keepdims", Attribute(int64_t(keepdims))}});
}

void NodeInserter::undo() {
  g.erase_nodes(std::vector<Node*>(made.rbegin(), made.rend()));
  g.erase_constants(constants);
}

}  // namespace cuvil::rewrite
