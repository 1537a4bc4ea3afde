// Errors traced to the source: CUVIL_ASSERT throws InternalError (not a user error); a kernel's failure at run time
// leaves the executor as a RunError naming the node, its kernel, the fused kernel it ran in and the node's source
// (Python call chain or ONNX node); kernel selection records why it passed over faster kernels.
#include <gtest/gtest.h>

#include "ir/text_format.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"
#include "runtime/run_error.h"

using namespace cuvil;

namespace {

int checked(int x) {
  CUVIL_ASSERT(x > 0, "x is ", x);
  return x;
}

int checked_bare(int x) {
  CUVIL_ASSERT(x > 0);
  return x;
}

TEST(ErrorsTraced, AssertThrowsInternalErrorWithItsMessageAndPlace) {
  EXPECT_EQ(checked(3), 3);
  try {
    checked(-2);
    FAIL() << "no throw";
  } catch (const InternalError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("internal error: x is -2 (", 0), 0u) << m;
    EXPECT_NE(m.find("errors_traced_test.cpp:"), std::string::npos) << m;
  }
  try {
    checked_bare(0);
    FAIL() << "no throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("x > 0 failed"), std::string::npos) << e.what();
  }
  // An InternalError is an Error (callers that catch Error still do) but no InputError.
  EXPECT_THROW(fail_internal("bad"), Error);
  bool input = false;
  try {
    fail_internal("bad");
  } catch (const InputError&) {
    input = true;
  } catch (const Error&) {
  }
  EXPECT_FALSE(input);
}

std::shared_ptr<Graph> parsed(const std::string& text, int opt_level = 0) {
  auto g = parse_graph(text);
  infer_shapes(*g);
  verify(*g);
  if (opt_level) optimize(*g, opt_level);
  return g;
}

Tensor i64s(std::vector<int64_t> v) {
  Tensor t = Tensor::zeros(DType::i64, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

Tensor i32s(std::vector<int32_t> v) {
  Tensor t = Tensor::zeros(DType::i32, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

TEST(ErrorsTraced, LocationStackRoundTripsThroughText) {
  auto g = parsed(R"(graph @g(%x: f32[2]) {
  %y: f32[2] = Relu(%x) loc("model.py":12 "blk.act" via "test.py:40 in test_it\x0amodel.py:12 in forward")
  return %y
})");
  const Location& l = g->nodes()[0]->loc();
  EXPECT_EQ(l.file, "model.py");
  EXPECT_EQ(l.line, 12);
  EXPECT_EQ(l.name, "blk.act");
  EXPECT_EQ(l.stack, "test.py:40 in test_it\nmodel.py:12 in forward");
  EXPECT_EQ(l.chain(), "test.py:40 in test_it -> model.py:12 in forward");
  auto again = parse_graph(print_graph(*g));
  EXPECT_EQ(again->nodes()[0]->loc(), l);
}

TEST(ErrorsTraced, GatherOutOfRangeIsARunErrorNamingNodeKernelAndSource) {
  auto g = parsed(R"(graph @g(%data: f32[4, 2], %idx: i64[3]) {
  %y: f32[3, 2] = Gather(%data, %idx) {axis = 0} loc("embed")
  return %y
})");
  Executor ex(g);
  Tensor data = Tensor::zeros(DType::f32, {4, 2});
  EXPECT_NO_THROW(ex.run({data, i64s({0, 3, -1})}));
  try {
    ex.run({data, i64s({0, 4, 1})});
    FAIL() << "no throw";
  } catch (const RunError& e) {
    EXPECT_EQ(e.node(), "Gather -> %y");
    EXPECT_FALSE(e.kernel().empty());
    EXPECT_EQ(e.source(), "ONNX node 'embed'");
    EXPECT_TRUE(e.fused().empty());
    EXPECT_NE(e.detail().find("4"), std::string::npos) << e.detail();
    std::string m = e.what();
    EXPECT_NE(m.find("run-time error in node Gather -> %y, kernel "), std::string::npos) << m;
    EXPECT_NE(m.find("source: ONNX node 'embed'"), std::string::npos) << m;
  }
}

TEST(ErrorsTraced, DivisionByZeroInAFusedKernelNamesTheFusedKernel) {
  // (300 elements: fewer would be shape arithmetic, left unfused)
  auto g = parsed(R"(graph @g(%x: i32[300], %y: i32[300]) {
  %q: i32[300] = Div(%x, %y) loc("m.py":3 via "app.py:10 in main\x0am.py:3 in f")
  %r: i32[300] = Neg(%q) loc("m.py":4)
  return %r
})",
                  1);
  int fused = 0;
  for (auto& n : g->nodes()) fused += n->op() == OpKind::FusedKernel;
  ASSERT_EQ(fused, 1) << print_graph(*g);
  Executor ex(g);
  std::vector<int32_t> x(300, 7), y(300, 2);
  EXPECT_NO_THROW(ex.run({i32s(x), i32s(y)}));
  y[123] = 0;
  try {
    ex.run({i32s(x), i32s(y)});
    FAIL() << "no throw";
  } catch (const RunError& e) {
    EXPECT_EQ(e.node().rfind("Div -> %", 0), 0u) << e.what();
    EXPECT_EQ(e.fused().rfind("FusedKernel -> %", 0), 0u) << e.what();
    EXPECT_EQ(e.source(), "app.py:10 in main -> m.py:3 in f");
  }
}

TEST(ErrorsTraced, ReferenceKernelsSayWhyNothingFasterRan) {
  auto g = parsed(R"(graph @g(%data: f32[4, 2], %idx: i64[3]) {
  %y: f32[3, 2] = Gather(%data, %idx) {axis = 0}
  return %y
})");
  ExecutorOptions fast;
  Executor ex(g, fast);
  for (const NodeTime& t : ex.profile({Tensor::zeros(DType::f32, {4, 2}), i64s({0, 1, 2})})) {
    if (t.impl.rfind("ref:", 0) == 0) {
      EXPECT_FALSE(t.fallback.empty()) << t.impl;
    }
  }
  ExecutorOptions ref;
  ref.kernels.fast = false;
  Executor slow(g, ref);
  auto times = slow.profile({Tensor::zeros(DType::f32, {4, 2}), i64s({0, 1, 2})});
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].fallback, "fast kernels are off (reference kernels only)");
}

}  // namespace
