// The control family (If, Loop, Scan): region typing at compile time, region execution at run time, outer-scope
// captures through nested regions, empty loops and scans, every dtype, and bad models failing with cuvil::Error.
//
// Most bodies only pass values through (inputs, constants, captured values, the iteration number), so these
// tests exercise the control ops themselves; a few use Add/Concat from other families.
#include <onnx/onnx_pb.h>

#include <cstring>

#include "frontend/onnx/onnx_importer.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

Dim sym(const char* s) { return Dim::symbol(s); }
TensorType tt(DType d, std::vector<Dim> dims) { return {d, Shape(std::move(dims))}; }
TensorType scalar(DType d) { return {d, Shape()}; }

GraphPtr region(Graph& parent, const std::string& name) {
  auto r = std::make_shared<Graph>(name);
  r->set_parent(&parent);
  return r;
}

bool is_fresh(const Dim& d) { return d.is_symbol() && d.symbol_name()[0] == '_'; }

void prepare(Graph& g) {
  infer_shapes(g);
  verify(g);
}

Tensor f32s(const std::vector<float>& v, std::vector<int64_t> shape) { return tensor<float>(v, std::move(shape)); }

// ---- If

// if (cond) [1, 2] else [3, 4, 5]: the branches disagree on the dim, which becomes fresh.
std::shared_ptr<Graph> if_graph(bool const_cond, bool cond_value = true) {
  auto g = std::make_shared<Graph>();
  Value* cond = const_cond ? g->add_constant("cond", Tensor::scalar<bool>(cond_value))
                           : g->add_input("cond", scalar(DType::boolean));
  auto then_g = region(*g, "then");
  then_g->add_output(then_g->add_constant("a", f32s({1, 2}, {2})));
  auto else_g = region(*g, "else");
  else_g->add_output(else_g->add_constant("b", f32s({3, 4, 5}, {3})));
  Node* n = g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}, {"else_branch", else_g}});
  g->add_output(n->output(0));
  return g;
}

TEST(RefControlIf, BranchesWithDifferentDimsGiveAFreshDim) {
  auto g = if_graph(false);
  prepare(*g);
  const Shape& s = g->outputs()[0]->shape();
  ASSERT_EQ(s.rank(), 1u);
  EXPECT_TRUE(is_fresh(s[0])) << s.str();
  Executor e(g, reference_kernels());
  EXPECT_EQ(values<float>(e.run({Tensor::scalar<bool>(true)})[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values<float>(e.run({Tensor::scalar<bool>(false)})[0]), (std::vector<float>{3, 4, 5}));
}

TEST(RefControlIf, ConstantConditionGivesTheBranchTypeExactly) {
  auto g = if_graph(true, false);
  prepare(*g);
  EXPECT_EQ(g->outputs()[0]->shape(), Shape::of({3}));
  EXPECT_EQ(values<float>(run_graph(g, {})[0]), (std::vector<float>{3, 4, 5}));
}

TEST(RefControlIf, BranchesReturnOuterValuesWithoutAliasingThem) {
  auto g = std::make_shared<Graph>();
  Value* cond = g->add_input("cond", tt(DType::boolean, {sym("n")}));
  Value* x = g->add_input("x", tt(DType::i32, {sym("batch"), 2}));
  Value* y = g->add_input("y", tt(DType::i32, {sym("batch"), 2}));
  auto then_g = region(*g, "then");
  then_g->add_output(x);
  auto else_g = region(*g, "else");
  else_g->add_output(y);
  Node* n = g->add_node(OpKind::If, {cond}, {"z"}, {{"then_branch", then_g}, {"else_branch", else_g}});
  g->add_output(n->output(0));
  prepare(*g);
  EXPECT_EQ(g->outputs()[0]->shape(), Shape({sym("batch"), 2}));
  Tensor xv = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor yv = Tensor::from_vector<int32_t>({5, 6, 7, 8}, {2, 2});
  Executor e(g, reference_kernels());
  auto out = e.run({Tensor::from_vector<bool>({false}, {1}), xv, yv});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_NE(out[0].raw(), yv.raw());
  // The condition must hold exactly one element.
  EXPECT_CUVIL_ERROR(e.run({Tensor::from_vector<bool>({true, false}, {2}), xv, yv}), "single element");
  EXPECT_CUVIL_ERROR(e.run({Tensor::from_vector<bool>({}, {0}), xv, yv}), "single element");
}

TEST(RefControlIf, BadModelsAreErrors) {
  {
    auto g = std::make_shared<Graph>();
    Value* cond = g->add_input("cond", scalar(DType::boolean));
    auto then_g = region(*g, "then");
    then_g->add_output(then_g->add_constant("a", f32s({1}, {1})));
    auto else_g = region(*g, "else");
    else_g->add_output(else_g->add_constant("b", Tensor::from_vector<int64_t>({1}, {1})));
    g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}, {"else_branch", else_g}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "dtype");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* cond = g->add_input("cond", scalar(DType::f32));
    auto then_g = region(*g, "then");
    then_g->add_output(then_g->add_constant("a", f32s({1}, {1})));
    auto else_g = region(*g, "else");
    else_g->add_output(else_g->add_constant("b", f32s({1}, {1})));
    g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}, {"else_branch", else_g}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "bool");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* cond = g->add_input("cond", tt(DType::boolean, {2}));
    auto then_g = region(*g, "then");
    then_g->add_output(then_g->add_constant("a", f32s({1}, {1})));
    auto else_g = region(*g, "else");
    else_g->add_output(else_g->add_constant("b", f32s({1}, {1})));
    g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}, {"else_branch", else_g}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "single element");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* cond = g->add_input("cond", scalar(DType::boolean));
    auto then_g = region(*g, "then");
    then_g->add_output(then_g->add_constant("a", f32s({1}, {1})));
    auto else_g = region(*g, "else");
    Value* b = else_g->add_constant("b", f32s({1}, {1}));
    else_g->add_output(b);
    else_g->add_output(b);
    g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}, {"else_branch", else_g}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "yields");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* cond = g->add_input("cond", scalar(DType::boolean));
    auto then_g = region(*g, "then");
    then_g->add_output(then_g->add_constant("a", f32s({1}, {1})));
    g->add_node(OpKind::If, {cond}, {"y"}, {{"then_branch", then_g}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "else_branch");
  }
}

