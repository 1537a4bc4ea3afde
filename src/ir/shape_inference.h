// Whole-graph shape and type inference: runs each op's inference in order, through regions, and records every
// value's type. Small integer tensors (shapes being computed) are tracked as symbolic dims, so shape arithmetic
// (Shape -> Gather -> Concat -> Reshape) keeps symbolic shapes exact instead of giving up.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace cuvil {

// Infers the types of every node output in `g` (and its regions). Graph inputs and constants must already have
// types. Throws cuvil::Error naming the node on an inconsistency (e.g. mismatched broadcast dims).
void infer_shapes(Graph& g);

// Incremental inference for frontends that build a graph node by node and need each node's output types at
// once (to choose dtypes for the nodes that follow). Call add_constant for constants and infer_node for each node
// right after adding it; the result equals infer_shapes on the finished graph.
class IncrementalShapeInference {
 public:
  IncrementalShapeInference();
  ~IncrementalShapeInference();
  void add_constant(const Value* c);
  void infer_node(Node& n);
  // The value of a small integer or bool tensor as far as inference tracks it (one Dim per element, constant or
  // symbolic), or null when it does not.
  const std::vector<Dim>* dims_value(const Value* v) const;

  struct Impl;  // public so that infer_shapes can run one over a whole graph

 private:
  std::unique_ptr<Impl> impl_;
};

// The types of a self-contained region's values (by value id) when its inputs have `input_types`, without
// changing the region: a FusedKernel's body typed at run time, or at the shapes one call brings. The region may
// not capture values of enclosing graphs nor hold regions itself; inference errors name the body's node.
std::vector<TensorType> infer_region_types(const Graph& region, const std::vector<TensorType>& input_types);

}  // namespace cuvil
