// A run-time failure inside a model (an index out of range in Gather, a shape that does not broadcast, an integer
// division by zero the reference reports, ...), traced to its source: the IR node that failed, the kernel it ran
// on, the fused kernel it ran in (a FusedKernel's body run op by op), and where the node came from (the user's
// Python call chain, or the ONNX node's name). The executor makes it from the kernel's Error (executor.cpp);
// the Python layer raises cuvil.RunError with these fields as attributes, and the CLI prints its message.
#pragma once

#include <string>

#include "ir/graph.h"
#include "support/error.h"

namespace cuvil {

class RunError : public Error {
 public:
  RunError(std::string detail, std::string node, std::string kernel, std::string fused, std::string source)
      : Error(describe(detail, node, kernel, fused, source)),
        detail_(escape_for_message(detail)),
        node_(escape_for_message(node)),
        kernel_(escape_for_message(kernel)),
        fused_(escape_for_message(fused)),
        source_(escape_for_message(source)) {}

  // The failure of node `n` (running on `kernel`) with the kernel's message.
  static RunError at(const Node& n, const std::string& kernel, const std::string& detail) {
    return RunError(detail, node_label(n), kernel, "", source_of(n));
  }
  // This error, raised inside the body of FusedKernel node `fused` (running on `kernel`).
  RunError in_fused(const Node& fused, const std::string& kernel) const {
    return RunError(detail_, node_, kernel_, node_label(fused) + " on " + kernel, source_);
  }

  const std::string& detail() const { return detail_; }  // the kernel's own message
  const std::string& node() const { return node_; }      // "Gather -> %emb"
  const std::string& kernel() const { return kernel_; }  // "cpu:gather", "ref:Div"
  const std::string& fused() const { return fused_; }    // "FusedKernel -> %add_3 on jit:...", or empty
  const std::string& source() const { return source_; }  // "test.py:40 in test -> model.py:12 in forward"

  // "Gather -> %emb": the op and the value it produces, which `cuvil inspect` shows.
  static std::string node_label(const Node& n) {
    std::string s(n.op_name());
    if (n.num_outputs() > 0 && n.output(0)) s += " -> %" + n.output(0)->name();
    return s;
  }
  // The Python call chain, or "ONNX node 'name'", or "" when the node has no location.
  static std::string source_of(const Node& n) {
    const Location& l = n.loc();
    if (!l.stack.empty()) return l.chain();
    if (!l.file.empty()) return l.str();
    return l.name.empty() ? "" : "ONNX node '" + l.name + "'";
  }

 private:
  static std::string describe(const std::string& detail, const std::string& node, const std::string& kernel,
                              const std::string& fused, const std::string& source) {
    std::string s = detail + " [run-time error in node " + node;
    if (!kernel.empty()) s += ", kernel " + kernel;
    if (!fused.empty()) s += ", in fused kernel " + fused;
    if (!source.empty()) s += "; source: " + source;
    return s + "]";
  }

  std::string detail_, node_, kernel_, fused_, source_;
};

}  // namespace cuvil
