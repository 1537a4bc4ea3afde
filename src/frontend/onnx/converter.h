// The ONNX converter table's interface. Each ONNX op maps to a function that emits Cuvil nodes; ops that match
// an op-table entry one to one (same name, same inputs and attributes) need no entry: the default converter
// handles them. Entries exist for version differences (attributes that became inputs, renamed or dropped
// attributes) and for ops that lower to others (Upsample -> Resize, Scatter -> ScatterElements).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace onnx {
class NodeProto;
}

namespace cuvil {

class ConvertContext {
 public:
  ConvertContext(const onnx::NodeProto& node, int opset, Graph& graph, std::vector<Value*> inputs, AttrMap attrs,
                 std::vector<std::string> output_names, Location loc)
      : node_(node), opset_(opset), graph_(graph), inputs_(std::move(inputs)), attrs_(std::move(attrs)),
        output_names_(std::move(output_names)), loc_(std::move(loc)) {}

  const onnx::NodeProto& proto() const { return node_; }
  const std::string& op_type() const;
  int opset() const { return opset_; }  // version of the default domain the model imports
  Graph& graph() { return graph_; }
  // Inputs in ONNX order; nullptr where an optional input is omitted (empty name or past the end).
  std::vector<Value*>& inputs() { return inputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  // Attributes converted generically (ONNX attribute types -> Attribute). Converters may edit, drop or add.
  AttrMap& attrs() { return attrs_; }
  bool has_attr(const std::string& n) const { return attrs_.count(n) != 0; }
  // Removes and returns an attribute (to move it into an input, say).
  std::optional<Attribute> take_attr(const std::string& n);
  const std::vector<std::string>& output_names() const { return output_names_; }
  const Location& loc() const { return loc_; }

  // A new int64 1-D constant (for attributes that later opsets pass as inputs).
  Value* const_i64(const std::vector<int64_t>& v, const std::string& hint);
  Value* const_tensor(Tensor t, const std::string& hint);
  // Emits a node with the ONNX node's outputs and location, using the current inputs() and attrs().
  Node* emit(OpKind op);
  // Emits an intermediate node with fresh output names (for multi-node lowerings).
  Node* emit_temp(OpKind op, std::vector<Value*> inputs, AttrMap attrs, size_t num_outputs = 1);
  // Emits the final node with the ONNX node's outputs.
  Node* emit_final(OpKind op, std::vector<Value*> inputs, AttrMap attrs);
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail("ONNX ", op_type(), " ", loc_.str(), " (opset ", opset_, "): ", args...);
  }

 private:
  const onnx::NodeProto& node_;
  int opset_;
  Graph& graph_;
  std::vector<Value*> inputs_;
  AttrMap attrs_;
  std::vector<std::string> output_names_;
  Location loc_;
};

using OnnxConverter = std::function<void(ConvertContext&)>;
using OnnxConverterTable = std::unordered_map<std::string, OnnxConverter>;

// Per-family registration; each lives in src/frontend/onnx/convert_<family>.cpp.
void register_onnx_elementwise(OnnxConverterTable& t);
void register_onnx_reduction(OnnxConverterTable& t);
void register_onnx_tensor(OnnxConverterTable& t);
void register_onnx_nn(OnnxConverterTable& t);
void register_onnx_recurrent(OnnxConverterTable& t);
void register_onnx_control(OnnxConverterTable& t);
void register_onnx_functions(OnnxConverterTable& t);  // ONNX function ops imported as their expansions
void register_onnx_contrib(OnnxConverterTable& t);    // domain com.microsoft, keyed "com.microsoft:Name"
void register_onnx_ml(OnnxConverterTable& t);         // domain ai.onnx.ml, keyed "ai.onnx.ml:Name"
void register_onnx_trees(OnnxConverterTable& t);      // ai.onnx.ml's tree ensembles (convert_trees.cpp)
void register_onnx_training(OnnxConverterTable& t);   // ai.onnx.preview.training's optimizer steps
void register_onnx_text(OnnxConverterTable& t);       // TfIdfVectorizer over string tokens (convert_text.cpp)

// Ops of the default domain with no entry here fall back to the op table by name; ops of other domains are keyed
// "domain:Name" and have no fallback.
const OnnxConverterTable& onnx_converters();

// Converts a TensorProto (raw_data, typed fields, or external data under base_dir) into a Tensor.
Tensor onnx_tensor_to_cuvil(const void* tensor_proto, const std::string& base_dir);

}  // namespace cuvil
