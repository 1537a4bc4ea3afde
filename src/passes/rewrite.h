// Small helpers shared by the passes.
#pragma once

#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace cuvil::rewrite {

// Calls f on every region of g's nodes (recursively, innermost first), then on g itself; ORs the results.
// FusedKernel bodies are skipped: they are one kernel, formed last.
bool for_each_graph_postorder(Graph& g, const std::function<bool(Graph&)>& f);

// Values used by g's nodes, by nodes inside their regions (any depth), by region outputs, and g's outputs.
std::unordered_set<const Value*> used_values(const Graph& g);
// Values used by n: its inputs and every value its regions use (any depth).
void add_uses_of_node(const Node& n, std::unordered_set<const Value*>& out);

bool is_graph_output(const Graph& g, const Value* v);

// Whether running n does more than compute its outputs: its op has side effects (Assert), or a node in its regions
// (any depth) has. Such a node stays though nothing reads its outputs, and does not move.
bool has_side_effects(const Node& n);

// Replaces every use of `old` (a value of g) by `repl`. A graph output keeps its name: `repl` is renamed to it
// when it is a value of g that is neither a graph input nor already an output; otherwise nothing changes and the
// result is false (the caller keeps `old`).
bool replace_value(Graph& g, Value* old, Value* repl);

// Replacements of values of one graph made during one forward sweep over its nodes, applied lazily: a node's
// inputs are redirected when the sweep reaches it (apply; its readers all come after it in topological order) and
// the uses inside regions at the end (finish). One walk of the graph per sweep, where a Graph::replace_all_uses per
// rewrite walks all of it each time (quadratic: a chain of 20,000 Identities took 4 s). Graph outputs are replaced
// at once (they are few, and keep their names).
class Redirects {
 public:
  explicit Redirects(Graph& g) : g_(g) {}
  // Like rewrite::replace_value: every use of `from` (a value of g) reads `to`; false (and nothing changed) when
  // `from` is a graph output that `to` cannot stand in for.
  bool replace_value(Value* from, Value* to);
  // Like Graph::replace_all_uses (a graph output is redirected as it is; its name is the caller's business).
  void replace_all_uses(Value* from, Value* to);
  // What v stands for now.
  Value* resolve(Value* v) const;
  // Redirects n's inputs: call on each node as the sweep reaches it, before looking at its inputs.
  void apply(Node& n) const;
  // Redirects the uses inside the regions of g's nodes, at any depth (captures and region outputs).
  void finish() const;

 private:
  Graph& g_;
  std::unordered_map<const Value*, Value*> to_;
};

// Renames v (a value of g) out of the way ("<name>_dead"), so a replacement can take its name; returns the name.
std::string free_name(Graph& g, Value* v);

// Who reads each value of one graph, computed once for a sweep of pattern matching.
class UseMap {
 public:
  explicit UseMap(const Graph& g);
  // The one node reading v directly, when nothing else reads it (no other node, region or graph output).
  Node* sole_user(const Value* v) const;
  // The nodes reading v directly, once per read (a node reading it twice appears twice).
  const std::vector<Node*>& users(const Value* v) const;
  // Whether v is a graph output or read inside a region.
  bool pinned(const Value* v) const { return pinned_.count(v) != 0; }

 private:
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_set<const Value*> pinned_;  // graph outputs and values read inside regions
};

// Makes a new node `op(ins)` with `attrs` right after `last` that takes over `result` (a value of g): its name,
// type and readers. The old producers are left for the caller to erase. Returns the new node.
Node* replace_result(Graph& g, const Node* last, Value* result, OpKind op, std::vector<Value*> ins, AttrMap attrs);

// The value of a constant with one element, as double (any numeric dtype); nullopt otherwise.
std::optional<double> scalar_constant(const Value* v);
// n's position in g.nodes().
size_t node_index(const Graph& g, const Node* n);

// Erases the nodes of g (not of its regions) none of whose outputs is read, in one reverse sweep (nodes are in
// topological order); returns the values still read, graph outputs included. Dead-code-elimination's core.
std::unordered_set<const Value*> erase_dead_nodes(Graph& g, bool* changed);

// Inserts nodes into g before position `pos`, one after the other, giving each output its type, and remembers
// them and the constants it adds, so that a rewrite not taken can be undone. Names start with `base` (the name of
// the value being replaced); nodes carry `loc`, the source location of the node they stand for.
struct NodeInserter {
  Graph& g;
  size_t pos;
  std::string base;
  Location loc;
  std::vector<Node*> made;
  std::vector<Value*> constants;

  NodeInserter(Graph& graph, size_t at, std::string name_base, Location location)
      : g(graph), pos(at), base(std::move(name_base)), loc(std::move(location)) {}
  // op(ins) with one output of `type`; returns that output.
  Value* add(OpKind op, std::vector<Value*> ins, TensorType type, AttrMap attrs = {});
  // v cast to `to` (v itself when it has that dtype).
  Value* cast(Value* v, DType to);
  Value* constant(const std::string& hint, Tensor t);
  // An i64 [n] constant of reduction axes.
  Value* axes(const std::vector<int64_t>& a);
  // A scalar constant of float dtype t (f64, else f32) named base_hint.
  Value* scalar(const std::string& hint, double v, DType t);
  // Reduction `op` of x over `a` (empty: every axis), with keepdims as given.
  Value* reduce(OpKind op, Value* x, const std::vector<int64_t>& a, bool keepdims);
  // Removes what was inserted.
  void undo();
};

// Structural equality of attributes. Graph-valued attributes are never equal; floats compare bitwise.
bool attr_equal(const Attribute& a, const Attribute& b);
bool attrs_equal(const AttrMap& a, const AttrMap& b);

}  // namespace cuvil::rewrite
