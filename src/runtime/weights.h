// Weights by name: which constants of a graph a caller may replace, and a copy of a graph with some replaced.
//
// A graph's weights are its top-level constants, named as the front end named them (ONNX initializers keep their
// names; a loaded artifact's constants are those of its optimized graph). Replacing them never touches the graph
// given: the result is a copy (the constants not replaced share their storage with the original), inferred and
// verified, ready for an Executor. Hot weight swap (versioned_model.h) builds each new version this way.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace cuvil {

struct WeightInfo {
  std::string name;
  TensorType type;
  bool required = false;  // strict updates must give it: floating-point constants (integers are shapes, indices)
};

// The graph's top-level constants in graph order.
std::vector<WeightInfo> list_weights(const Graph& g);

// A deep copy of `g` (regions included) whose constants share their storage with g's; shape-inferred and verified.
// Constants that view memory owned elsewhere (a loaded artifact's mapped weights) stay views: the caller keeps
// their owner alive (the artifact's graph) as long as the copy.
std::shared_ptr<Graph> clone_graph(const Graph& g);

// Every problem with `updates` against g's weights at once (unknown or repeated names, dtypes, shapes; with
// `strict`, the required weights missing), as one InputError; nothing when they fit.
void check_weights(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& updates, bool strict);

// check_weights, then a copy of g (clone_graph) with those constants replaced by the given tensors (used as they
// are: the caller hands over tensors nothing else writes).
std::shared_ptr<Graph> with_weights(const Graph& g, const std::vector<std::pair<std::string, Tensor>>& updates,
                                    bool strict);

}  // namespace cuvil
