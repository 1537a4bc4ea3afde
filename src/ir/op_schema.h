// What the IR knows about each op: arity, attribute schema with defaults, and shape/type inference.
//
// Shape inference is one function per op that serves two callers: the compiler, with symbolic shapes and only
// constants' values known, and the runtime, with concrete shapes and every input's value at hand. Ops whose
// output shape depends on input values (Reshape, Expand, Slice, ...) read them through input_value() /
// input_dims_value(); at compile time they may be missing, and the op then makes fresh symbolic dims.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cuvil {

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
  Attribute default_value;  // used when !required and the node omits it
};

class InferContext;

// Inference needed an input's rank and it is unknown (through an If whose branches differ in rank, a Squeeze with
// axes known only at run time, ...). At compile time shape inference then types the node's outputs with unknown
// ranks, and the runtime, which infers again with every shape concrete, learns them per call.
class UnknownRankError : public Error {
 public:
  using Error::Error;
};

struct OpSchema {
  OpKind kind{};
  int min_inputs = 0, max_inputs = 0;    // max -1: variadic
  int min_outputs = 1, max_outputs = 1;  // max -1: variadic
  std::vector<AttrSpec> attrs;
  std::function<void(InferContext&)> infer;
  // (input, output) pairs whose buffers may be shared: the kernel reads element i of that input only before
  // writing element i of that output, and they have the same dtype size and element count.
  std::vector<std::pair<int, int>> inplace;
  // (input, output) pairs where the output is the input's bytes unchanged (a reshape): the output may share the
  // input's buffer even while the input is still read later (a stronger form of inplace).
  std::vector<std::pair<int, int>> views;
  // The op does more than compute its outputs (Assert fails the run): passes keep it though nothing reads its
  // outputs, never fold, merge or hoist it, and keep the nodes whose regions hold it.
  bool side_effects = false;

  const AttrSpec* find_attr(const std::string& name) const;
  // Fluent helpers used by the op definitions.
  OpSchema& inputs(int lo, int hi) { min_inputs = lo; max_inputs = hi; return *this; }
  OpSchema& outputs(int lo, int hi) { min_outputs = lo; max_outputs = hi; return *this; }
  OpSchema& attr(std::string n, AttrKind k, Attribute def) {
    attrs.push_back({std::move(n), k, false, std::move(def)});
    return *this;
  }
  OpSchema& required_attr(std::string n, AttrKind k) {
    attrs.push_back({std::move(n), k, true, {}});
    return *this;
  }
  OpSchema& infer_with(std::function<void(InferContext&)> f) { infer = std::move(f); return *this; }
  OpSchema& allow_inplace(int in, int out) { inplace.push_back({in, out}); return *this; }
  OpSchema& output_views_input(int in, int out) { views.push_back({in, out}); return *this; }
  OpSchema& has_side_effects() { side_effects = true; return *this; }
};

const OpSchema& op_schema(OpKind k);

// Fails with a message naming the node unless its input and output counts are within the schema's bounds.
// Inference runs it first, so op definitions may index inputs and outputs up to their declared minimums.
void check_arity(const Node& n);

// Reads a node's attributes with the schema's defaults filled in. Shared by inference and kernels.
class AttrReader {
 public:
  explicit AttrReader(const Node& n) : node_(n) {}
  int64_t i(const std::string& name) const { return node_.attr(name).i(); }
  float f(const std::string& name) const { return float(node_.attr(name).f()); }
  const std::string& s(const std::string& name) const { return node_.attr(name).s(); }
  const std::vector<int64_t>& ints(const std::string& name) const { return node_.attr(name).ints(); }
  const std::vector<double>& floats(const std::string& name) const { return node_.attr(name).floats(); }
  const std::vector<std::string>& strings(const std::string& name) const { return node_.attr(name).strings(); }
  const Tensor& t(const std::string& name) const { return node_.attr(name).t(); }
  Graph* g(const std::string& name) const { return node_.attr(name).g().get(); }
  bool has(const std::string& name) const { return node_.has_attr(name); }
  // Fails with a message naming the node (attribute validation outside inference and kernels).
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail(node_.describe(), ": ", args...);
  }

 protected:
  const Node& node_;
};

class InferContext : public AttrReader {
 public:
  InferContext(const Node& n, std::vector<const TensorType*> in_types, std::vector<const Tensor*> in_values,
               std::vector<const std::vector<Dim>*> in_dim_values, int64_t* fresh_counter);

  const Node& node() const { return node_; }
  size_t num_inputs() const { return in_types_.size(); }
  bool has_input(size_t i) const { return i < in_types_.size() && in_types_[i] != nullptr; }
  const TensorType& input_type(size_t i) const;
  DType input_dtype(size_t i) const { return input_type(i).dtype; }
  const Shape& input_shape(size_t i) const { return input_type(i).shape; }
  // Rank of input i; fails with a clear message when it is unknown.
  size_t input_rank(size_t i) const;
  // The input's data when known (a constant at compile time; always at run time), else null.
  const Tensor* input_value(size_t i) const {
    read_values_ = true;
    return has_input(i) ? in_values_[i] : nullptr;
  }
  // The contents of a small integer tensor (rank <= 1) as dims, possibly symbolic (e.g. the output of Shape), or
  // null when not known. Lets Reshape(x, Concat(Shape(x)[0], -1)) infer symbolic output shapes.
  const std::vector<Dim>* input_dims_value(size_t i);

  size_t num_outputs() const { return out_types_.size(); }
  void set_output(size_t i, DType dtype, Shape shape);
  void set_output_dims_value(size_t i, std::vector<Dim> v);
  // A new symbolic dim for a size only known at run time (NonZero's count, a computed Reshape target, ...).
  Dim fresh_dim();
  // Fails with a message naming the node and its location.
  template <class... Args>
  [[noreturn]] void error(const Args&... args) const {
    fail_node(str_cat(args...));
  }
  [[noreturn]] void fail_node(const std::string& msg) const;

  // Compile time only: types a region's body given its input types, and returns its output types. Control-flow
  // ops use it; at run time they are executed, not inferred.
  std::vector<TensorType> infer_region(Graph& region, const std::vector<TensorType>& input_types);
  std::function<std::vector<TensorType>(Graph&, const std::vector<TensorType>&)> region_inferrer;

  const std::vector<TensorType>& output_types() const { return out_types_; }
  // Whether inference looked at any input's contents: if not, the output types follow from the input types alone
  // (the runtime then reuses them for inputs of the same types).
  bool read_values() const { return read_values_; }
  bool output_set(size_t i) const { return out_set_.at(i); }
  std::vector<std::optional<std::vector<Dim>>>& output_dims_values() { return out_dim_values_; }

 private:
  std::vector<const TensorType*> in_types_;
  std::vector<const Tensor*> in_values_;
  std::vector<const std::vector<Dim>*> in_dim_values_;
  std::vector<std::optional<std::vector<Dim>>> derived_dim_values_;
  std::vector<TensorType> out_types_;
  std::vector<bool> out_set_;
  std::vector<std::optional<std::vector<Dim>>> out_dim_values_;
  int64_t* fresh_counter_;
  mutable bool read_values_ = false;
};

// Largest tensor whose contents inference tracks as dims.
inline constexpr int64_t kMaxDimsValueElements = 64;

// Defines an op's schema in src/ir/ops/<family>.cpp:  CUVIL_DEFINE_OP(Relu) { s.inputs(1, 1).infer_with(...); }
#define CUVIL_DEFINE_OP(Name) void define_op_##Name(::cuvil::OpSchema& s)

}  // namespace cuvil
