// Graphs as deep as users make them. Every walk over a graph (import, the text format, shape inference, the
// verifier, each -O1 pass, lowering and emission of a generated kernel, the executor) must be iterative or bounded:
// on the default 8 MB stack these 50,000-node chains used to overflow it (a Relu chain fused into one kernel made
// the emitter recurse once per op). Each chain goes through import (C++ graph API, .cvir text or ONNX), -O1,
// code generation and a run, checked against the reference kernels on the unoptimized graph. Regions nest up to
// kMaxRegionDepth and run; one level more is a clear error at import, inference, verification and printing.
#include <onnx/onnx_pb.h>

#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "frontend/load_model.h"
#include "onnx_test_util.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "runtime/memory_plan.h"
#include "test_util.h"

#include <pthread.h>

using namespace cuvil;
using namespace cuvil::test;

namespace {

constexpr int kChain = 50000;

TensorType f32(std::vector<Dim> dims) { return {DType::f32, Shape(std::move(dims))}; }

Tensor ramp(const std::vector<int64_t>& shape, float scale = 0.37f, float shift = -5.0f) {
  Tensor t = Tensor::zeros(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = shift + scale * float(i % 29) + 0.01f * float(i);
  return t;
}

// x -> step -> step -> ... (n times) -> y; step(g, value, k) adds the k-th node and returns its output.
std::shared_ptr<Graph> chain(int n, const TensorType& in, const std::function<Value*(Graph&, Value*, int)>& step) {
  auto g = std::make_shared<Graph>();
  Value* v = g->add_input("x", in);
  for (int k = 0; k < n; ++k) v = step(*g, v, k);
  g->add_output(v);
  return g;
}

Value* unary(Graph& g, OpKind op, Value* x, int k, AttrMap attrs = {}) {
  return g.add_node(op, {x}, {"v" + std::to_string(k)}, std::move(attrs))->output(0);
}

int count_ops(const Graph& g, OpKind op) {
  int n = 0;
  for (auto& node : g.nodes()) n += node->op() == op;
  return n;
}

// The unoptimized graph on the reference kernels (the oracle) and the -O1 graph on the fast kernels: equal within
// `tol` (relative). Returns the optimized graph.
std::shared_ptr<Graph> optimize_and_compare(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& inputs,
                                            double tol = 1e-5, double* optimize_seconds = nullptr) {
  std::vector<Tensor> want = Executor(g, reference_kernels()).run(inputs);
  // The same graph again, through the text format (print, parse: an exact round trip).
  std::string text = print_graph(*g);
  auto opt = parse_checked(text);
  EXPECT_EQ(print_graph(*opt), text);
  PassContext ctx;
  ctx.verify_each = true;
  auto t0 = std::chrono::steady_clock::now();
  optimize(*opt, 1, ctx);
  if (optimize_seconds) *optimize_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  verify(*opt);
  std::vector<Tensor> got = Executor(opt).run(inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) expect_values(got[i], as_f64(want[i]), tol);
  return opt;
}

// ---- chains

// fuse-elementwise's group size in cheap ops (kMaxGroupWeight): a longer chain continues in the next kernel.
constexpr int kMaxKernelOps = 256;

// Every FusedKernel's body size, in graph order.
std::vector<int> kernel_sizes(const Graph& g) {
  std::vector<int> sizes;
  for (auto& n : g.nodes())
    if (n->op() == OpKind::FusedKernel) sizes.push_back(int(n->attr("body").g()->nodes().size()));
  return sizes;
}

// 50,000 element-wise ops (Relu and Neg alternating, so no rewrite shortens the chain) fuse into generated
// kernels of at most kMaxKernelOps ops each, every op in one.
TEST(DeepGraph, ElementwiseChainFusesIntoKernels) {
  auto g = chain(kChain, f32({3, 37}), [](Graph& g, Value* x, int k) {
    return unary(g, k % 2 ? OpKind::Neg : OpKind::Relu, x, k);
  });
  infer_shapes(*g);
  verify(*g);
  auto opt = optimize_and_compare(g, {ramp({3, 37})});
  EXPECT_EQ(opt->nodes().size(), size_t((kChain + kMaxKernelOps - 1) / kMaxKernelOps));
  int total = 0;
  for (int n : kernel_sizes(*opt)) {
    EXPECT_LE(n, kMaxKernelOps);
    total += n;
  }
  EXPECT_EQ(total, kChain);
}

// One FusedKernel whose body is a 50,000-op chain, written by hand (a legal graph, though fusion makes smaller
// ones): lowered and emitted as one generated kernel, whose expression is 50,000 deep (the emitter recursed once
// per op and overflowed the 8 MB stack), and run against the body op by op on the reference kernels.
TEST(DeepGraph, HandWrittenKernelOf50000OpsGenerates) {
  const int ops = kChain;
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", f32({2, 21}));
  auto body = std::make_shared<Graph>("body");
  body->set_parent(g.get());
  Value* v = body->add_input("bx", f32({2, 21}));
  for (int k = 0; k < ops; ++k) v = unary(*body, k % 2 ? OpKind::Neg : OpKind::Relu, v, k);
  body->add_output(v);
  infer_shapes(*body);  // the body's own types (FusedKernel's inference reads only its inputs')
  Node* fused = g->add_node(OpKind::FusedKernel, {x}, {"y"}, {{"body", Attribute(GraphPtr(body))}});
  g->add_output(fused->output(0));
  infer_shapes(*g);
  verify(*g);
  Tensor in = ramp({2, 21});
  std::vector<Tensor> want = Executor(g, reference_kernels()).run({in});
  Executor fast(g);
  std::vector<NodeTime> times = fast.profile({in});
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].impl.rfind("jit:", 0), 0u) << "ran as " << times[0].impl;
  expect_values(fast.run({in})[0], as_f64(want[0]));
}

