// The verifier: structural and type invariants of a graph. Run after import, parsing and every pass (in debug
// builds). Messages name the node and its location.
//
// Checks: op arity and attributes against the op schema (names, kinds, required ones); SSA dominance (every use
// after its definition, region uses of enclosing values only of values defined before the region's node); region
// signatures and every output's recorded type against a fresh inference from its inputs' types.
#pragma once

#include "ir/graph.h"

namespace cuvil {

void verify(const Graph& g);

// Regions nest at most this deep (an If in a Loop in an If ...: each region is one level below its node's graph).
// verify and infer_shapes refuse deeper graphs with a clear error, so the walks over regions (which recurse once per
// level: the verifier, shape inference, the printer, the passes, the executor running a region inside a region)
// need a bounded stack. Real models nest a few levels; ONNX's protobuf parser stops near 30.
constexpr int kMaxRegionDepth = 64;

// Throws the nesting-limit error for node n when its regions sit at nesting level `depth` (1: n is a node of the
// top-level graph) and that exceeds kMaxRegionDepth. A FusedKernel's body (self-contained, without regions of its
// own) does not count: fusion may wrap ops of the deepest region allowed.
void check_region_depth(const Node& n, int depth);

}  // namespace cuvil