// ---- Loop

// Loop(M, cond?, x) whose body passes x through and emits the iteration number: (c, x, i).
std::shared_ptr<Graph> counting_loop(Value* (*make_m)(Graph&), bool with_cond) {
  auto g = std::make_shared<Graph>();
  Value* m = make_m(*g);
  Value* cond = with_cond ? g->add_input("cond", scalar(DType::boolean)) : nullptr;
  Value* x = g->add_input("x", tt(DType::f32, {sym("batch"), 3}));
  auto body = region(*g, "body");
  Value* i = body->add_input("i", scalar(DType::i64));
  Value* c = body->add_input("c", scalar(DType::boolean));
  Value* xi = body->add_input("xi", tt(DType::f32, {}));
  body->set_outputs({c, xi, i, xi});
  Node* n = g->add_node(OpKind::Loop, {m, cond, x}, {"x_final", "iters", "xs"}, {{"body", body}});
  for (Value* v : n->outputs()) g->add_output(v);
  return g;
}

TEST(RefControlLoop, ConstantTripCountStacksScanOutputs) {
  auto g = counting_loop([](Graph& g) { return g.add_constant("M", Tensor::scalar<int64_t>(4)); }, false);
  prepare(*g);
  EXPECT_EQ(g->outputs()[0]->shape(), Shape({sym("batch"), 3}));
  EXPECT_EQ(g->outputs()[1]->type(), tt(DType::i64, {4}));
  EXPECT_EQ(g->outputs()[2]->shape(), Shape({4, sym("batch"), 3}));
  Tensor x = f32s({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = run_graph(g, {x});
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  EXPECT_NE(out[0].raw(), x.raw());
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{4, 2, 3}));
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(out[2].data<float>()[k * 6 + j], x.data<float>()[j]);
}

TEST(RefControlLoop, RuntimeTripCountAndCondition) {
  auto g = counting_loop([](Graph& g) { return g.add_input("M", tt(DType::i64, {sym("k")})); }, true);
  prepare(*g);
  EXPECT_TRUE(is_fresh(g->outputs()[1]->shape()[0]));
  Executor e(g, reference_kernels());
  Tensor x = f32s({1, 2, 3}, {1, 3});
  auto out = e.run({Tensor::from_vector<int64_t>({3}, {1}), Tensor::scalar<bool>(true), x});
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 1, 2}));
  // cond false: no iteration; the scan outputs are empty with the element shape the input types give.
  out = e.run({Tensor::from_vector<int64_t>({3}, {1}), Tensor::scalar<bool>(false), f32s({}, {0, 3})});
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{0}));
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{0, 0, 3}));
  out = e.run({Tensor::from_vector<int64_t>({0}, {1}), Tensor::scalar<bool>(true), f32s({1, 2, 3, 4, 5, 6}, {2, 3})});
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // A negative trip count runs no iteration.
  out = e.run({Tensor::from_vector<int64_t>({-2}, {1}), Tensor::scalar<bool>(true), x});
  EXPECT_EQ(out[1].numel(), 0);
  EXPECT_CUVIL_ERROR(e.run({Tensor::from_vector<int64_t>({3, 4}, {2}), Tensor::scalar<bool>(true), x}),
                     "single element");
}

