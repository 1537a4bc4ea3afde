// TreeEnsemble's structural check (semantics in trees.cpp), shared by its shape inference and its kernels.
#pragma once

#include <string>

#include "ir/graph.h"

namespace cuvil {

// Why the TreeEnsemble node's attributes do not form a valid ensemble, or an empty string when they do.
std::string tree_ensemble_problem(const Node& node);

}  // namespace cuvil
