// The run-time check (Assert): a run fails with CheckFailed — the model's exception type, message and source line —
// exactly when its condition has a false element, wherever the check sits (main graph, a branch taken or not, a
// loop iteration), on the reference and the default kernels; the executor stays usable after a failed run; the
// text form keeps the node (it has no outputs); -O1 keeps checks on data and drops only those that hold.
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "support/check_failed.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

TensorType tt(DType d, std::vector<Dim> dims) { return {d, Shape(std::move(dims))}; }

// y = x * 2, after checking max(x) < limit ("x is too large", a ValueError at model.py:12).
std::shared_ptr<Graph> checked_graph() {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", tt(DType::f32, {Dim::symbol("n")}));
  Value* limit = g->add_constant("limit", Tensor::scalar<float>(3.f));
  Value* m = g->add_node(OpKind::ReduceMax, {x}, {"m"}, {{"keepdims", int64_t(0)}})->output(0);
  Value* ok = g->add_node(OpKind::Less, {m, limit}, {"ok"})->output(0);
  g->add_node(OpKind::Assert, {ok}, {},
              {{"message", std::string("x is too large")}, {"exception", std::string("builtins.ValueError")}},
              Location{"", "model.py", 12});
  Value* two = g->add_constant("two", Tensor::scalar<float>(2.f));
  g->add_output(g->add_node(OpKind::Mul, {x, two}, {"y"})->output(0));
  infer_shapes(*g);
  verify(*g);
  return g;
}

Tensor f32s(std::vector<float> v) {
  int64_t n = int64_t(v.size());
  return tensor<float>(v, {n});
}

void expect_check_failure(Executor& e, const std::vector<Tensor>& ins, const std::string& type,
                          const std::string& message, const std::string& location) {
  try {
    e.run(ins);
    ADD_FAILURE() << "the run did not fail";
  } catch (const CheckFailed& f) {
    EXPECT_EQ(f.exception_type(), type);
    EXPECT_EQ(f.message(), message);
    EXPECT_EQ(f.location(), location);
  }
}

TEST(RunTimeCheck, FailsExactlyWhenTheConditionIsFalse) {
  auto g = checked_graph();
  for (ExecutorOptions opts : {reference_kernels(), ExecutorOptions{}}) {
    Executor e(g, opts);
    EXPECT_EQ(values<float>(e.run({f32s({1, 2.5f})})[0]), (std::vector<float>{2, 5}));
    expect_check_failure(e, {f32s({1, 3})}, "builtins.ValueError", "x is too large", "model.py:12");
    // The executor is usable after a failed run, at the failing shape and others.
    EXPECT_EQ(values<float>(e.run({f32s({-1, 0})})[0]), (std::vector<float>{-2, 0}));
    EXPECT_EQ(values<float>(e.run({f32s({0, 0, 1})})[0]), (std::vector<float>{0, 0, 2}));
    expect_check_failure(e, {f32s({7, 0, 1})}, "builtins.ValueError", "x is too large", "model.py:12");
  }
}

TEST(RunTimeCheck, MessageNamesTypeMessageAndLine) {
  Executor e(checked_graph());
  try {
    e.run({f32s({5})});
    FAIL();
  } catch (const Error& f) {  // (a CheckFailed is a cuvil::Error)
    EXPECT_STREQ(f.what(), "ValueError: x is too large (run-time check at model.py:12)");
  }
}

TEST(RunTimeCheck, EveryElementMustHoldAndAnEmptyConditionHolds) {
  auto g = std::make_shared<Graph>();
  Value* c = g->add_input("c", tt(DType::boolean, {Dim::symbol("n"), 2}));
  g->add_node(OpKind::Assert, {c}, {}, {});
  Value* x = g->add_input("x", tt(DType::f32, {1}));
  g->add_output(g->add_node(OpKind::Identity, {x}, {"y"})->output(0));
  infer_shapes(*g);
  verify(*g);
  Executor e(g);
  Tensor x1 = f32s({1});
  EXPECT_NO_THROW(e.run({tensor<bool>({true, true, true, true}, {2, 2}), x1}));
  EXPECT_NO_THROW(e.run({Tensor::zeros(DType::boolean, {0, 2}), x1}));
  // The defaults: an AssertionError with no message.
  expect_check_failure(e, {tensor<bool>({true, true, true, false}, {2, 2}), x1}, "builtins.AssertionError", "", "");
}

TEST(RunTimeCheck, ConditionMustBeBool) {
  auto g = std::make_shared<Graph>();
  Value* c = g->add_input("c", tt(DType::f32, {}));
  g->add_node(OpKind::Assert, {c}, {}, {});
  g->add_output(c);
  EXPECT_THROW(infer_shapes(*g), Error);
}