// 50,000 Transposes that move the innermost dim: nothing fuses or folds them, so 50,000 nodes go through every
// pass, the memory planner and the executor.
TEST(DeepGraph, ChainThatDoesNotFuseRuns) {
  auto g = chain(kChain, f32({4, 4}), [](Graph& g, Value* x, int k) {
    return unary(g, OpKind::Transpose, x, k, {{"perm", Attribute(std::vector<int64_t>{1, 0})}});
  });
  infer_shapes(*g);
  verify(*g);
  auto opt = optimize_and_compare(g, {ramp({4, 4})});
  EXPECT_EQ(count_ops(*opt, OpKind::Transpose), kChain);
}

// Relu and a Transpose that moves the innermost dim, alternating: 10,000 generated kernels of one op each between
// 10,000 Transposes (fusion outlines each group, redirecting its result's readers: a walk of the whole graph per
// group took 530 s at 50,000 nodes; the kernels share one compiled function). 20,000 nodes: inserting each kernel
// node still moves the nodes after it.
TEST(DeepGraph, AlternatingChainBecomesManySmallKernels) {
  const int n = 20000;
  auto g = chain(n, f32({4, 4}), [](Graph& g, Value* x, int k) {
    if (k % 2) return unary(g, OpKind::Transpose, x, k, {{"perm", Attribute(std::vector<int64_t>{1, 0})}});
    return unary(g, OpKind::Relu, x, k);
  });
  infer_shapes(*g);
  verify(*g);
  auto opt = optimize_and_compare(g, {ramp({4, 4})});
  EXPECT_EQ(count_ops(*opt, OpKind::FusedKernel), n / 2);
}

