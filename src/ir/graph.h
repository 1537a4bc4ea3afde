// The graph IR: SSA values, nodes in a topological order, and nested graphs (regions) for control flow.
//
// A Graph owns its Values and Nodes. A Value is produced by exactly one node, or is a graph input, or a constant
// (which holds its data). A node inside a region may use a Value of an enclosing graph directly (an outer-scope
// reference, like ONNX subgraphs and MLIR's implicit capture); the verifier checks that it dominates the use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace cuvil {

class Graph;
class Node;

// Where a node came from: an ONNX node name, or a Python file:line.
struct Location {
  std::string name;  // ONNX node name, or a description
  std::string file;  // source file, when known
  int line = 0;
  // The Python call chain that made the node, outermost first, one "file:line in function" per line ('\n'
  // between frames), the library's own frames (torch's) left out; its last frame is usually file:line. Empty
  // when unknown (ONNX models, passes' new nodes).
  std::string stack;
  bool empty() const { return name.empty() && file.empty(); }
  std::string str() const;  // "node 'conv1'" / "model.py:12" / "model.py:12 (conv1)"
  // The call chain on one line: "test.py:40 in test_it -> model.py:12 in forward"; str() when no chain is known.
  std::string chain() const;
  bool operator==(const Location& o) const {
    return name == o.name && file == o.file && line == o.line && stack == o.stack;
  }
};

class Value {
 public:
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  void set_type(TensorType t) { type_ = std::move(t); }
  Node* producer() const { return producer_; }  // null for graph inputs and constants
  int producer_output() const { return producer_output_; }
  Graph* graph() const { return graph_; }
  bool is_constant() const { return constant_.has_value(); }
  const Tensor& constant() const { return *constant_; }
  bool is_graph_input() const { return is_input_; }
  int64_t id() const { return id_; }  // dense index within its graph

 private:
  friend class Graph;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  Graph* graph_ = nullptr;
  std::optional<Tensor> constant_;
  bool is_input_ = false;
  int64_t id_ = 0;
};

class Node {
 public:
  OpKind op() const { return op_; }
  std::string_view op_name() const;
  // Inputs may contain nullptr for an omitted optional input.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  size_t num_inputs() const { return inputs_.size(); }
  void set_input(size_t i, Value* v) { inputs_.at(i) = v; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t i) const { return outputs_.at(i); }
  size_t num_outputs() const { return outputs_.size(); }
  const AttrMap& attrs() const { return attrs_; }
  AttrMap& attrs() { return attrs_; }
  bool has_attr(const std::string& n) const { return attrs_.count(n) != 0; }
  // The attribute `n`, or the op schema's default when absent. Throws a clear error when it has no default.
  const Attribute& attr(const std::string& n) const;
  const Location& loc() const { return loc_; }
  void set_loc(Location l) { loc_ = std::move(l); }
  Graph* graph() const { return graph_; }
  // The regions (graph-valued attributes) of this node, in attribute-name order.
  std::vector<Graph*> regions() const;
  // "Conv 'conv1'" / "Add at model.py:12": how error messages name a node.
  std::string describe() const;

 private:
  friend class Graph;
  OpKind op_{};
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  AttrMap attrs_;
  Location loc_;
  Graph* graph_ = nullptr;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  Graph* parent() const { return parent_; }
  void set_parent(Graph* p) { parent_ = p; }

  Value* add_input(const std::string& name, TensorType type);
  Value* add_constant(const std::string& name, Tensor data);
  // Appends a node; its outputs get the given names (types are set later by shape inference).
  Node* add_node(OpKind op, std::vector<Value*> inputs, const std::vector<std::string>& output_names,
                 AttrMap attrs = {}, Location loc = {});
  // Like add_node, but places the node at position `pos` of nodes() (the caller keeps the order topological).
  Node* insert_node(size_t pos, OpKind op, std::vector<Value*> inputs, const std::vector<std::string>& output_names,
                    AttrMap attrs = {}, Location loc = {});
  void add_output(Value* v) { outputs_.push_back(v); }
  void set_outputs(std::vector<Value*> v) { outputs_ = std::move(v); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& constants() const { return constants_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t num_values() const { return values_.size(); }
  // Position of `n` in nodes() (linear search); throws when n is not a node of this graph.
  size_t node_index(const Node* n) const;

  // ---- rewriting (used by passes)
  // Redirects every use of `from` to `to`: inputs of this graph's nodes, of nodes in their regions (outer-scope
  // references), and this graph's output list. `to` must dominate those uses.
  void replace_all_uses(Value* from, Value* to);
  // Gives `v` (a value of this graph) a new name, which must be unused here and in enclosing graphs.
  void rename_value(Value* v, const std::string& name);
  // Removes nodes (with their output values) and constants. Their values must have no remaining uses and must not
  // be graph outputs. Value ids are renumbered to stay dense (0..num_values()-1, in creation order), so an
  // Executor must be built after the rewriting is done.
  void erase_nodes(const std::vector<Node*>& nodes);
  void erase_constants(const std::vector<Value*>& constants);

  // A fresh value name not used in this graph or its enclosing graphs.
  std::string unique_name(const std::string& hint);
  // Finds a value by name here or in an enclosing graph.
  Value* lookup(const std::string& name) const;

  // Total parameter count and bytes of the constants, including those in regions.
  int64_t constant_elements() const;
  int64_t constant_bytes() const;

 private:
  Value* new_value(const std::string& name);
  Node* make_node(OpKind op, std::vector<Value*> inputs, const std::vector<std::string>& output_names,
                  AttrMap attrs, Location loc);
  void erase_values(const std::vector<Value*>& dead);
  std::string name_;
  Graph* parent_ = nullptr;
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, outputs_, constants_;
  std::unordered_map<std::string, Value*> by_name_;
  int64_t name_counter_ = 0;
};

}  // namespace cuvil
