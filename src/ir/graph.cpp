#include "ir/graph.h"

#include "ir/op_schema.h"

namespace cuvil {

std::string Location::str() const {
  std::string s;
  if (!file.empty()) s = file + ":" + std::to_string(line);
  if (!name.empty()) s += s.empty() ? "node '" + name + "'" : " ('" + name + "')";
  return s;
}

std::string_view Node::op_name() const { return cuvil::op_name(op_); }

const Attribute& Node::attr(const std::string& n) const {
  auto it = attrs_.find(n);
  if (it != attrs_.end()) return it->second;
  const AttrSpec* spec = op_schema(op_).find_attr(n);
  CUVIL_CHECK(spec, describe(), ": internal error: attribute '", n, "' is not in the op's schema");
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
  CUVIL_CHECK(!name.empty(), "internal error: empty value name");
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
  Node* p = n.get();
  nodes_.push_back(std::move(n));
  return p;
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
