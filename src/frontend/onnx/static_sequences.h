// ONNX sequence and optional values, resolved while the graph is built.
//
// Cuvil's IR holds tensors only. A sequence whose length is known at import (SequenceConstruct of named tensors,
// SplitToSequence with a static split, SequenceInsert/Erase/At with constant positions, a sequence graph input
// bound to a length) is kept by the importer as the list of its element tensors, and every sequence op becomes
// tensor ops on those elements: SequenceAt is the element itself, ConcatFromSequence a Concat, SequenceLength a
// constant, SequenceMap its body once per element, a Loop carrying a sequence its body once per iteration (when
// the trip count is a constant; with a run-time trip count, a sequence it only appends to becomes a scan output:
// a Stacked value, which ConcatFromSequence, SequenceAt and SequenceLength read). An optional value is either a
// tensor/sequence (present) or "none". What cannot be resolved this way (a length computed at run time, an If
// whose branches give different lengths) raises StaticSequenceError naming the op, the node and why.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace onnx {
class GraphProto;
class NodeProto;
}  // namespace onnx

namespace cuvil {

// A sequence or optional value that cannot be resolved when the graph is built. The conformance runner reports
// these as out of scope, not as failures.
class StaticSequenceError : public Error {
 public:
  using Error::Error;
};

// A non-tensor ONNX value: a sequence of known length, an empty optional, or a sequence of run-time length whose
// elements share one shape, held as one tensor with the elements stacked on axis 0 (what a Loop appending one
// tensor per iteration builds: its scan output).
struct StaticValue {
  enum class Kind { Sequence, None, Stacked };
  Kind kind = Kind::Sequence;
  std::vector<Value*> elems;  // Sequence: the element tensors, in order
  Value* stacked = nullptr;   // Stacked: [length, element dims...]
};

// Non-tensor values by ONNX name. ONNX names are unique across a model's graphs, and inlined bodies are renamed
// apart, so one map serves the main graph and its regions.
using StaticValues = std::unordered_map<std::string, StaticValue>;

// What a sequence op needs from the importer.
struct SequenceImportContext {
  const onnx::NodeProto& node;
  Graph& graph;
  Location loc;
  StaticValues& values;
  // Converts `body`'s nodes into `graph`: its inputs bound to `inputs` (names of tensors or static values; "" for
  // omitted), the names it defines renamed apart; returns the names its outputs have after renaming.
  std::function<std::vector<std::string>(const onnx::GraphProto& body, const std::vector<std::string>& inputs)>
      inline_body;
  // Converts a (rewritten) node into `graph` as the importer converts any node.
  std::function<void(const onnx::NodeProto& node)> convert_node;
};

// Converts `ctx.node` when it is a sequence or optional op or reads a static value (Identity of a sequence, a
// Loop carrying one); returns false for a plain tensor node, which the converter table handles.
bool convert_static_sequence_node(SequenceImportContext& ctx);

// An op's name is one of the sequence/optional family (the ops this file converts).
bool is_sequence_op(const std::string& op_type);

}  // namespace cuvil
