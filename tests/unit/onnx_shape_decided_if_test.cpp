// Ifs whose condition the input shapes decide (frontend/onnx/shape_decided_ifs.h): the taken branch replaces the
// If before inference, the untaken one (invalid at these shapes) is never typed, and the types declared for the
// If's outputs and inside its branches stay checked or go with the branches (the importer held pointers to them:
// this test runs under ASan in CI).
#include <onnx/onnx_pb.h>

#include "frontend/onnx/onnx_importer.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

// A branch that splits x [.., 3, ..] in four along axis 1: invalid for 3 channels. It declares a value of its own.
onnx::GraphProto split_in_four() {
  onnx::GraphProto b;
  b.set_name("split4");
  auto* s = onnx_node(&b, "Split", {"x"}, {"a", "b", "c", "d"});
  int_attr(s, "axis", 1);
  int_attr(s, "num_outputs", 4);
  set_type(b.add_value_info(), "b", onnx::TensorProto::FLOAT, {2, 1, 5});
  set_type(b.add_output(), "a", onnx::TensorProto::FLOAT, {});
  b.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  return b;
}

onnx::GraphProto neg_branch() {
  onnx::GraphProto b;
  b.set_name("neg");
  onnx_node(&b, "Neg", {"x"}, {"n"});
  set_type(b.add_output(), "n", onnx::TensorProto::FLOAT, {});
  b.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  return b;
}

// x float[2, 3, 5] -> If(Size(Shape(x)) == 4, split in four, Neg) -> y, with y declared [2, 3, declared_last].
onnx::ModelProto rank_test(int64_t declared_last) {
  onnx::ModelProto m = onnx_model(8, 18);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 5});
  auto* four = g->add_initializer();
  four->set_name("four");
  four->set_data_type(onnx::TensorProto::INT64);
  four->add_int64_data(4);
  onnx_node(g, "Shape", {"x"}, {"shape"});
  onnx_node(g, "Size", {"shape"}, {"rank"});
  onnx_node(g, "Equal", {"rank", "four"}, {"is_4d"});
  auto* pick = onnx_node(g, "If", {"is_4d"}, {"y"});
  graph_attr(pick, "then_branch", split_in_four());
  graph_attr(pick, "else_branch", neg_branch());
  set_type(g->add_value_info(), "is_4d", onnx::TensorProto::BOOL, {});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3, declared_last});
  return m;
}

}  // namespace

TEST(OnnxShapeDecidedIf, TakenBranchReplacesTheIf) {
  std::shared_ptr<Graph> g = import(rank_test(5));
  for (const auto& n : g->nodes()) EXPECT_NE(n->op(), OpKind::If) << n->describe();
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  Tensor x = Tensor::zeros(DType::f32, {2, 3, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i) - 7.f;
  Tensor y = Executor(g).run({x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.data<float>()[i], -x.data<float>()[i]) << i;
}

TEST(OnnxShapeDecidedIf, DeclaredOutputTypeIsCheckedOnTheInlinedValue) {
  try {
    import(rank_test(4));
    ADD_FAILURE() << "imported a model whose output y is declared [2, 3, 4] but computes [2, 3, 5]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph output 'y' is declared with dim 2 = 4"), std::string::npos)
        << e.what();
  }
}
