// Sequence and optional graph inputs and outputs bound at import (static_sequences.h, OnnxImportOptions):
// the Graph's flattened inputs and outputs, the layout that maps them back, and the errors.
#include <onnx/onnx_pb.h>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/static_sequences.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

// A value info of type seq(float[2]), or optional of it (optional_of_seq) or optional(float[2]) (optional_tensor).
void set_seq_type(onnx::ValueInfoProto* v, const std::string& name, bool optional = false, bool of_seq = true) {
  v->set_name(name);
  onnx::TypeProto* t = v->mutable_type();
  if (optional) t = t->mutable_optional_type()->mutable_elem_type();
  if (of_seq) t = t->mutable_sequence_type()->mutable_elem_type();
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
}

// (s: seq(float[2]), o: optional(float[2]), q: optional(float[2]), x: float[2]) ->
//   (y = ConcatFromSequence(s, axis 0), t = SequenceInsert(s, x, 0), has = OptionalHasElement(o),
//    z = OptionalGetElement(q))
onnx::ModelProto bound_model() {
  onnx::ModelProto m = onnx_model(8, 18);
  auto* g = m.mutable_graph();
  set_seq_type(g->add_input(), "s");
  set_seq_type(g->add_input(), "o", /*optional=*/true, /*of_seq=*/false);
  set_seq_type(g->add_input(), "q", /*optional=*/true, /*of_seq=*/false);
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  int_attr(onnx_node(g, "ConcatFromSequence", {"s"}, {"y"}), "axis", 0);
  auto* zero = g->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(onnx::TensorProto::INT64);
  zero->add_int64_data(0);
  onnx_node(g, "SequenceInsert", {"s", "x", "zero"}, {"t"});
  onnx_node(g, "OptionalHasElement", {"o"}, {"has"});
  onnx_node(g, "OptionalGetElement", {"q"}, {"z"});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {6});
  set_seq_type(g->add_output(), "t");
  set_type(g->add_output(), "has", onnx::TensorProto::BOOL, {});
  set_type(g->add_output(), "z", onnx::TensorProto::FLOAT, {2});
  return m;
}

std::shared_ptr<Graph> import_with(const onnx::ModelProto& m, const OnnxImportOptions& opts) {
  std::string bytes = m.SerializeAsString();
  return import_onnx_bytes(bytes.data(), bytes.size(), "", opts);
}

}  // namespace

TEST(OnnxSequences, GraphInputsAndOutputsAreBoundAndFlattened) {
  OnnxIoLayout layout;
  OnnxImportOptions opts;
  opts.sequence_lengths["s"] = 3;
  opts.absent_optionals.insert("o");
  opts.layout = &layout;
  auto g = import_with(bound_model(), opts);

  using K = OnnxIoSlot::Kind;
  ASSERT_EQ(layout.inputs.size(), 4u);
  EXPECT_EQ(layout.inputs[0].kind, K::Sequence);
  EXPECT_EQ(layout.inputs[0].count, 3u);
  EXPECT_EQ(layout.inputs[1].kind, K::None);
  EXPECT_EQ(layout.inputs[1].count, 0u);
  EXPECT_EQ(layout.inputs[2].kind, K::Tensor);
  EXPECT_EQ(layout.inputs[3].kind, K::Tensor);
  ASSERT_EQ(layout.outputs.size(), 4u);
  EXPECT_EQ(layout.outputs[1].kind, K::Sequence);
  EXPECT_EQ(layout.outputs[1].count, 4u);

  // Graph inputs: s_0, s_1, s_2, q, x; outputs: y, t's 4 elements, has, z.
  ASSERT_EQ(g->inputs().size(), 5u);
  EXPECT_EQ(g->inputs()[0]->name(), "s_0");
  EXPECT_EQ(g->inputs()[3]->name(), "q");
  ASSERT_EQ(g->outputs().size(), 7u);

  std::vector<Tensor> in;
  for (int i = 0; i < 5; ++i) in.push_back(Tensor::from_vector<float>({float(2 * i), float(2 * i + 1)}, {2}));
  auto out = Executor(g).run(in);
  ASSERT_EQ(out.size(), 7u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].get_f64(i), double(i));  // s concatenated
  EXPECT_EQ(out[1].get_f64(0), 8.0);                                    // x inserted at the front
  EXPECT_EQ(out[2].get_f64(1), 1.0);
  EXPECT_EQ(out[4].get_f64(0), 4.0);
  EXPECT_EQ(out[5].get_i64(0), 0);  // o bound as absent
  EXPECT_EQ(out[6].get_f64(1), 7.0);  // q's element
}

TEST(OnnxSequences, UnboundOrUnresolvableSequencesRaiseStaticSequenceError) {
  // No length for the sequence input.
  EXPECT_THROW(import_with(bound_model(), {}), StaticSequenceError);
  try {
    import_with(bound_model(), {});
  } catch (const StaticSequenceError& e) {
    EXPECT_NE(std::string(e.what()).find("graph input 's' is a sequence"), std::string::npos) << e.what();
  }
  // An empty optional's element is the model's error, not an unresolvable value.
  onnx::ModelProto m = bound_model();
  OnnxImportOptions opts;
  opts.sequence_lengths["s"] = 1;
  opts.absent_optionals = {"o", "q"};
  try {
    import_with(m, opts);
    FAIL() << "expected an error";
  } catch (const StaticSequenceError& e) {
    FAIL() << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("OptionalGetElement"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
  }
}
