// Graph hygiene at import: node order, cycles, unused and repeated initializers, model-local functions, dims
// written as -1.
#include <onnx/onnx_pb.h>

#include "frontend/onnx/graph_order.h"
#include "frontend/onnx/onnx_importer.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? out[0] : name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void add_initializer(onnx::GraphProto* g, const std::string& name, std::vector<float> v) {
  auto* w = g->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t(v.size()));
  for (float f : v) w->add_float_data(f);
}

// y = Relu(Neg(x)) + 1, with the nodes written consumers first (as onnxconverter-common writes its Casts).
onnx::ModelProto reversed_chain() {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {4});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {4});
  add_initializer(g, "one", {1, 1, 1, 1});
  add_node(g, "Add", {"r", "one"}, {"y"});
  add_node(g, "Relu", {"n"}, {"r"});
  add_node(g, "Neg", {"x"}, {"n"});
  return m;
}

}  // namespace

TEST(OnnxHygiene, NodesOutOfOrderAreSorted) {
  onnx::ModelProto m = reversed_chain();
  EXPECT_EQ(onnx_node_order(m.graph()), (std::vector<int>{2, 1, 0}));
  auto g = import(m);
  ASSERT_EQ(g->nodes().size(), 3u);
  EXPECT_EQ(g->nodes()[0]->op(), OpKind::Neg);
  auto out = run_graph(g, {Tensor::from_vector<float>({-2, 3, -4, 5}, {4})});
  expect_values(out[0], {3, 1, 5, 1});
}

TEST(OnnxHygiene, SortedGraphsKeepTheirOrder) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* g = m.mutable_graph();
  // Two independent chains interleaved: a valid order that a sort by depth would change.
  add_node(g, "Neg", {"x"}, {"a1"});
  add_node(g, "Relu", {"x"}, {"b1"});
  add_node(g, "Neg", {"a1"}, {"a2"});
  add_node(g, "Relu", {"b1"}, {"b2"});
  EXPECT_EQ(onnx_node_order(*g), (std::vector<int>{0, 1, 2, 3}));
}

TEST(OnnxHygiene, SubgraphReadsOrderTheirOwner) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* g = m.mutable_graph();
  // An If whose branch reads 'late', produced by a node written after the If.
  auto* iff = add_node(g, "If", {"c"}, {"y"});
  auto* attr = iff->add_attribute();
  attr->set_name("then_branch");
  attr->set_type(onnx::AttributeProto::GRAPH);
  add_node(attr->mutable_g(), "Identity", {"late"}, {"t"});
  attr->mutable_g()->add_output()->set_name("t");
  add_node(g, "Neg", {"x"}, {"late"});
  EXPECT_EQ(onnx_node_order(*g), (std::vector<int>{1, 0}));
}

TEST(OnnxHygiene, CyclesAreRefusedNamingTheirNodes) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {4});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {4});
  add_node(g, "Neg", {"x"}, {"pre"}, "before");
  add_node(g, "Add", {"pre", "c"}, {"a"}, "add_a");
  add_node(g, "Relu", {"a"}, {"b"}, "relu_b");
  add_node(g, "Neg", {"b"}, {"c"}, "neg_c");
  add_node(g, "Identity", {"a"}, {"y"}, "out");
  try {
    import(m);
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("has a cycle"), std::string::npos) << msg;
    for (const char* name : {"add_a", "relu_b", "neg_c"}) EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_EQ(msg.find("'before'"), std::string::npos) << msg;
  }
  // A node that reads its own output is the smallest cycle.
  onnx::ModelProto self = onnx_model(8, 17);
  add_node(self.mutable_graph(), "Relu", {"s"}, {"s"}, "selfish");
  EXPECT_THROW(onnx_node_order(self.graph()), Error);
}