// A long Add chain imported from ONNX, x + y + y + ... (50,000 Adds): kernels of two inputs each (y, and x or the
// previous kernel's result).
TEST(DeepGraph, OnnxAddChainImportsFusesAndRuns) {
  onnx::ModelProto m = onnx_model(8, 17);
  auto* gp = m.mutable_graph();
  set_type(gp->add_input(), "x", onnx::TensorProto::FLOAT, {2, 33});
  set_type(gp->add_input(), "y", onnx::TensorProto::FLOAT, {33});
  std::string prev = "x";
  for (int k = 0; k < kChain; ++k) {
    auto* n = gp->add_node();
    n->set_op_type("Add");
    n->set_name("add" + std::to_string(k));
    n->add_input(prev);
    n->add_input("y");
    prev = "s" + std::to_string(k);
    n->add_output(prev);
  }
  set_type(gp->add_output(), prev, onnx::TensorProto::FLOAT, {2, 33});
  auto g = import(m);
  EXPECT_EQ(g->nodes().size(), size_t(kChain));
  Tensor y = ramp({33}, 1e-4f, 1e-3f);
  auto opt = optimize_and_compare(g, {ramp({2, 33}), y}, 1e-4);
  EXPECT_EQ(opt->nodes().size(), size_t((kChain + kMaxKernelOps - 1) / kMaxKernelOps));
  EXPECT_EQ(count_ops(*opt, OpKind::FusedKernel), int(opt->nodes().size()));
}

// The clean-up passes over long chains, each rewrite's uses redirected in one walk of the graph (a
// replace_all_uses per rewrite was quadratic: 20,000 Identities took 4 s):
// - simplify-identities: Relu, Identity and a same-type Cast repeating (two thirds of 50,000 nodes go), the last
//   Identity a graph output, and a value it removes read inside an If's branch;
// - constant-folding: c + 1 + 1 + ... (10,000 constant Adds) folds to one constant;
// - common-subexpression-elimination: two equal Sigmoid chains of 12,500 from one input, interleaved (each merge
//   makes the next pair equal).
TEST(DeepGraph, CleanupPassesOnLongChains) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", f32({6}));
  Value* v = x;
  Value* captured = nullptr;
  for (int k = 0; k < kChain; ++k) {
    if (k % 3 == 0) v = unary(*g, OpKind::Relu, v, k);
    else if (k % 3 == 1) v = unary(*g, OpKind::Identity, v, k);
    else v = unary(*g, OpKind::Cast, v, k, {{"to", Attribute(int64_t(1))}});
    if (k == kChain / 2) captured = v;
  }
  Value* ident = unary(*g, OpKind::Identity, v, kChain);
  // If (true) { Neg(captured) } else { captured }
  auto then_g = std::make_shared<Graph>("then");
  then_g->set_parent(g.get());
  then_g->add_output(then_g->add_node(OpKind::Neg, {captured}, {"neg"})->output(0));
  auto else_g = std::make_shared<Graph>("else");
  else_g->set_parent(g.get());
  else_g->add_output(captured);
  Value* t = g->add_constant("t", Tensor::scalar<bool>(true));
  Value* branch = g->add_node(OpKind::If, {t}, {"branch"}, {{"then_branch", Attribute(GraphPtr(then_g))},
                                                             {"else_branch", Attribute(GraphPtr(else_g))}})->output(0);
  // ((c + 1) + 1) + ... folded, then x + c
  Value* c = g->add_constant("c0", Tensor::zeros(DType::f32, {6}));
  Value* one = g->add_constant("one", Tensor::scalar<float>(1.0f));
  for (int k = 0; k < 10000; ++k) c = g->add_node(OpKind::Add, {c, one}, {"c" + std::to_string(k + 1)})->output(0);
  Value* shifted = g->add_node(OpKind::Add, {x, c}, {"shifted"})->output(0);
  // Two equal chains from x, interleaved.
  Value* a = x;
  Value* b = x;
  for (int k = 0; k < kChain / 4; ++k) {
    a = g->add_node(OpKind::Sigmoid, {a}, {"a" + std::to_string(k)})->output(0);
    b = g->add_node(OpKind::Sigmoid, {b}, {"b" + std::to_string(k)})->output(0);
  }
  Value* twins = g->add_node(OpKind::Sub, {a, b}, {"twins"})->output(0);
  for (Value* out : {ident, branch, shifted, twins}) g->add_output(out);
  infer_shapes(*g);
  verify(*g);
  double seconds = 0;
  auto opt = optimize_and_compare(g, {ramp({6})}, 1e-5, &seconds);
  EXPECT_LT(seconds, 60.0) << "-O1 took " << seconds << " s (with a replace_all_uses per rewrite: 400 s)";
  EXPECT_EQ(count_ops(*opt, OpKind::Identity) + count_ops(*opt, OpKind::Cast), 0);
  EXPECT_EQ(opt->outputs()[0]->name(), ident->name());  // graph outputs keep their names
  int fused = 0;
  for (int n : kernel_sizes(*opt)) fused += n;
  EXPECT_LT(fused, kChain / 4 + kChain / 3 + 100);  // one Sigmoid chain left (and the Relus, and small ops)
}