TEST(RefControlLoop, ConstantZeroTripCountKeepsInitialTypes) {
  auto g = counting_loop([](Graph& g) { return g.add_constant("M", Tensor::scalar<int64_t>(0)); }, false);
  prepare(*g);
  EXPECT_EQ(g->outputs()[1]->type(), tt(DType::i64, {0}));
  auto out = run_graph(g, {f32s({1, 2, 3}, {1, 3})});
  EXPECT_EQ(out[2].shape(), (std::vector<int64_t>{0, 1, 3}));
}

// while (a) { a, b = b, b }: the condition comes from a loop-carried value and stops the loop after 2 iterations.
TEST(RefControlLoop, BodyConditionStopsAWhileLoop) {
  auto g = std::make_shared<Graph>();
  Value* cond = g->add_constant("cond", Tensor::scalar<bool>(true));
  Value* a = g->add_constant("a", Tensor::scalar<bool>(true));
  Value* b = g->add_constant("b", Tensor::scalar<bool>(false));
  auto body = region(*g, "body");
  Value* i = body->add_input("i", scalar(DType::i64));
  body->add_input("c", scalar(DType::boolean));
  Value* ai = body->add_input("ai", scalar(DType::boolean));
  Value* bi = body->add_input("bi", scalar(DType::boolean));
  body->set_outputs({ai, bi, bi, i});
  Node* n = g->add_node(OpKind::Loop, {nullptr, cond, a, b}, {"a_out", "b_out", "iters"}, {{"body", body}});
  for (Value* v : n->outputs()) g->add_output(v);
  prepare(*g);
  EXPECT_TRUE(is_fresh(g->outputs()[2]->shape()[0]));
  auto out = run_graph(g, {});
  EXPECT_EQ(values<int64_t>(out[2]), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(values<bool>(out[0]), std::vector<bool>{false});
}

// The trip count comes from Shape(x)[0]: the scan output's length stays symbolic (batch).
TEST(RefControlLoop, SymbolicTripCountFromAShape) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", tt(DType::f32, {sym("batch"), 2}));
  Value* zero = g->add_constant("zero", Tensor::scalar<int64_t>(0));
  Node* shape = g->add_node(OpKind::Shape, {x}, {"s"});
  Node* m = g->add_node(OpKind::Gather, {shape->output(0), zero}, {"m"}, {{"axis", int64_t(0)}});
  auto body = region(*g, "body");
  Value* i = body->add_input("i", scalar(DType::i64));
  Value* c = body->add_input("c", scalar(DType::boolean));
  body->set_outputs({c, i});
  Node* n = g->add_node(OpKind::Loop, {m->output(0)}, {"iters"}, {{"body", body}});
  g->add_output(n->output(0));
  prepare(*g);
  EXPECT_EQ(g->outputs()[0]->type(), tt(DType::i64, {sym("batch")}));
  auto out = run_graph(g, {f32s({1, 2, 3, 4, 5, 6}, {3, 2})});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 1, 2}));
}

// A loop-carried value that changes shape: [2] enters, the body yields a [3] constant.
TEST(RefControlLoop, CarriedValueMayChangeShapeButScanOutputsMayNot) {
  auto g = std::make_shared<Graph>();
  Value* m = g->add_input("M", scalar(DType::i64));
  Value* x = g->add_constant("x", f32s({1, 2}, {2}));
  auto body = region(*g, "body");
  body->add_input("i", scalar(DType::i64));
  Value* c = body->add_input("c", scalar(DType::boolean));
  Value* xi = body->add_input("xi", tt(DType::f32, {}));
  Value* k = body->add_constant("k", f32s({7, 8, 9}, {3}));
  body->set_outputs({c, k, xi});
  Node* n = g->add_node(OpKind::Loop, {m, nullptr, x}, {"x_final", "xs"}, {{"body", body}});
  for (Value* v : n->outputs()) g->add_output(v);
  prepare(*g);
  EXPECT_TRUE(is_fresh(g->outputs()[0]->shape()[0]));
  Executor e(g, reference_kernels());
  auto out = e.run({Tensor::scalar<int64_t>(1)});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 2}));
  out = e.run({Tensor::scalar<int64_t>(0)});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2}));
  EXPECT_CUVIL_ERROR(e.run({Tensor::scalar<int64_t>(2)}), "changes between iterations");
}

