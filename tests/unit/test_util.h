// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "runtime/executor.h"
#include "support/error.h"

// Expects `stmt` to throw cuvil::Error whose message contains `needle`.
#define EXPECT_CUVIL_ERROR(stmt, needle)                                                       \
  do {                                                                                         \
    try {                                                                                      \
      stmt;                                                                                    \
      ADD_FAILURE() << "expected a cuvil::Error containing '" << (needle) << "'";              \
    } catch (const ::cuvil::Error& e) {                                                        \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what(); \
    }                                                                                          \
  } while (0)

namespace cuvil::test {

// A graph parsed from IR text, shape-inferred and verified.
inline std::shared_ptr<Graph> parse_checked(const std::string& text) {
  auto g = parse_graph(text);
  infer_shapes(*g);
  verify(*g);
  return g;
}

// Executor options that run only the reference kernels (the tests of the reference backend use them; the fast
// kernels are tested against them in cpu_kernels_test / onednn_kernels_test).
inline ExecutorOptions reference_kernels() {
  ExecutorOptions o;
  o.kernels.fast = false;
  return o;
}

// ---- tensors

// A tensor of the given values and shape; vec() makes a 1-D one.
template <class T>
Tensor tensor(const std::vector<T>& v, std::vector<int64_t> shape) {
  return Tensor::from_vector<T>(v, std::move(shape));
}
template <class T>
Tensor vec(const std::vector<T>& v) {
  return Tensor::from_vector<T>(v, {int64_t(v.size())});
}

// A tensor's elements: as T, its element type, or converted to double.
template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}
inline std::vector<double> as_f64(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_f64(i));
  return r;
}

// Expects t's elements to be `want`: NaN where want is NaN, equal where it is infinite, else within a relative
// tolerance.
inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> got = as_f64(t);
  ASSERT_EQ(got.size(), want.size()) << t.type_str();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " = " << got[i];
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

// ---- graphs

// Runs a shape-inferred graph on the reference kernels.
inline std::vector<Tensor> run_graph(const std::shared_ptr<Graph>& g, const std::vector<Tensor>& inputs) {
  Executor ex(g, reference_kernels());
  return ex.run(inputs);
}

// An input of the node under test: a graph input fed at run time, a constant (its value is known to inference),
// or omitted.
struct OpArg {
  enum Kind { Input, Const, Absent };
  Tensor t;
  Kind kind = Input;
  std::optional<Shape> declared;  // a graph input's declared shape when not t's own (e.g. symbolic)
};
inline OpArg input(Tensor t) { return {std::move(t), OpArg::Input, std::nullopt}; }
inline OpArg constant(Tensor t) { return {std::move(t), OpArg::Const, std::nullopt}; }
inline OpArg absent() { return {Tensor(), OpArg::Absent, std::nullopt}; }
inline OpArg symbolic_input(Tensor t, Shape declared) { return {std::move(t), OpArg::Input, std::move(declared)}; }

// A graph with one node `op` over `args` (graph inputs and constants in0, in1, ...), whose outputs out0, out1, ...
// are the graph's outputs. Shapes are inferred by infer() or run().
class OneOp {
 public:
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  Node* node = nullptr;
  std::vector<Tensor> feeds;  // the graph inputs' values, in order

  OneOp(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}, size_t num_outputs = 1) {
    std::vector<Value*> ins;
    for (size_t i = 0; i < args.size(); ++i) {
      const OpArg& a = args[i];
      std::string name = "in" + std::to_string(i);
      if (a.kind == OpArg::Absent) {
        ins.push_back(nullptr);
      } else if (a.kind == OpArg::Const) {
        ins.push_back(g->add_constant(name, a.t));
      } else {
        ins.push_back(g->add_input(name, TensorType{a.t.dtype(), a.declared ? *a.declared : Shape::of(a.t.shape())}));
        feeds.push_back(a.t);
      }
    }
    std::vector<std::string> outs;
    for (size_t k = 0; k < num_outputs; ++k) outs.push_back("out" + std::to_string(k));
    node = g->add_node(op, ins, outs, std::move(attrs), Location{"node_under_test", "", 0});
    for (Value* v : node->outputs()) g->add_output(v);
  }

  void infer() {
    infer_shapes(*g);
    inferred = true;
  }
  const TensorType& type(size_t k = 0) const { return node->output(k)->type(); }
  // Runs the graph on the reference kernels, inferring shapes first if infer() has not (it does not verify the
  // graph; build_op does).
  std::vector<Tensor> run() {
    if (!inferred) infer();
    return run_graph(g, feeds);
  }

 private:
  bool inferred = false;
};

// Builds the one-node graph, infers its shapes and verifies it.
inline OneOp build_op(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {}, size_t num_outputs = 1) {
  OneOp one(op, args, std::move(attrs), num_outputs);
  one.infer();
  verify(*one.g);
  return one;
}

// Runs the one-node graph on the fast kernels and on the reference kernels (f32 output 0): the fast run must use a
// kernel whose profile name starts with `impl_prefix`, each element must be within elem_tol * (1 + |want|), and the
// whole within l2_tol in relative L2.
inline void expect_fast_matches_reference(const OneOp& one, const std::string& impl_prefix, double elem_tol,
                                          double l2_tol) {
  Executor fast(one.g), ref(one.g, reference_kernels());
  std::vector<NodeTime> prof = fast.profile(one.feeds);
  ASSERT_EQ(prof.size(), 1u);
  EXPECT_EQ(prof[0].impl.rfind(impl_prefix, 0), 0u) << "ran " << prof[0].impl;
  Tensor got = fast.run(one.feeds)[0], want = ref.run(one.feeds)[0];
  ASSERT_EQ(got.shape(), want.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.data<float>()[i], w = want.data<float>()[i];
    ASSERT_NEAR(g, w, elem_tol * (1 + std::fabs(w))) << "element " << i;
    num += (g - w) * (g - w);
    den += w * w;
  }
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), l2_tol);
}

// Builds, infers and verifies the one-node graph, and runs it on the reference kernels.
inline std::vector<Tensor> run_op(OpKind op, const std::vector<OpArg>& args, AttrMap attrs = {},
                                  size_t num_outputs = 1) {
  OneOp one = build_op(op, args, std::move(attrs), num_outputs);
  return run_graph(one.g, one.feeds);
}

// run_op with every input a graph input.
inline std::vector<Tensor> run_on_inputs(OpKind op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
                                         size_t num_outputs = 1) {
  std::vector<OpArg> args;
  for (const Tensor& t : inputs) args.push_back(input(t));
  return run_op(op, args, std::move(attrs), num_outputs);
}

}  // namespace cuvil::test
