// What the Attention op's readers share (src/ir/ops/attention.cpp defines the op).
#pragma once

#include <vector>

#include "ir/op_schema.h"

namespace cuvil {

// The permutation attribute `name` (perm_q, perm_k, perm_v, perm_y) of an Attention node; the identity of
// `rank` when it is empty. Inference checks that it is a permutation.
std::vector<int64_t> attention_perm(const AttrReader& node, const char* name, size_t rank);

}  // namespace cuvil