TEST(RefControlLoop, BadModelsAreErrors) {
  auto make = [](bool with_m, bool with_cond, int body_inputs, DType carried_out, DType cond_out) {
    auto g = std::make_shared<Graph>();
    Value* m = with_m ? g->add_constant("M", Tensor::scalar<int64_t>(2)) : nullptr;
    Value* cond = with_cond ? g->add_constant("cond", Tensor::scalar<bool>(true)) : nullptr;
    Value* x = g->add_constant("x", f32s({1}, {1}));
    auto body = region(*g, "body");
    std::vector<Value*> ins;
    for (int k = 0; k < body_inputs; ++k)
      ins.push_back(body->add_input("in" + std::to_string(k), scalar(DType::f32)));
    Value* c = cond_out == DType::boolean ? (body_inputs > 1 ? ins[1] : body->add_constant("t", Tensor::scalar<bool>(true)))
                                          : body->add_constant("t", Tensor::scalar<float>(1));
    Value* y = carried_out == DType::f32 ? (body_inputs > 2 ? ins[2] : x)
                                         : body->add_constant("y", Tensor::from_vector<int64_t>({1}, {1}));
    body->set_outputs({c, y});
    g->add_node(OpKind::Loop, {m, cond, x}, {"y"}, {{"body", body}});
    return g;
  };
  EXPECT_NO_THROW(infer_shapes(*make(true, true, 3, DType::f32, DType::boolean)));
  EXPECT_CUVIL_ERROR(infer_shapes(*make(false, false, 3, DType::f32, DType::boolean)), "never terminates");
  EXPECT_CUVIL_ERROR(infer_shapes(*make(true, false, 2, DType::f32, DType::boolean)), "body takes 2 inputs");
  EXPECT_CUVIL_ERROR(infer_shapes(*make(true, false, 3, DType::i64, DType::boolean)), "dtype");
  EXPECT_CUVIL_ERROR(infer_shapes(*make(true, true, 3, DType::f32, DType::f32)), "must be bool");
  {
    auto g = std::make_shared<Graph>();
    Value* m = g->add_constant("M", Tensor::scalar<int32_t>(2));
    auto body = region(*g, "body");
    body->add_input("i", scalar(DType::i64));
    body->set_outputs({body->add_input("c", scalar(DType::boolean))});
    g->add_node(OpKind::Loop, {m}, {}, {{"body", body}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "expected one of i64");
  }
}

// ---- nested regions and captures

// If(flag) { Loop(M=3) { scan: x (main graph), carried: k (then-branch constant) } } else { ... }, and inside the
// loop body an If choosing between the body's carried value and the iteration number.
TEST(RefControlNested, LoopInsideIfAndIfInsideLoopCaptureOuterValues) {
  auto g = std::make_shared<Graph>();
  Value* flag = g->add_input("flag", scalar(DType::boolean));
  Value* pick = g->add_input("pick", tt(DType::boolean, {sym("p")}));
  Value* x = g->add_input("x", tt(DType::i64, {sym("n")}));
  Value* m = g->add_constant("M", Tensor::scalar<int64_t>(3));

  auto then_g = region(*g, "then");
  Value* k = then_g->add_constant("k", Tensor::scalar<int64_t>(40));
  auto body = region(*then_g, "body");
  Value* i = body->add_input("i", scalar(DType::i64));
  Value* c = body->add_input("c", scalar(DType::boolean));
  Value* ki = body->add_input("ki", scalar(DType::i64));
  auto inner_then = region(*body, "inner_then");
  inner_then->add_output(ki);  // a value of the enclosing loop body
  auto inner_else = region(*body, "inner_else");
  inner_else->add_output(i);
  Node* inner_if = body->add_node(OpKind::If, {pick}, {"chosen"},  // `pick` is two levels up
                                  {{"then_branch", inner_then}, {"else_branch", inner_else}});
  body->set_outputs({c, ki, x, inner_if->output(0)});
  Node* loop = then_g->add_node(OpKind::Loop, {m, nullptr, k}, {"k_final", "xs", "chosen_all"}, {{"body", body}});
  then_g->set_outputs({loop->output(1), loop->output(2)});

  auto else_g = region(*g, "else");
  Value* e1 = else_g->add_constant("e1", Tensor::from_vector<int64_t>({9}, {1, 1}));
  Value* e2 = else_g->add_constant("e2", Tensor::from_vector<int64_t>({-1, -1, -1}, {3}));
  else_g->set_outputs({e1, e2});
  Node* n = g->add_node(OpKind::If, {flag}, {"a", "b"}, {{"then_branch", then_g}, {"else_branch", else_g}});
  g->set_outputs(n->outputs());
  prepare(*g);
  EXPECT_EQ(loop->output(1)->shape(), Shape({3, sym("n")}));
  EXPECT_EQ(loop->output(2)->type(), tt(DType::i64, {3}));
  EXPECT_EQ(g->outputs()[1]->type(), tt(DType::i64, {3}));
  EXPECT_EQ(g->outputs()[0]->shape().rank(), 2u);

  Executor e(g, reference_kernels());
  Tensor xv = Tensor::from_vector<int64_t>({5, 6}, {2});
  Tensor yes = Tensor::from_vector<bool>({true}, {1}), no = Tensor::from_vector<bool>({false}, {1});
  auto out = e.run({Tensor::scalar<bool>(true), yes, xv});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{5, 6, 5, 6, 5, 6}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{40, 40, 40}));
  out = e.run({Tensor::scalar<bool>(true), no, xv});
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 1, 2}));
  out = e.run({Tensor::scalar<bool>(false), no, xv});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{-1, -1, -1}));
  // An error deep inside a region leaves the executor usable.
  EXPECT_CUVIL_ERROR(e.run({Tensor::scalar<bool>(true), Tensor::from_vector<bool>({true, true}, {2}), xv}),
                     "single element");
  out = e.run({Tensor::scalar<bool>(true), no, xv});
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 1, 2}));
}

