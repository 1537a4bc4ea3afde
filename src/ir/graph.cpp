#include "ir/graph.h"

#include "ir/op_schema.h"

namespace cuvil {

std::string Location::str() const {
  std::string s;
  if (!file.empty()) s = file + ":" + std::to_string(line);
  if (!name.empty()) s += s.empty() ? "node '" + name + "'" : " ('" + name + "')";
  return s;
}

std::string Location::chain() const {
  if (stack.empty()) return str();
  std::string s;
  for (size_t at = 0; at <= stack.size();) {
    size_t end = std::min(stack.find('\n', at), stack.size());
    if (end > at) s += (s.empty() ? "" : " -> ") + stack.substr(at, end - at);
    at = end + 1;
  }
  return s;
}

std::string_view Node::op_name() const { return cuvil::op_name(op_); }

const Attribute& Node::attr(const std::string& n) const {
  auto it = attrs_.find(n);
  if (it != attrs_.end()) return it->second;
  const AttrSpec* spec = op_schema(op_).find_attr(n);
  CUVIL_ASSERT(spec, describe(), ": attribute '", n, "' is not in the op's schema");
  CUVIL_CHECK(!spec->required, describe(), ": required attribute '", n, "' is missing");
  return spec->default_value;
}

std::vector<Graph*> Node::regions() const {
  std::vector<Graph*> r;
  for (auto& [name, a] : attrs_) {
    if (a.kind() == AttrKind::Graph) r.push_back(a.g().get());
    if (a.kind() == AttrKind::Graphs)
      for (auto& g : a.graphs()) r.push_back(g.get());
  }
  return r;
}

std::string Node::describe() const {
  std::string s(op_name());
  if (!loc_.empty()) s += (loc_.file.empty() ? " " : " at ") + loc_.str();
  else if (!outputs_.empty() && outputs_[0]) s += " producing '" + outputs_[0]->name() + "'";
  return s;
}

Value* Graph::new_value(const std::string& name) {
  CUVIL_ASSERT(!name.empty(), "empty value name");
  CUVIL_CHECK(!by_name_.count(name), "duplicate value name '", name, "' in graph '", name_, "'");
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->graph_ = this;
  v->id_ = int64_t(values_.size());
  Value* p = v.get();
  values_.push_back(std::move(v));
  by_name_[name] = p;
  return p;
}

Value* Graph::add_input(const std::string& name, TensorType type) {
  Value* v = new_value(name);
  v->type_ = std::move(type);
  v->is_input_ = true;
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_constant(const std::string& name, Tensor data) {
  Value* v = new_value(name);
  v->type_ = TensorType{data.dtype(), Shape::of(data.shape())};
  v->constant_ = std::move(data);
  constants_.push_back(v);
  return v;
}

Node* Graph::add_node(OpKind op, std::vector<Value*> inputs, const std::vector<std::string>& output_names,
                      AttrMap attrs, Location loc) {
  Node* p = make_node(op, std::move(inputs), output_names, std::move(attrs), std::move(loc));
  nodes_.emplace_back(p);
  return p;
}

Node* Graph::insert_node(size_t pos, OpKind op, std::vector<Value*> inputs,
                         const std::vector<std::string>& output_names, AttrMap attrs, Location loc) {
  CUVIL_ASSERT(pos <= nodes_.size(), "insert_node position ", pos, " out of range");
  Node* p = make_node(op, std::move(inputs), output_names, std::move(attrs), std::move(loc));
  nodes_.insert(nodes_.begin() + std::ptrdiff_t(pos), std::unique_ptr<Node>(p));
  return p;
}

Node* Graph::make_node(OpKind op, std::vector<Value*> inputs, const std::vector<std::string>& output_names,
                       AttrMap attrs, Location loc) {
  auto n = std::make_unique<Node>();
  n->op_ = op;
  n->inputs_ = std::move(inputs);
  n->attrs_ = std::move(attrs);
  n->loc_ = std::move(loc);
  n->graph_ = this;
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* v = new_value(output_names[i]);
    v->producer_ = n.get();
    v->producer_output_ = int(i);
    n->outputs_.push_back(v);
  }
  for (Graph* g : n->regions()) g->set_parent(this);
  return n.release();
}

size_t Graph::node_index(const Node* n) const {
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].get() == n) return i;
  fail_internal("node ", n->describe(), " is not in graph '", name_, "'");
}

