#pragma once
// fuse-matmul's integer part (dequantized_matmul.cpp): MatMulInteger -> Cast -> Mul(scales) [-> Add(bias)] as one
// dequantizing MatMulInteger.
#include "ir/graph.h"

namespace cuvil {

// Fuses every such chain of g (not its subgraphs); returns whether it changed g.
bool fuse_dequantized_matmul(Graph& g);

}  // namespace cuvil
