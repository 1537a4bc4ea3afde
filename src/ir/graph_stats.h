// Summary numbers about a graph, for `cuvil inspect`: op histogram, parameters, and a FLOPs estimate.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"

namespace cuvil {

struct GraphStats {
  std::map<std::string, int64_t> op_counts;  // by op name, regions included
  int64_t nodes = 0;
  int64_t parameters = 0;       // elements in constants
  int64_t parameter_bytes = 0;  // bytes in constants
  // Multiply-adds count 2. Conv, ConvTranspose, MatMul and Gemm count exactly; every other op counts one per
  // output element (one per input element for reductions). Symbolic when shapes are. Loop and Scan bodies
  // count once (the trip count is data).
  Dim flops;
};

GraphStats graph_stats(const Graph& g);

// One node's FLOPs by the rules above (regions not included).
Dim node_flops(const Node& n);
// Whether node_flops counts n's arithmetic exactly (convolutions, matrix products): profiles report GFLOP/s for
// these and GB/s (bytes of inputs and outputs) for the rest.
bool flops_exact(const Node& n);

// How profiles and reports name a node's work: its op, or for a FusedKernel the ops it fuses,
// "Fused(Add+Softmax)".
std::string node_label(const Node& n);

}  // namespace cuvil