// A Loop whose body is a 50,000-node chain (regions are walked like the main graph), the trip count 3.
TEST(DeepGraph, LoopBodyWithALongChain) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", f32({8}));
  Value* m = g->add_constant("m", Tensor::scalar<int64_t>(3));
  auto body = std::make_shared<Graph>("body");
  body->set_parent(g.get());
  body->add_input("i", {DType::i64, Shape()});
  Value* c = body->add_input("c", {DType::boolean, Shape()});
  Value* v = body->add_input("xi", f32({8}));
  for (int k = 0; k < kChain; ++k) v = unary(*body, k % 2 ? OpKind::Neg : OpKind::Relu, v, k);
  // ... and a 50,000-node chain on an outer value, which hoist-loop-invariants moves in front of the loop.
  Value* w = x;
  for (int k = 0; k < kChain; ++k) w = unary(*body, k % 2 ? OpKind::Neg : OpKind::Relu, w, kChain + k);
  Value* sum = body->add_node(OpKind::Add, {v, w}, {"sum"})->output(0);
  body->set_outputs({c, sum});
  Node* loop = g->add_node(OpKind::Loop, {m, nullptr, x}, {"y"}, {{"body", Attribute(GraphPtr(body))}});
  g->add_output(loop->output(0));
  infer_shapes(*g);
  verify(*g);
  double seconds = 0;
  auto opt = optimize_and_compare(g, {ramp({8})}, 1e-5, &seconds);
  EXPECT_LT(seconds, 60.0);
  const Graph& opt_body = *opt->nodes().back()->attr("body").g();
  int in_body = 0;
  for (int n : kernel_sizes(opt_body)) in_body += n;
  EXPECT_EQ(in_body, kChain + 1) << "the invariant chain should have left the body";
}

// ---- the memory plan of many buffers

// plan_memory before it searched its placed buffers by live range: a scan of all of them per buffer (quadratic).
MemoryPlan plan_memory_by_scan(const std::vector<BufferRequest>& requests, int64_t alignment = 64) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  struct Placed {
    int64_t offset, end;
    size_t id;
  };
  std::vector<Placed> placed;
  for (size_t id : order) {
    const BufferRequest& r = requests[id];
    plan.total_bytes += r.bytes;
    int64_t size = (r.bytes + alignment - 1) / alignment * alignment;
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const Placed& p : placed) {
      const BufferRequest& q = requests[p.id];
      if (q.last < r.first || r.last < q.first) continue;
      if (p.offset >= cursor) {
        int64_t gap = p.offset - cursor;
        if (gap >= size && gap < best_gap) best = cursor, best_gap = gap;
      }
      cursor = std::max(cursor, p.end);
    }
    int64_t off = best >= 0 ? best : cursor;
    plan.offsets[id] = off;
    Placed np{off, off + size, id};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), np,
                                   [](const Placed& a, const Placed& b) { return a.offset < b.offset; }),
                  np);
    plan.arena_bytes = std::max(plan.arena_bytes, off + size);
  }
  return plan;
}