// A loop body that accumulates with Add (elementwise family): sum = sum + x[i] over a captured constant.
TEST(RefControlNested, LoopAccumulatesWithAdd) {
  auto g = std::make_shared<Graph>();
  Value* m = g->add_constant("M", Tensor::scalar<int64_t>(4));
  Value* init = g->add_input("init", tt(DType::f32, {2}));
  Value* step = g->add_input("step", tt(DType::f32, {2}));
  auto body = region(*g, "body");
  body->add_input("i", scalar(DType::i64));
  Value* c = body->add_input("c", scalar(DType::boolean));
  Value* s = body->add_input("s", tt(DType::f32, {}));
  Node* add = body->add_node(OpKind::Add, {s, step}, {"s_next"});
  body->set_outputs({c, add->output(0), add->output(0)});
  Node* n = g->add_node(OpKind::Loop, {m, nullptr, init}, {"sum", "partials"}, {{"body", body}});
  g->set_outputs(n->outputs());
  prepare(*g);
  EXPECT_EQ(g->outputs()[0]->type(), tt(DType::f32, {2}));
  EXPECT_EQ(g->outputs()[1]->type(), tt(DType::f32, {4, 2}));
  auto out = run_graph(g, {f32s({0, 1}, {2}), f32s({1, -0.5f}, {2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4, -1}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 0.5f, 2, 0, 3, -0.5f, 4, -1}));
}

// ---- Scan

struct ScanSpec {
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// Scan(state, x): body (s, e) -> (e, e): the final state is the last element scanned, the scan output restacks
// the elements.
std::shared_ptr<Graph> restack_scan(TensorType x_type, const ScanSpec& spec) {
  auto g = std::make_shared<Graph>();
  std::vector<Dim> elem = x_type.shape.dims();
  int64_t r = int64_t(elem.size());
  int64_t axis = spec.in_axes.empty() ? 0 : (spec.in_axes[0] < 0 ? spec.in_axes[0] + r : spec.in_axes[0]);
  if (axis >= 0 && axis < r) elem.erase(elem.begin() + axis);
  Value* s = g->add_input("s", {x_type.dtype, Shape(elem)});
  Value* x = g->add_input("x", x_type);
  auto body = region(*g, "body");
  body->add_input("si", {x_type.dtype, Shape()});
  Value* e = body->add_input("e", {x_type.dtype, Shape()});
  body->set_outputs({e, e});
  AttrMap attrs{{"body", body}, {"num_scan_inputs", int64_t(1)}};
  if (!spec.in_axes.empty()) attrs["scan_input_axes"] = spec.in_axes;
  if (!spec.in_dirs.empty()) attrs["scan_input_directions"] = spec.in_dirs;
  if (!spec.out_axes.empty()) attrs["scan_output_axes"] = spec.out_axes;
  if (!spec.out_dirs.empty()) attrs["scan_output_directions"] = spec.out_dirs;
  Node* n = g->add_node(OpKind::Scan, {s, x}, {"last", "ys"}, attrs);
  g->set_outputs(n->outputs());
  return g;
}

TEST(RefControlScan, IdentityScanRestacksAlongAxis0) {
  auto g = restack_scan(tt(DType::f32, {sym("t"), 2}), {});
  prepare(*g);
  EXPECT_EQ(g->outputs()[1]->shape(), Shape({sym("t"), 2}));
  Tensor x = f32s({1, 2, 3, 4, 5, 6}, {3, 2});
  auto out = run_graph(g, {f32s({0, 0}, {2}), x});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{5, 6}));
  EXPECT_EQ(values<float>(out[1]), values<float>(x));
}