TEST(OnnxHygiene, ValuesProducedTwiceAreRefused) {
  onnx::ModelProto m = onnx_model(8, 17);
  add_node(m.mutable_graph(), "Neg", {"x"}, {"v"}, "first");
  add_node(m.mutable_graph(), "Relu", {"x"}, {"v"}, "second");
  try {
    onnx_node_order(m.graph());
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'v' is produced by two nodes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("second"), std::string::npos) << msg;
  }
}

TEST(OnnxHygiene, UnusedInitializersAreNotLoadedAndRepeatedOnesShareStorage) {
  onnx::ModelProto m = reversed_chain();
  auto* g = m.mutable_graph();
  add_initializer(g, "unused", std::vector<float>(1000, 2.f));
  std::vector<float> big(100);
  for (size_t i = 0; i < big.size(); ++i) big[i] = float(i);
  add_initializer(g, "w1", big);
  add_initializer(g, "w2", big);
  set_type(g->add_input(), "z", onnx::TensorProto::FLOAT, {100});
  add_node(g, "Add", {"z", "w1"}, {"z1"});
  add_node(g, "Mul", {"z1", "w2"}, {"z2"});
  set_type(g->add_output(), "z2", onnx::TensorProto::FLOAT, {100});
  auto graph = import(m);
  EXPECT_EQ(graph->lookup("unused"), nullptr);
  const Value* w1 = graph->lookup("w1");
  const Value* w2 = graph->lookup("w2");
  ASSERT_TRUE(w1 && w2 && w1->is_constant() && w2->is_constant());
  EXPECT_EQ(w1->constant().raw(), w2->constant().raw());
  Tensor z = Tensor::from_vector<float>(std::vector<float>(100, 1.f), {100});
  auto out = run_graph(graph, {Tensor::from_vector<float>({1, 1, 1, 1}, {4}), z});
  EXPECT_EQ(out[1].data<float>()[7], (1.f + 7.f) * 7.f);
}

TEST(OnnxHygiene, ModelLocalFunctionsAreInlined) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* domain = m.add_opset_import();
  domain->set_domain("local");
  domain->set_version(1);
  auto* f = m.add_functions();
  f->set_name("LeakyNeg");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  f->add_attribute("alpha");
  f->add_opset_import()->set_version(17);
  auto* neg = f->add_node();
  neg->set_op_type("Neg");
  neg->add_input("a");
  neg->add_output("t");
  auto* leaky = f->add_node();
  leaky->set_op_type("LeakyRelu");
  leaky->add_input("t");
  leaky->add_output("b");
  auto* ref = leaky->add_attribute();
  ref->set_name("alpha");
  ref->set_ref_attr_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2});
  // Two calls: their inner values ('t') must not collide.
  auto* c1 = add_node(g, "LeakyNeg", {"x"}, {"h"});
  c1->set_domain("local");
  auto* a1 = c1->add_attribute();
  a1->set_name("alpha");
  a1->set_type(onnx::AttributeProto::FLOAT);
  a1->set_f(0.5f);
  auto* c2 = add_node(g, "LeakyNeg", {"h"}, {"y"});
  c2->set_domain("local");
  *c2->add_attribute() = *a1;
  auto out = run_graph(import(m), {Tensor::from_vector<float>({2, -4}, {2})});
  // x=2: Neg -2, leaky -1; Neg 1, leaky 1. x=-4: 4, 4; -4, -2.
  expect_values(out[0], {1, -2});
}

TEST(OnnxHygiene, MinusOneDimsAreSymbols) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 3});
  add_node(g, "Relu", {"x"}, {"y"});
  auto graph = import(m);
  EXPECT_FALSE(graph->inputs()[0]->shape()[0].is_const());
  auto out = run_graph(graph, {Tensor::from_vector<float>({-1, 2, 3, 4, -5, 6}, {2, 3})});
  expect_values(out[0], {0, 2, 3, 4, 0, 6});
  g->mutable_input(0)->Clear();
  set_type(g->mutable_input(0), "x", onnx::TensorProto::FLOAT, {-2, 3});
  EXPECT_THROW(import(m), Error);
}
