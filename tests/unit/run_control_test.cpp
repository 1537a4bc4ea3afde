// RunControl: long runs stop when asked. A Loop with a trip count of 2^62 and an always-true condition runs
// practically forever; a CancelToken cancelled from another thread, an iteration limit, a deadline and a poll
// callback each stop it promptly, with an error naming the loop and what stopped it. Checks happen between nodes
// and between loop iterations, inside regions too; the executor stays usable afterwards.
#include <atomic>
#include <chrono>
#include <thread>

#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kForever = int64_t(1) << 62;

Location named(const std::string& name) {
  Location l;
  l.name = name;
  return l;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// y = Loop(m, true, x) { (i, c, v) -> (c, v + 1) }: x + m, the loop named 'forever'. With `in_if`, the loop sits in
// the then-branch of an If on a true constant (the checks reach regions inside regions).
std::shared_ptr<Graph> counting_loop(bool in_if = false) {
  auto g = std::make_shared<Graph>();
  Value* m = g->add_input("m", {DType::i64, Shape()});
  Value* x = g->add_input("x", {DType::f32, Shape({4})});
  Graph* host = g.get();
  GraphPtr branch;
  if (in_if) {
    branch = std::make_shared<Graph>("then");
    branch->set_parent(g.get());
    host = branch.get();
  }
  Value* cond = host->add_constant("cond", Tensor::scalar<bool>(true));
  auto body = std::make_shared<Graph>("body");
  body->set_parent(host);
  body->add_input("i", {DType::i64, Shape()});
  Value* c = body->add_input("c", {DType::boolean, Shape()});
  Value* v = body->add_input("v", {DType::f32, Shape({4})});
  Value* one = body->add_constant("one", Tensor::scalar<float>(1.0f));
  Value* next = body->add_node(OpKind::Add, {v, one}, {"next"})->output(0);
  body->set_outputs({c, next});
  Node* loop = host->add_node(OpKind::Loop, {m, cond, x}, {"y"}, {{"body", Attribute(GraphPtr(body))}},
                               named("forever"));
  if (!in_if) {
    g->add_output(loop->output(0));
  } else {
    host->add_output(loop->output(0));
    auto other = std::make_shared<Graph>("else");
    other->set_parent(g.get());
    other->add_output(x);
    Value* t = g->add_constant("t", Tensor::scalar<bool>(true));
    Node* n = g->add_node(OpKind::If, {t}, {"out"},
                          {{"then_branch", Attribute(branch)}, {"else_branch", Attribute(GraphPtr(other))}});
    g->add_output(n->output(0));
  }
  infer_shapes(*g);
  verify(*g);
  return g;
}

// The node a check stopped before: the loop ('forever', between iterations) or its body's Add (producing 'next').
bool names_the_loop(const std::string& msg) {
  return msg.find("Loop node 'forever': ") == 0 || msg.find("Add producing 'next': ") == 0;
}

Tensor trips(int64_t m) { return Tensor::scalar<int64_t>(m); }
Tensor x4() { return vec<float>({1, 2, 3, 4}); }

// Runs the endless loop and returns what stopped it (the message), failing when nothing did within `within_s`.
template <class E>
std::string stop_message(Executor& e, double within_s) {
  auto t0 = Clock::now();
  try {
    e.run({trips(kForever), x4()});
    ADD_FAILURE() << "the loop ran to its end";
  } catch (const E& err) {
    EXPECT_LT(seconds_since(t0), within_s) << err.what();
    return err.what();
  }
  return "";
}

TEST(RunControl, CancelFromAnotherThreadStopsAnEndlessLoop) {
  for (bool in_if : {false, true}) {
    auto token = std::make_shared<CancelToken>();
    ExecutorOptions o;
    o.control.cancel = token;
    Executor e(counting_loop(in_if), o);
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      token->cancel();
    });
    std::string msg = stop_message<RunCancelled>(e, 2.0);
    canceller.join();
    EXPECT_NE(msg.find("cancelled"), std::string::npos) << msg;
    EXPECT_TRUE(names_the_loop(msg)) << msg;
    // Cancelled stays cancelled until reset; then the executor runs normally.
    EXPECT_THROW(e.run({trips(3), x4()}), RunCancelled);
    token->reset();
    expect_values(e.run({trips(3), x4()})[0], {4, 5, 6, 7});
  }
}

