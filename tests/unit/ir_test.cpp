// Graph construction, the text format, the verifier and whole-graph symbolic shape inference.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "test_util.h"

using namespace cuvil;

namespace {

Dim sym(const char* s) { return Dim::symbol(s); }
TensorType f32(std::vector<Dim> d) { return {DType::f32, Shape(std::move(d))}; }

// x: f32[batch, 3, h, w] -> Relu -> Reshape to [batch, -1] via Shape/Gather/Concat arithmetic -> Add bias
std::shared_ptr<Graph> flatten_graph() {
  auto g = std::make_shared<Graph>("main");
  Value* x = g->add_input("x", f32({sym("batch"), 3, sym("h"), sym("w")}));
  Value* zero = g->add_constant("zero", Tensor::from_vector<int64_t>({0}, {1}));
  Value* minus1 = g->add_constant("minus1", Tensor::from_vector<int64_t>({-1}, {1}));
  Value* bias = g->add_constant("bias", Tensor::from_vector<float>({0.5f}, {1}));
  Node* relu = g->add_node(OpKind::Relu, {x}, {"r"}, {}, Location{"relu1", "", 0});
  Node* shape = g->add_node(OpKind::Shape, {relu->output(0)}, {"s"});
  Node* gather = g->add_node(OpKind::Gather, {shape->output(0), zero}, {"n"}, {{"axis", int64_t(0)}});
  Node* cat = g->add_node(OpKind::Concat, {gather->output(0), minus1}, {"target"}, {{"axis", int64_t(0)}});
  Node* reshape = g->add_node(OpKind::Reshape, {relu->output(0), cat->output(0)}, {"flat"});
  Node* add = g->add_node(OpKind::Add, {reshape->output(0), bias}, {"y"}, {}, Location{"", "model.py", 12});
  g->add_output(add->output(0));
  return g;
}

}  // namespace

TEST(ShapeInference, ShapeArithmeticStaysSymbolic) {
  auto g = flatten_graph();
  infer_shapes(*g);
  verify(*g);
  const Value* y = g->outputs()[0];
  EXPECT_EQ(y->dtype(), DType::f32);
  ASSERT_EQ(y->shape().rank(), 2u);
  EXPECT_EQ(y->shape()[0], sym("batch"));
  EXPECT_EQ(y->shape()[1], Dim(3) * sym("h") * sym("w"));
}

TEST(ShapeInference, BroadcastMismatchNamesTheNode) {
  Graph g;
  Value* a = g.add_input("a", f32({2, 3}));
  Value* b = g.add_input("b", f32({4, 3}));
  g.add_node(OpKind::Add, {a, b}, {"c"}, {}, Location{"add_7", "", 0});
  EXPECT_CUVIL_ERROR(infer_shapes(g), "Add node 'add_7'");
}

TEST(TextFormat, RoundTripsExactly) {
  auto g = flatten_graph();
  infer_shapes(*g);
  std::string text = print_graph(*g);
  auto parsed = parse_graph(text);
  EXPECT_EQ(print_graph(*parsed), text);
  verify(*parsed);
  // Re-inferring the parsed graph gives the recorded types back.
  infer_shapes(*parsed);
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_NE(text.find("loc(\"model.py\":12)"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[batch, 3*h*w]"), std::string::npos) << text;
}

TEST(TextFormat, AttributesConstantsAndQuotedNamesRoundTrip) {
  std::string text = R"(graph @g(%"in put": f32[n, 4], %k: i64[2]) {
  %c: f32[3] = constant [0.5, -inf, 3]
  %h: f16[2] = constant [1.5, -2]
  %big: i32[20] = constant 0x000000000100000002000000030000000400000005000000060000000700000008000000090000000a0000000b0000000c0000000d0000000e0000000f00000010000000110000001200000013000000
  %y: f32[n, 4] = LeakyRelu(%"in put") {alpha = 0.25} loc("lr")
  %z: f32[n*4] = Reshape(%y, none) {allowzero = 0}
  return %z, %c, %h, %big
}
)";
  auto g = parse_graph(text);
  std::string printed = print_graph(*g);
  EXPECT_EQ(print_graph(*parse_graph(printed)), printed);
  EXPECT_EQ(g->inputs()[0]->name(), "in put");
  EXPECT_EQ(g->constants()[2]->constant().data<int32_t>()[19], 19);
  EXPECT_TRUE(std::isinf(g->constants()[0]->constant().data<float>()[1]));
  const Node& lr = *g->nodes()[0];
  EXPECT_EQ(lr.attr("alpha").f(), 0.25);
  EXPECT_EQ(lr.loc().name, "lr");
}