TEST(RefControlScan, AxesAndDirectionsTransposeAndReverse) {
  Tensor x = f32s({1, 2, 3, 4, 5, 6}, {2, 3});  // scanning axis 1 visits columns [1 4], [2 5], [3 6]
  struct Case {
    ScanSpec spec;
    std::vector<int64_t> shape;
    std::vector<float> ys, last;
  } cases[] = {
      {{{1}, {}, {}, {}}, {3, 2}, {1, 4, 2, 5, 3, 6}, {3, 6}},
      {{{-1}, {}, {-1}, {}}, {2, 3}, {1, 2, 3, 4, 5, 6}, {3, 6}},
      {{{1}, {1}, {}, {}}, {3, 2}, {3, 6, 2, 5, 1, 4}, {1, 4}},
      {{{1}, {}, {}, {1}}, {3, 2}, {3, 6, 2, 5, 1, 4}, {3, 6}},
      {{{1}, {1}, {1}, {1}}, {2, 3}, {1, 2, 3, 4, 5, 6}, {1, 4}},
      {{{0}, {}, {1}, {}}, {3, 2}, {1, 4, 2, 5, 3, 6}, {4, 5, 6}},
  };
  for (const Case& c : cases) {
    auto g = restack_scan(tt(DType::f32, {2, 3}), c.spec);
    prepare(*g);
    EXPECT_EQ(g->outputs()[1]->shape(), Shape::of(c.shape));
    std::vector<int64_t> state_shape = c.spec.in_axes[0] == 0 ? std::vector<int64_t>{3} : std::vector<int64_t>{2};
    auto out = run_graph(g, {Tensor::zeros(DType::f32, state_shape), x});
    EXPECT_EQ(out[1].shape(), c.shape);
    EXPECT_EQ(values<float>(out[1]), c.ys);
    EXPECT_EQ(values<float>(out[0]), c.last);
  }
}

TEST(RefControlScan, EveryDtypeMovesBitExactly) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i16, DType::u16,
                  DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    auto g = restack_scan(tt(d, {3, 5}), {{1}, {}, {}, {}});
    prepare(*g);
    Tensor x = Tensor::zeros(d, {3, 5});
    auto* bytes = static_cast<uint8_t*>(x.raw());
    for (size_t b = 0; b < x.nbytes(); ++b) bytes[b] = d == DType::boolean ? uint8_t(b % 3 == 0) : uint8_t(b * 37 + 11);
    auto out = run_graph(g, {Tensor::zeros(d, {3}), x});
    ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{5, 3}));
    size_t es = dtype_size(d);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(out[1].raw()) + size_t(j * 3 + i) * es,
                              bytes + size_t(i * 5 + j) * es, es),
                  0);
  }
}

TEST(RefControlScan, EmptyScansAndEmptyElements) {
  auto g = restack_scan(tt(DType::f32, {sym("t"), sym("w")}), {});
  prepare(*g);
  Executor e(g, reference_kernels());
  Tensor s = f32s({1, 2, 3, 4}, {4});
  auto out = e.run({s, Tensor::zeros(DType::f32, {0, 4})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3, 4}));  // no iteration: the initial state
  EXPECT_NE(out[0].raw(), s.raw());
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{0, 4}));
  out = e.run({Tensor::zeros(DType::f32, {0}), Tensor::zeros(DType::f32, {3, 0})});
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{0}));
}

TEST(RefControlScan, TwoScanInputsMustAgreeOnLength) {
  auto make = [](TensorType a, TensorType b) {
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", a);
    Value* y = g->add_input("y", b);
    auto body = region(*g, "body");
    Value* xe = body->add_input("xe", tt(DType::f32, {}));
    Value* ye = body->add_input("ye", tt(DType::f32, {}));
    body->set_outputs({ye, xe});
    Node* n = g->add_node(OpKind::Scan, {x, y}, {"ys", "xs"},
                          {{"body", body}, {"num_scan_inputs", int64_t(2)}, {"scan_input_axes", std::vector<int64_t>{0, 1}}});
    g->set_outputs(n->outputs());
    return g;
  };
  EXPECT_CUVIL_ERROR(infer_shapes(*make(tt(DType::f32, {3}), tt(DType::f32, {2, 4}))), "different lengths");
  auto g = make(tt(DType::f32, {sym("a")}), tt(DType::f32, {2, sym("b")}));
  prepare(*g);
  Executor e(g, reference_kernels());
  auto out = e.run({f32s({1, 2, 3}, {3}), f32s({4, 5, 6, 7, 8, 9}, {2, 3})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4, 7, 5, 8, 6, 9}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 2, 3}));
  EXPECT_CUVIL_ERROR(e.run({f32s({1, 2}, {2}), f32s({4, 5, 6, 7, 8, 9}, {2, 3})}), "different lengths");
}