// A check in a branch fails only when that branch runs; one in a loop body at the iteration whose data fails it.
TEST(RunTimeCheck, InBranchesAndLoopIterations) {
  auto g = std::make_shared<Graph>();
  Value* c = g->add_input("c", tt(DType::boolean, {}));
  Value* n = g->add_input("n", tt(DType::i64, {}));
  auto then_g = std::make_shared<Graph>("then");
  then_g->set_parent(g.get());
  Value* never = then_g->add_constant("never", Tensor::scalar<bool>(false));
  then_g->add_node(OpKind::Assert, {never}, {}, {{"message", std::string("c was set")}}, Location{"", "m.py", 4});
  then_g->add_output(then_g->add_constant("one", Tensor::scalar<int64_t>(1)));
  auto else_g = std::make_shared<Graph>("else");
  else_g->set_parent(g.get());
  else_g->add_output(else_g->add_constant("zero", Tensor::scalar<int64_t>(0)));
  Value* picked = g->add_node(OpKind::If, {c}, {"picked"}, {{"then_branch", then_g}, {"else_branch", else_g}})
                      ->output(0);
  // for i in range(n): assert i < 3  (carries the count of iterations)
  auto body = std::make_shared<Graph>("body");
  body->set_parent(g.get());
  Value* i = body->add_input("i", tt(DType::i64, {}));
  Value* go = body->add_input("go", tt(DType::boolean, {}));
  Value* acc = body->add_input("acc", tt(DType::i64, {}));
  Value* three = body->add_constant("three", Tensor::scalar<int64_t>(3));
  Value* ok = body->add_node(OpKind::Less, {i, three}, {"ok"})->output(0);
  body->add_node(OpKind::Assert, {ok}, {},
                 {{"message", std::string("too many iterations")}, {"exception", std::string("builtins.RuntimeError")}},
                 Location{"", "m.py", 9});
  Value* one = body->add_constant("inc", Tensor::scalar<int64_t>(1));
  Value* next = body->add_node(OpKind::Add, {acc, one}, {"next"})->output(0);
  body->add_output(go);
  body->add_output(next);
  Value* yes = g->add_constant("yes", Tensor::scalar<bool>(true));
  Value* count = g->add_node(OpKind::Loop, {n, yes, picked}, {"count"}, {{"body", body}})->output(0);
  g->add_output(count);
  infer_shapes(*g);
  verify(*g);
  for (ExecutorOptions opts : {reference_kernels(), ExecutorOptions{}}) {
    Executor e(g, opts);
    auto b = [](bool v) { return Tensor::scalar<bool>(v); };
    auto i64 = [](int64_t v) { return Tensor::scalar<int64_t>(v); };
    EXPECT_EQ(e.run({b(false), i64(3)})[0].get_i64(0), 3);
    EXPECT_EQ(e.run({b(false), i64(0)})[0].get_i64(0), 0);
    expect_check_failure(e, {b(true), i64(0)}, "builtins.AssertionError", "c was set", "m.py:4");
    expect_check_failure(e, {b(false), i64(4)}, "builtins.RuntimeError", "too many iterations", "m.py:9");
    EXPECT_EQ(e.run({b(false), i64(2)})[0].get_i64(0), 2);
  }
}

// -O1 keeps a check on data (and what computes its condition), drops one that folds to true, keeps a constant
// false one, and the optimized graph fails as the unoptimized one does.
TEST(RunTimeCheck, OptimizationKeepsChecks) {
  auto g = checked_graph();
  Value* t = g->add_constant("t", Tensor::scalar<bool>(true));
  g->add_node(OpKind::Assert, {t}, {}, {{"message", std::string("holds")}});
  infer_shapes(*g);
  optimize(*g, 1);
  int asserts = 0;
  for (auto& n : g->nodes()) asserts += n->op() == OpKind::Assert;
  EXPECT_EQ(asserts, 1) << print_graph(*g);
  Executor e(g);
  EXPECT_EQ(values<float>(e.run({f32s({1})})[0]), (std::vector<float>{2}));
  expect_check_failure(e, {f32s({4})}, "builtins.ValueError", "x is too large", "model.py:12");
}

TEST(RunTimeCheck, TextFormRoundTrips) {
  auto g = checked_graph();
  std::string text = print_graph(*g);
  EXPECT_NE(text.find("  Assert(%ok) {exception = \"builtins.ValueError\", message = \"x is too large\"} loc("),
            std::string::npos)
      << text;
  auto parsed = parse_graph(text);
  infer_shapes(*parsed);
  verify(*parsed);
  EXPECT_EQ(print_graph(*parsed), text);
  Executor e(parsed);
  expect_check_failure(e, {f32s({9})}, "builtins.ValueError", "x is too large", "model.py:12");
  EXPECT_THROW(parse_graph("graph @g(%x: f32[1]) {\n  constant [1]\n  return %x\n}\n"), Error);
}

// A message from an untrusted file is escaped like every Error's.
TEST(RunTimeCheck, MessageIsEscaped) {
  CheckFailed f("builtins.ValueError", "bad\n\x1b[31mred", "m.py:1");
  EXPECT_EQ(f.message(), "bad\\n\\x1b[31mred");
  EXPECT_EQ(std::string(f.what()), "ValueError: bad\\n\\x1b[31mred (run-time check at m.py:1)");
}

}  // namespace