TEST(DeepGraph, MemoryPlanOfManyBuffersIsFastAndUnchanged) {
  // The same offsets as the scan on random plans: short and long lives, equal sizes (ties), empty buffers.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<BufferRequest> r;
    int n = 1 + int(rng() % 600), steps = 1 + int(rng() % 400);
    for (int i = 0; i < n; ++i) {
      int first = int(rng() % uint32_t(steps));
      int life = rng() % 8 == 0 ? int(rng() % uint32_t(steps)) : int(rng() % 4);
      int64_t bytes = rng() % 10 == 0 ? 0 : int64_t(64 * (1 + rng() % 6) + rng() % 3);
      r.push_back({bytes, first, first + life});
    }
    MemoryPlan got = plan_memory(r), want = plan_memory_by_scan(r);
    ASSERT_EQ(got.offsets, want.offsets) << "trial " << trial;
    EXPECT_EQ(got.arena_bytes, want.arena_bytes);
    EXPECT_EQ(got.total_bytes, want.total_bytes);
  }
  // A chain of 50,000 values (each read by the next node) and a few that live throughout. Its time is reported,
  // not asserted (no timing thresholds in unit tests: shared machines, sanitizers); the quadratic scan took
  // seconds here, the planner milliseconds.
  std::vector<BufferRequest> chain;
  for (int i = 0; i < kChain; ++i) chain.push_back({int64_t(64 + 64 * (i % 3)), i, i + 1});
  for (int i = 0; i < 8; ++i) chain.push_back({4096, 0, kChain});
  auto t0 = std::chrono::steady_clock::now();
  MemoryPlan p = plan_memory(chain);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("plan_memory_chain_ms", std::to_string(1000 * s));
  EXPECT_EQ(p.arena_bytes, 8 * 4096 + 2 * 192);
}

// ---- regions nested to the limit

// `depth` regions nested: If(cond) { If(cond) { ... { Relu(x) } ... } else { Neg(x) } } else { Neg(x) }, every
// level capturing the top-level x and cond; as .cvir text (what a model file holds). Built without recursion.
std::string nested_ifs(int depth) {
  auto branch = [](const std::string& name, int d) { return "graph @" + name + std::to_string(d) + "() {\n"; };
  auto neg = [&](int d) {
    std::string n = "%n" + std::to_string(d);
    return branch("else", d) + "  " + n + ": f32[5] = Neg(%x)\n  return " + n + "\n}";
  };
  std::string text = "graph @main(%x: f32[5], %cond: bool[]) {\n  %y: f32[5] = If(%cond) {else_branch = " + neg(1) +
                     ", then_branch = ";
  std::string tail = "}\n  return %y\n}\n";
  std::vector<std::string> closes;
  for (int d = 1; d <= depth; ++d) {
    std::string r = "%r" + std::to_string(d);
    text += branch("then", d);
    if (d == depth) {
      text += "  " + r + ": f32[5] = Relu(%x)\n";
      closes.push_back("  return " + r + "\n}");
    } else {
      text += "  " + r + ": f32[5] = If(%cond) {else_branch = " + neg(d + 1) + ", then_branch = ";
      closes.push_back("}\n  return " + r + "\n}");
    }
  }
  for (size_t k = closes.size(); k-- > 0;) text += closes[k];
  return text + tail;
}

TEST(DeepGraph, RegionsNestedToTheLimitRun) {
  auto g = parse_checked(nested_ifs(kMaxRegionDepth));
  Tensor x = ramp({5});
  Tensor yes = Tensor::scalar<bool>(true), no = Tensor::scalar<bool>(false);
  auto opt = optimize_and_compare(g, {x, yes});
  // Fusion wraps the innermost Relu in a FusedKernel, whose body is one level deeper: still printed and parsed.
  std::string text = print_graph(*opt);
  EXPECT_NE(text.find("FusedKernel"), std::string::npos);
  EXPECT_EQ(print_graph(*parse_checked(text)), text);
  std::vector<Tensor> out = Executor(opt).run({x, no});
  std::vector<double> neg;
  for (double v : as_f64(x)) neg.push_back(-v);
  expect_values(out[0], neg);
}