// Strings print quoted and inline, whatever their number; bytes or external data for them are refused (their
// elements are pointers, so a file must never supply them).
TEST(TextFormat, StringConstantsRoundTripAndRefuseBytes) {
  auto g = parse_graph(R"(graph @g(%x: str[3]) {
  %s: str[2] = constant ["a \"quoted\" \\ b\x0a", "\xc3\xa9"]
  %e: str[] = constant [""]
  %y: str[3] = StringConcat(%x, %e)
  return %y, %s
}
)");
  const Tensor& s = g->constants()[0]->constant();
  EXPECT_EQ(s.str_values(), (std::vector<std::string>{"a \"quoted\" \\ b\n", "\xc3\xa9"}));
  std::string printed = print_graph(*g);
  EXPECT_EQ(print_graph(*parse_graph(printed)), printed);
  std::vector<std::string> many(kMaxInlineElements + 5, "w");
  Graph big("g");
  big.add_constant("c", Tensor::strings(many, {int64_t(many.size())}));
  EXPECT_EQ(print_graph(*parse_graph(print_graph(big))), print_graph(big));
  ParseOptions external;
  external.external = [](int64_t, DType d, const std::vector<int64_t>& dims) { return Tensor::zeros(d, dims); };
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %c: str[1] = constant external(0)\n  return %c\n}", external),
                     "expected '['");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %c: str[1] = constant 0x0000000000000000\n  return %c\n}"),
                     "expected '['");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %c: str[2] = constant [\"a\"]\n  return %c\n}"),
                     "expected 2 values");
}

TEST(TextFormat, RegionsRoundTrip) {
  std::string text = R"(graph @main(%c: bool[], %x: f32[2]) {
  %y: f32[2] = If(%c) {else_branch = graph @else() {
    %e: f32[2] = Neg(%x)
    return %e
  }, then_branch = graph @then() {
    %t: f32[2] = Abs(%x)
    return %t
  }}
  return %y
}
)";
  auto g = parse_graph(text);
  EXPECT_EQ(print_graph(*g), text);
  infer_shapes(*g);
  verify(*g);
}

TEST(TextFormat, ParseErrorsPointAtTheProblem) {
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %y: f32[2] = Nope(%x)\n  return %y\n}"), "2:");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %y: f32[2] = Relu(%x)\n  return %y\n}"), "unknown value %x");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g(%x: q9[2]) {\n  return %x\n}"), "unknown dtype");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g(%x: f32[2]) {\n  %x: f32[2] = Relu(%x)\n  return %x\n}"), "redefinition");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g() {\n  %c: f32[2] = constant [1]\n  return %c\n}"), "expected 2 values");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g(%x: f32[2]) {\n  return %x\n"), "expected '}'");
  EXPECT_CUVIL_ERROR(parse_graph("graph @g(%x: f32[2 +]) {\n  return %x\n}"), "bad dim expression");
}

TEST(Verifier, RejectsBadArityAttributesAndTypes) {
  {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Node* n = g.add_node(OpKind::Relu, {a, a}, {"b"});
    n->output(0)->set_type(f32({2}));
    EXPECT_CUVIL_ERROR(verify(g), "has 2 inputs");
  }
  {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Node* n = g.add_node(OpKind::Relu, {a}, {"b"}, {{"bogus", int64_t(1)}});
    n->output(0)->set_type(f32({2}));
    EXPECT_CUVIL_ERROR(verify(g), "unknown attribute 'bogus'");
  }
  {
    Graph g;
    Value* a = g.add_input("a", f32({2}));
    Node* n = g.add_node(OpKind::Relu, {a}, {"b"}, {}, Location{"r1", "", 0});
    n->output(0)->set_type(f32({3}));
    EXPECT_CUVIL_ERROR(verify(g), "Relu node 'r1': output 0 'b' is typed f32[3] but its inputs give f32[2]");
  }
  {
    // A region may not use a value defined after its node.
    auto g = parse_graph(R"(graph @main(%c: bool[], %x: f32[2]) {
  %y: f32[2] = If(%c) {else_branch = graph @else() {
    return %x
  }, then_branch = graph @then() {
    return %x
  }}
  return %y
}
)");
    infer_shapes(*g);
    verify(*g);
  }
}

TEST(Verifier, RejectsUseBeforeDefinition) {
  Graph g;
  Value* a = g.add_input("a", f32({2}));
  Node* first = g.add_node(OpKind::Relu, {a}, {"b"});
  Node* second = g.add_node(OpKind::Relu, {a}, {"c"});
  first->set_input(0, second->output(0));  // now `b` uses `c` before `c` exists
  first->output(0)->set_type(f32({2}));
  second->output(0)->set_type(f32({2}));
  g.add_output(first->output(0));
  EXPECT_CUVIL_ERROR(verify(g), "used before it is defined");
}
