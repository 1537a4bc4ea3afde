// Ifs whose condition the model's static shapes decide (`Size(Shape(x)) == 4` of an input of known rank, the
// expanded AffineGrid's 2-D / 3-D test, scripted models' `if x.dim() == 4`): the importer cannot see the value
// (it types nothing while building), so both branches were converted, and the branch not taken, written for other
// shapes, failed inference (a Split of 5 elements into 4, say). ONNX Runtime folds such Ifs. This step runs shape
// inference over the main graph node by node and, where an If's condition has a constant value there, replaces the
// If by a copy of its taken branch, before the untaken one is ever inferred.
#pragma once

#include <unordered_map>
#include <unordered_set>

#include "ir/graph.h"

namespace cuvil {

// What inlining changed, for whoever holds Value pointers into the graph (the importer's declared types): each
// inlined If's outputs now have an Identity of the taken branch's value in their place (same names), and every
// value of the Ifs' regions is gone.
struct InlinedIfs {
  int count = 0;
  std::unordered_map<const Value*, Value*> replaced;  // an If's output -> the value standing in for it
  std::unordered_set<const Value*> erased;            // the regions' values (pointers only: freed)
};

// Inlines the taken branch of every main-graph If whose condition shape inference finds constant (branches that
// hold regions themselves are left as they are); the graph is otherwise unchanged and still to be inferred.
// Errors are inference's own (the same the whole-graph inference would raise).
InlinedIfs inline_shape_decided_ifs(Graph& g);

}  // namespace cuvil