TEST(RefControlScan, BadAttributesAreErrors) {
  auto try_spec = [](const ScanSpec& spec) { infer_shapes(*restack_scan(tt(DType::f32, {2, 3}), spec)); };
  EXPECT_CUVIL_ERROR(try_spec({{2}, {}, {}, {}}), "out of range");
  EXPECT_CUVIL_ERROR(try_spec({{-3}, {}, {}, {}}), "out of range");
  EXPECT_CUVIL_ERROR(try_spec({{0}, {2}, {}, {}}), "must be 0 or 1");
  EXPECT_CUVIL_ERROR(try_spec({{0}, {}, {3}, {}}), "out of range");
  EXPECT_CUVIL_ERROR(try_spec({{0, 0}, {}, {}, {}}), "entries");
  EXPECT_CUVIL_ERROR(try_spec({{0}, {}, {}, {-1}}), "must be 0 or 1");
  {
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", tt(DType::f32, {}));
    auto body = region(*g, "body");
    body->set_outputs({body->add_input("e", tt(DType::f32, {}))});
    g->add_node(OpKind::Scan, {x}, {"ys"}, {{"body", body}, {"num_scan_inputs", int64_t(1)}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "rank >= 1");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", tt(DType::f32, {3}));
    auto body = region(*g, "body");
    body->set_outputs({body->add_input("e", tt(DType::f32, {}))});
    g->add_node(OpKind::Scan, {x}, {"ys"}, {{"body", body}, {"num_scan_inputs", int64_t(0)}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "num_scan_inputs");
  }
  {
    auto g = std::make_shared<Graph>();
    Value* x = g->add_input("x", tt(DType::f32, {3}));
    auto body = region(*g, "body");
    body->set_outputs({body->add_constant("k", Tensor::scalar<float>(1))});
    g->add_node(OpKind::Scan, {x}, {"ys"}, {{"body", body}, {"num_scan_inputs", int64_t(1)}});
    EXPECT_CUVIL_ERROR(infer_shapes(*g), "body takes 0 inputs");
  }
}

// A scan output whose shape depends on the element (an If on a bool scan input) must not change shape.
TEST(RefControlScan, ScanOutputChangingShapeIsAnError) {
  auto g = std::make_shared<Graph>();
  Value* flags = g->add_input("flags", tt(DType::boolean, {sym("t")}));
  auto body = region(*g, "body");
  Value* f = body->add_input("f", scalar(DType::boolean));
  auto then_g = region(*body, "then");
  then_g->add_output(then_g->add_constant("a", f32s({1, 2}, {2})));
  auto else_g = region(*body, "else");
  else_g->add_output(else_g->add_constant("b", f32s({3}, {1})));
  Node* n_if = body->add_node(OpKind::If, {f}, {"v"}, {{"then_branch", then_g}, {"else_branch", else_g}});
  body->set_outputs({n_if->output(0)});
  Node* n = g->add_node(OpKind::Scan, {flags}, {"vs"}, {{"body", body}, {"num_scan_inputs", int64_t(1)}});
  g->set_outputs(n->outputs());
  prepare(*g);
  Executor e(g, reference_kernels());
  auto out = e.run({Tensor::from_vector<bool>({true, true}, {2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 1, 2}));
  out = e.run({Tensor::from_vector<bool>({false, false, false}, {3})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_CUVIL_ERROR(e.run({Tensor::from_vector<bool>({true, false}, {2})}), "changes between iterations");
}

// ---- ONNX import: Scan-8 (batch axis) becomes a Scan over the batch of Scans; outer-scope names resolve.

// Scan-8 over x[batch=2, seq=3, 2] with body (s, e) -> (e, e) and reversed scanning.
onnx::ModelProto scan8_model(bool with_sequence_lens) {
  onnx::ModelProto m = onnx_model(3, 8);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "init", onnx::TensorProto::FLOAT, {2, 2});
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 2});
  set_type(g->add_output(), "last", onnx::TensorProto::FLOAT, {2, 2});
  set_type(g->add_output(), "ys", onnx::TensorProto::FLOAT, {2, 3, 2});
  auto* n = g->add_node();
  n->set_op_type("Scan");
  n->set_name("scan8");
  n->add_input(with_sequence_lens ? "x" : "");
  n->add_input("init");
  n->add_input("x");
  n->add_output("last");
  n->add_output("ys");
  auto* num = n->add_attribute();
  num->set_name("num_scan_inputs");
  num->set_type(onnx::AttributeProto::INT);
  num->set_i(1);
  auto* dirs = n->add_attribute();
  dirs->set_name("directions");
  dirs->set_type(onnx::AttributeProto::INTS);
  dirs->add_ints(1);
  auto* body = n->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  auto* bg = body->mutable_g();
  bg->set_name("scan_body");
  set_type(bg->add_input(), "s_in", onnx::TensorProto::FLOAT, {2});
  set_type(bg->add_input(), "e", onnx::TensorProto::FLOAT, {2});
  set_type(bg->add_output(), "e", onnx::TensorProto::FLOAT, {2});
  bg->add_output()->set_name("e");
  return m;
}

TEST(RefControlOnnx, Scan8RunsEachBatchEntry) {
  auto g = import(scan8_model(false));
  EXPECT_EQ(g->outputs()[0]->shape(), Shape::of({2, 2}));
  EXPECT_EQ(g->outputs()[1]->shape(), Shape::of({2, 3, 2}));
  std::vector<float> xv;
  for (int i = 0; i < 12; ++i) xv.push_back(float(i));
  auto out = run_graph(g, {f32s({0, 0, 0, 0}, {2, 2}), f32s(xv, {2, 3, 2})});
  // Reversed scanning: the final state is each batch entry's first element; scan outputs are in visiting order.
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 6, 7}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7}));
}

