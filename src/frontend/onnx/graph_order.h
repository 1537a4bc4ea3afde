// The order an ONNX graph's nodes are converted in. ONNX requires nodes in topological order, but real files break
// it (onnxconverter-common's float16 converter appends the Cast nodes it inserts after their users) and ONNX
// Runtime sorts them; so does Cuvil. A genuine cycle is still an error, naming the nodes on it.
#pragma once

#include <vector>

namespace onnx {
class GraphProto;
}

namespace cuvil {

// Indices into g.node() in an order where every node comes after the producers of its inputs and of the values
// its subgraphs read from this graph. A graph already in topological order keeps its order; otherwise nodes move
// only as far as their inputs require (among the nodes ready at a time, the one first in the file goes first).
// Inputs no node of `g` produces (graph inputs, initializers, outer-scope values, undefined names) impose no
// order: the importer reports undefined names itself. Throws cuvil::Error when two nodes produce one value or
// when nodes depend on each other in a cycle.
std::vector<int> onnx_node_order(const onnx::GraphProto& g);

}  // namespace cuvil
