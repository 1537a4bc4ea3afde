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

}  // namespace cuvil