TEST(RefControlOnnx, Scan8SequenceLensIsRejectedClearly) {
  EXPECT_CUVIL_ERROR(import(scan8_model(true)), "sequence_lens");
}

// If(c) { Loop(M) { scan output: outer x } } else { x }: names from two levels up resolve in the importer.
TEST(RefControlOnnx, OuterScopeNamesResolveThroughNestedRegions) {
  onnx::ModelProto m = onnx_model(8, 16);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  set_type(g->add_input(), "x", onnx::TensorProto::INT32, {2});
  set_type(g->add_output(), "y", onnx::TensorProto::INT32, {});
  auto* init = g->add_initializer();
  init->set_name("M");
  init->set_data_type(onnx::TensorProto::INT64);
  init->add_int64_data(2);
  auto* n = g->add_node();
  n->set_op_type("If");
  n->add_input("c");
  n->add_output("y");
  auto* then_a = n->add_attribute();
  then_a->set_name("then_branch");
  then_a->set_type(onnx::AttributeProto::GRAPH);
  auto* tg = then_a->mutable_g();
  tg->set_name("then");
  auto* loop = tg->add_node();
  loop->set_op_type("Loop");
  loop->add_input("M");
  loop->add_input("");
  loop->add_output("xs");
  auto* body_a = loop->add_attribute();
  body_a->set_name("body");
  body_a->set_type(onnx::AttributeProto::GRAPH);
  auto* bg = body_a->mutable_g();
  bg->set_name("body");
  set_type(bg->add_input(), "i", onnx::TensorProto::INT64, {});
  set_type(bg->add_input(), "cond", onnx::TensorProto::BOOL, {});
  bg->add_output()->set_name("cond");
  bg->add_output()->set_name("x");
  tg->add_output()->set_name("xs");
  auto* else_a = n->add_attribute();
  else_a->set_name("else_branch");
  else_a->set_type(onnx::AttributeProto::GRAPH);
  auto* eg = else_a->mutable_g();
  eg->set_name("else");
  eg->add_output()->set_name("x");
  auto graph = import(m);
  EXPECT_EQ(graph->outputs()[0]->shape().rank_known(), false);  // [2, 2] or [2]
  Executor e(graph, reference_kernels());
  Tensor x = Tensor::from_vector<int32_t>({3, 4}, {2});
  auto out = e.run({Tensor::scalar<bool>(true), x});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{3, 4, 3, 4}));
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  out = e.run({Tensor::scalar<bool>(false), x});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{3, 4}));
}

}  // namespace

namespace {

// Regions, outer-scope captures and fresh dims survive the text form; the parsed graph verifies and runs.
TEST(RefControlText, NestedRegionsRoundTripAndRun) {
  auto g = import(scan8_model(false));
  std::string text = print_graph(*g);
  auto parsed = parse_graph(text);
  EXPECT_EQ(print_graph(*parsed), text);
  verify(*parsed);
  auto out = run_graph(parsed, {f32s({0, 0, 0, 0}, {2, 2}), f32s({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 6, 7}));
}

}  // namespace

namespace {

// Per-iteration cost stays small and stacking is linear: 20000 iterations over a [20000, 64] scan input.
TEST(RefControlScan, LongScansAreLinear) {
  auto g = restack_scan(tt(DType::f32, {sym("t"), 64}), {});
  prepare(*g);
  Tensor x = Tensor::zeros(DType::f32, {20000, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 1000);
  auto out = run_graph(g, {Tensor::zeros(DType::f32, {64}), x});
  EXPECT_TRUE(out[1].same_bytes(x));
}

}  // namespace