namespace {
void replace_uses_in(Graph& g, Value* from, Value* to) {
  for (auto& n : g.nodes()) {
    for (size_t i = 0; i < n->num_inputs(); ++i)
      if (n->input(i) == from) n->set_input(i, to);
    for (Graph* r : n->regions()) {
      replace_uses_in(*r, from, to);
      std::vector<Value*> outs = r->outputs();
      for (Value*& v : outs)
        if (v == from) v = to;
      r->set_outputs(std::move(outs));
    }
  }
}
}  // namespace

void Graph::replace_all_uses(Value* from, Value* to) {
  replace_uses_in(*this, from, to);
  for (Value*& v : outputs_)
    if (v == from) v = to;
}

void Graph::rename_value(Value* v, const std::string& name) {
  CUVIL_ASSERT(v->graph_ == this, "rename_value of a value of another graph");
  if (v->name_ == name) return;
  CUVIL_ASSERT(!lookup(name), "rename_value: name '", name, "' is taken");
  by_name_.erase(v->name_);
  v->name_ = name;
  by_name_[name] = v;
}

void Graph::erase_values(const std::vector<Value*>& dead) {
  if (dead.empty()) return;
  std::unordered_map<const Value*, bool> gone;
  for (Value* v : dead) {
    CUVIL_ASSERT(v->graph_ == this, "erasing a value of another graph");
    for (Value* o : outputs_) CUVIL_ASSERT(o != v, "erasing graph output '", v->name_, "'");
    gone[v] = true;
    by_name_.erase(v->name_);
  }
  std::vector<std::unique_ptr<Value>> kept;
  kept.reserve(values_.size());
  for (auto& v : values_)
    if (!gone.count(v.get())) {
      v->id_ = int64_t(kept.size());
      kept.push_back(std::move(v));
    }
  values_ = std::move(kept);
}

void Graph::erase_nodes(const std::vector<Node*>& nodes) {
  if (nodes.empty()) return;
  std::unordered_map<const Node*, bool> gone;
  std::vector<Value*> dead;
  for (Node* n : nodes) {
    CUVIL_ASSERT(n->graph_ == this, "erasing a node of another graph");
    gone[n] = true;
    for (Value* v : n->outputs_) dead.push_back(v);
  }
  std::vector<std::unique_ptr<Node>> kept;
  std::vector<std::unique_ptr<Node>> removed;  // destroyed after the values
  for (auto& n : nodes_) (gone.count(n.get()) ? removed : kept).push_back(std::move(n));
  nodes_ = std::move(kept);
  erase_values(dead);
}

void Graph::erase_constants(const std::vector<Value*>& constants) {
  if (constants.empty()) return;
  std::unordered_map<const Value*, bool> gone;
  for (Value* c : constants) {
    CUVIL_ASSERT(c->is_constant() && c->graph_ == this, "erase_constants of a non-constant");
    gone[c] = true;
  }
  std::vector<Value*> kept;
  for (Value* c : constants_)
    if (!gone.count(c)) kept.push_back(c);
  constants_ = std::move(kept);
  erase_values(constants);
}

std::string Graph::unique_name(const std::string& hint) {
  std::string base = hint.empty() ? "t" : hint;
  if (!lookup(base)) return base;
  for (;;) {
    std::string n = base + "_" + std::to_string(++name_counter_);
    if (!lookup(n)) return n;
  }
}

Value* Graph::lookup(const std::string& name) const {
  for (const Graph* g = this; g; g = g->parent_) {
    auto it = g->by_name_.find(name);
    if (it != g->by_name_.end()) return it->second;
  }
  return nullptr;
}

int64_t Graph::constant_elements() const {
  int64_t n = 0;
  for (Value* c : constants_) n += c->constant().numel();
  for (auto& node : nodes_)
    for (Graph* g : node->regions()) n += g->constant_elements();
  return n;
}

int64_t Graph::constant_bytes() const {
  int64_t n = 0;
  for (Value* c : constants_) n += int64_t(c->constant().nbytes());
  for (auto& node : nodes_)
    for (Graph* g : node->regions()) n += g->constant_bytes();
  return n;
}

}  // namespace cuvil