TEST(RunControl, CancelStopsAChainBetweenNodes) {
  auto g = std::make_shared<Graph>();
  Value* v = g->add_input("x", {DType::f32, Shape({4})});
  for (int k = 0; k < 100; ++k)
    v = g->add_node(OpKind::Relu, {v}, {"r" + std::to_string(k)}, {}, named("relu" + std::to_string(k)))->output(0);
  g->add_output(v);
  infer_shapes(*g);
  verify(*g);
  auto token = std::make_shared<CancelToken>();
  ExecutorOptions o = reference_kernels();
  o.control.cancel = token;
  // The poll runs on the running thread: it cancels the run at its first call, and the next node does not run.
  int polls = 0;
  o.control.poll = [&] {
    ++polls;
    token->cancel();
  };
  o.control.poll_interval = std::chrono::nanoseconds(0);
  Executor e(g, o);
  EXPECT_CUVIL_ERROR(e.run({x4()}), "Relu node 'relu1': the run was cancelled");
  EXPECT_EQ(polls, 1);
}

TEST(RunControl, LoopIterationLimit) {
  ExecutorOptions o;
  o.control.max_loop_iterations = 1000;
  Executor e(counting_loop(), o);
  std::string msg = stop_message<RunLimitExceeded>(e, 2.0);
  EXPECT_NE(msg.find("Loop node 'forever': the loop reached the limit of 1000 iterations"), std::string::npos) << msg;
  // Exactly the limit is allowed.
  expect_values(e.run({trips(1000), x4()})[0], {1001, 1002, 1003, 1004});
  EXPECT_THROW(e.run({trips(1001), x4()}), RunLimitExceeded);
  // Changed between runs.
  RunControl none;
  e.set_control(none);
  expect_values(e.run({trips(1001), x4()})[0], {1002, 1003, 1004, 1005});
}

TEST(RunControl, ScanIterationLimit) {
  // Scan over the 6 rows of x, each body passes its row through.
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", {DType::f32, Shape({Dim::symbol("n"), 2})});
  auto body = std::make_shared<Graph>("body");
  body->set_parent(g.get());
  Value* row = body->add_input("row", {DType::f32, Shape({2})});
  body->set_outputs({row});
  Node* scan = g->add_node(OpKind::Scan, {x}, {"ys"}, {{"body", Attribute(GraphPtr(body))},
                                                        {"num_scan_inputs", Attribute(int64_t(1))}}, named("rows"));
  g->add_output(scan->output(0));
  infer_shapes(*g);
  verify(*g);
  ExecutorOptions o;
  o.control.max_loop_iterations = 5;
  Executor e(g, o);
  EXPECT_CUVIL_ERROR(e.run({Tensor::zeros(DType::f32, {6, 2})}), "Scan node 'rows': the loop reached the limit of 5");
  expect_values(e.run({Tensor::zeros(DType::f32, {5, 2})})[0], std::vector<double>(10, 0.0));
}

TEST(RunControl, Deadline) {
  ExecutorOptions o;
  o.control.timeout = std::chrono::milliseconds(100);
  Executor e(counting_loop(), o);
  auto t0 = Clock::now();
  std::string msg = stop_message<RunLimitExceeded>(e, 2.0);
  EXPECT_GE(seconds_since(t0), 0.09);
  EXPECT_NE(msg.find("the run exceeded its time limit of 100 ms"), std::string::npos) << msg;
  EXPECT_TRUE(names_the_loop(msg)) << msg;
  // The deadline is per run: a short run right after is fine.
  expect_values(e.run({trips(2), x4()})[0], {3, 4, 5, 6});
}

// The poll callback runs on the running thread, about every poll_interval; what it throws leaves run() as it is
// (the Python binding throws the KeyboardInterrupt of a pending Ctrl-C).
TEST(RunControl, PollCallbackStopsTheRunWithItsOwnException) {
  struct Stop {};
  std::atomic<int> calls{0};
  std::thread::id runner;
  ExecutorOptions o;
  o.control.poll_interval = std::chrono::milliseconds(10);
  o.control.poll = [&] {
    runner = std::this_thread::get_id();
    if (++calls == 3) throw Stop{};
  };
  Executor e(counting_loop(), o);
  auto t0 = Clock::now();
  EXPECT_THROW(e.run({trips(kForever), x4()}), Stop);
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(runner, std::this_thread::get_id());
  calls = -1000000;
  expect_values(e.run({trips(2), x4()})[0], {3, 4, 5, 6});
}

// Without a control, nothing changes (and nothing is checked).
TEST(RunControl, NoControlRunsToTheEnd) {
  Executor e(counting_loop());
  expect_values(e.run({trips(20000), x4()})[0], {20001, 20002, 20003, 20004});
}

}  // namespace
