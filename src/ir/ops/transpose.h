// A Transpose's permutation, read one way by shape inference, the passes and the kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cuvil {

// The permutation of a Transpose whose input has rank r: `perm` with negative entries counted from the back
// (numpy's reading; ONNX leaves them unspecified), or the reversal of the dims when there is none. nullopt, with
// the reason in *why, when it is not a permutation of r dims.
std::optional<std::vector<int64_t>> transpose_perm(const std::vector<int64_t>* perm, int64_t r,
                                                   std::string* why = nullptr);
// The same from a Transpose node's attribute; nullopt also for an unknown rank (r < 0).
std::optional<std::vector<int64_t>> transpose_perm(const Node& n, int64_t r);

}  // namespace cuvil
