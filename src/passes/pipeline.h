// Optimization pipelines: plain functions listing passes in order (see pipeline.cpp, each with its reason).
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

namespace cuvil {

// Runs the pipeline of `level` on g: 0 = no passes; 1 (and higher, for now) = the graph cleanups. Returns whether
// anything changed. g must be shape-inferred; it stays inferred (and verified when ctx.verify_each).
bool optimize(Graph& g, int level, PassContext& ctx);
inline bool optimize(Graph& g, int level) {
  PassContext ctx;
  return optimize(g, level, ctx);
}

}  // namespace cuvil
