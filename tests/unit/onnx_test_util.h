// Helpers shared by the unit tests that build ONNX models.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"

namespace cuvil::test {

// A model with the given IR version and default-domain opset, and an empty graph named "g".
inline onnx::ModelProto onnx_model(int ir_version, int opset) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// Names a graph input or output and gives it a tensor type: an ONNX element type and static dims.
inline void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

// Appends a node of op type `op` to g.
inline onnx::NodeProto* onnx_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                                  std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

// Gives n an INT attribute.
inline void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// Gives n a GRAPH attribute (an If's branch, a Loop's or Scan's body).
inline void graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& body) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
}

// Serializes the model and imports it (which infers shapes and verifies).
inline std::shared_ptr<Graph> import(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  return import_onnx_bytes(bytes.data(), bytes.size());
}

}  // namespace cuvil::test
