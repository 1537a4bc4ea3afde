// Which top-level values the regions of control-flow nodes read: the low-precision links (int8_links.h,
// bf16_links.h) never change such a value's dtype, since a region's body was typed for it as it is.
#pragma once

#include <map>

#include "ir/graph.h"

namespace cuvil {

// Marks blocked[v] = 1 for every value of `top` read anywhere inside `region` (nested regions too).
inline void note_region_uses(const Graph& region, const Graph& top, std::map<const Value*, int>& blocked) {
  for (const auto& n : region.nodes()) {
    for (const Value* v : n->inputs())
      if (v && v->graph() == &top) blocked[v] = 1;
    for (const Graph* r : n->regions()) note_region_uses(*r, top, blocked);
  }
}

}  // namespace cuvil
