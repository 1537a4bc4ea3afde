// Whole-graph shape and type inference: runs each op's inference in order, through regions, and records every
// value's type. Small integer tensors (shapes being computed) are tracked as symbolic dims, so shape arithmetic
// (Shape -> Gather -> Concat -> Reshape) keeps symbolic shapes exact instead of giving up.
#pragma once

#include "ir/graph.h"

namespace cuvil {

// Infers the types of every node output in `g` (and its regions). Graph inputs and constants must already have
// types. Throws cuvil::Error naming the node on an inconsistency (e.g. mismatched broadcast dims).
void infer_shapes(Graph& g);

}  // namespace cuvil