// Loops nested kMaxRegionDepth deep, each running the next once; the innermost body doubles the carried value.
// The executor runs a region inside a region at every level.
TEST(DeepGraph, LoopsNestedToTheLimitRun) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input("x", f32({3}));
  Value* one = g->add_constant("one", Tensor::scalar<int64_t>(1));
  // Level d's body: (i, c, v) -> (c, Loop(one, v) {level d + 1}); the innermost: (c, v + v).
  std::function<GraphPtr(Graph&, int)> body = [&](Graph& parent, int d) {
    auto b = std::make_shared<Graph>("body" + std::to_string(d));
    b->set_parent(&parent);
    b->add_input("i" + std::to_string(d), {DType::i64, Shape()});
    Value* c = b->add_input("c" + std::to_string(d), {DType::boolean, Shape()});
    Value* v = b->add_input("v" + std::to_string(d), f32({3}));
    Value* r;
    if (d == kMaxRegionDepth) {
      r = b->add_node(OpKind::Add, {v, v}, {"sum"})->output(0);
    } else {
      r = b->add_node(OpKind::Loop, {one, nullptr, v}, {"l" + std::to_string(d + 1)},
                      {{"body", Attribute(body(*b, d + 1))}})->output(0);
    }
    b->set_outputs({c, r});
    return b;
  };
  Node* loop = g->add_node(OpKind::Loop, {one, nullptr, x}, {"y"}, {{"body", Attribute(body(*g, 1))}});
  g->add_output(loop->output(0));
  infer_shapes(*g);
  verify(*g);
  Tensor in = ramp({3});
  optimize_and_compare(g, {in});
  std::vector<Tensor> out = Executor(g, reference_kernels()).run({in});
  std::vector<double> twice;
  for (double v : as_f64(in)) twice.push_back(2 * v);
  expect_values(out[0], twice);
}

TEST(DeepGraph, RegionsNestedPastTheLimitAreAClearError) {
  std::string text = nested_ifs(kMaxRegionDepth + 1);
  auto g = parse_graph(text);
  const std::string limit = "more than the limit of " + std::to_string(kMaxRegionDepth);
  EXPECT_CUVIL_ERROR(infer_shapes(*g), limit);
  EXPECT_CUVIL_ERROR(verify(*g), limit);
  EXPECT_CUVIL_ERROR(print_graph(*g), limit);
  // A model file: load_model parses, infers and verifies.
  std::string path = ::testing::TempDir() + "/nested_past_limit.cvir";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_TRUE(f);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  EXPECT_CUVIL_ERROR(load_model(path), limit);
  std::remove(path.c_str());
  // Far deeper text (the parser recursed once per level and overflowed the stack): the parser stops at the limit.
  EXPECT_CUVIL_ERROR(parse_graph(nested_ifs(kChain)), "more than the limit of " + std::to_string(kMaxRegionDepth));
  // The limit itself is fine everywhere (RegionsNestedToTheLimitRun runs it).
  auto ok = parse_graph(nested_ifs(kMaxRegionDepth));
  infer_shapes(*ok);
  verify(*ok);
  EXPECT_FALSE(print_graph(*ok).empty());
}

// ---- other stacks: a thread with a small stack (the Python binding runs models on its callers' threads, and a
// thread may have far less than the main thread's 8 MB) builds, optimizes and runs a 50,000-node chain and the
// deepest nesting allowed.
void run_on_small_stack(size_t bytes, const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  struct Call {
    const std::function<void()>* f;
    std::string error;
  } call{&f, {}};
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void* p) -> void* {
                  auto* c = static_cast<Call*>(p);
                  try {
                    (*c->f)();
                  } catch (const std::exception& e) {
                    c->error = e.what();
                  }
                  return nullptr;
                },
                &call),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(call.error, "");
}

TEST(DeepGraph, ChainsAndNestingOnASmallThreadStack) {
  run_on_small_stack(size_t(1) << 20, [] {
    auto g = chain(kChain, f32({2, 5}), [](Graph& g, Value* x, int k) {
      return unary(g, k % 2 ? OpKind::Neg : OpKind::Relu, x, k);
    });
    infer_shapes(*g);
    verify(*g);
    optimize_and_compare(g, {ramp({2, 5})});
    auto nested = parse_checked(nested_ifs(kMaxRegionDepth));
    optimize_and_compare(nested, {ramp({5}), Tensor::scalar<bool>(true)});
  });
}

}  // namespace
