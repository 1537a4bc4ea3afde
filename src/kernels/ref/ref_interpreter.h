// The reference interpreter: a graph run node by node on the reference kernels alone, every output allocated
// fresh, no plan, no prepared state. Slow and plain on purpose: constant folding evaluates with it (a pass needs
// no runtime and no fast kernel), and it is what "the reference" means for a whole graph.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace cuvil {

// Runs `g` on `inputs` (in the graph's input order). Regions run through the same interpreter; values of
// enclosing graphs they read come from the enclosing frames. Throws cuvil::Error as the kernels do.
std::vector<Tensor> run_reference(const Graph& g, const std::vector<Tensor>& inputs);

// Runs node `n` alone on `inputs` (null for an absent optional input). A region of `n` may read only the node's
// own graph's constants besides its inputs.
std::vector<Tensor> run_reference_node(const Node& n, const std::vector<const Tensor*>& inputs);

}  // namespace cuvil
