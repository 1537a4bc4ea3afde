// The op-test harness: one list of cases per op, run on the reference kernels (the oracle) and on every other
// backend forced on its own, each result compared with the reference's. In the spirit of ggml's test-backend-ops
// and ONNX Runtime's OpTester.
//
// A case names the op, its attributes, how each input is made (random in a range, special values, a coarse grid
// with ties, fixed contents, a constant the kernel may pre-pack, absent) and the tolerance per output dtype. The
// backends:
//   ref        the reference kernels through the executor (fast kernels off): the oracle
//   generated  the op alone fused by fuse-elementwise into a FusedKernel and compiled (src/codegen)
//   cpu        Cuvil's hand-written CPU kernels and GEMM (src/kernels/cpu), prepared directly
//   onednn     oneDNN's kernels (src/kernels/onednn), prepared directly
//   auto       the executor's own choice, with the inputs a case marks `strided` fed as non-contiguous views
// A backend that declines a case (its preparer returns null) is "unclaimed" there; `must` names backends that
// have to claim it, so a kernel that silently stops applying fails the test.
//
// Cases live in one file per op family (cases_<family>.cpp), each adding to the list in add_<family>_cases().
// The driver (main.cpp) has modes test / perf / support; tests/unit/op_harness_test.cpp runs every case under
// gtest and fails when an op of src/ir/ops.def has none.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor.h"

namespace cuvil::optest {

using Ints = std::vector<int64_t>;

// How one input of a case is made.
struct Input {
  enum Role { Runtime, Constant, Absent };
  DType dtype = DType::f32;
  Ints shape;
  double lo = -3, hi = 3;       // random values uniform in [lo, hi) (integers: rounded; bool: lo < 0 ~ half true)
  bool specials = false;        // every 7th element special: NaN, ±inf, ±0, denormals, huge, near exp's limits
  double grid = 0;              // > 0: values rounded to multiples of this (ties for sorts and selections)
  std::optional<Tensor> value;  // fixed contents instead of random ones
  Role role = Runtime;          // a graph input, a constant (kernels may pre-pack it), or an omitted input
  bool strided = false;         // the `auto` backend gets it as a non-contiguous view (its transpose's transpose)

  Input& sp() { specials = true; return *this; }
  Input& range(double l, double h) { lo = l; hi = h; return *this; }
  Input& ties(double step) { grid = step; return *this; }
  Input& cst() { role = Constant; return *this; }
  Input& view() { strided = true; return *this; }
};

// Random inputs of a dtype and shape; fixed contents; a constant; an omitted input.
Input rnd(DType dtype, Ints shape, double lo = -3, double hi = 3);
inline Input f32(Ints shape, double lo = -3, double hi = 3) { return rnd(DType::f32, std::move(shape), lo, hi); }
inline Input i64(Ints shape, double lo = -5, double hi = 5) { return rnd(DType::i64, std::move(shape), lo, hi); }
Input val(Tensor t);
inline Input cst(Tensor t) { return val(std::move(t)).cst(); }
Input none();
// Small fixed tensors: 1-D vectors and scalars.
template <class T>
Tensor vec(const std::vector<T>& v) {
  return Tensor::from_vector<T>(v, {int64_t(v.size())});
}
template <class T>
Tensor scalar(T v) {
  return Tensor::scalar<T>(v);
}
template <class T>
Tensor tensor(const std::vector<T>& v, Ints shape) {
  return Tensor::from_vector<T>(v, std::move(shape));
}

// got vs want: bit-exact when rel < 0 (any NaN matches any NaN); else NaN where want is NaN, the same infinity
// where it is infinite, and |got - want| <= rel * |want| + abs.
struct Tol {
  double rel = -1, abs = 0;
};
inline constexpr Tol kExact{};
// The tolerance a case uses for an output dtype it does not name: exact for integers and bool; for floats, a
// few units of the format's last place (reassociated sums, vectorized math).
Tol default_tol(DType dtype);

enum class Backend { ref, generated, cpu, onednn, automatic };
inline constexpr Backend kBackends[] = {Backend::ref, Backend::generated, Backend::cpu, Backend::onednn,
                                        Backend::automatic};
const char* backend_name(Backend b);
std::optional<Backend> backend_from_name(const std::string& s);

struct OpCase {
  OpCase(OpKind o, std::string l) : op(o), label(std::move(l)) {}
  OpKind op;
  std::string label;  // what this case varies: "odd sizes", "broadcast rows", "specials", ...
  std::vector<Input> inputs;
  AttrMap attrs;
  size_t outputs = 1;
  std::map<DType, Tol> tols;  // per output dtype; default_tol otherwise
  std::set<Backend> must;     // backends that have to claim this case
  std::vector<size_t> inplace;  // inputs the cpu backend also runs with output 0 written over (the executor's reuse)
  uint32_t seed = 0;          // set by Cases from the case's position, so each case's inputs are fixed

  OpCase& in(Input i) { inputs.push_back(std::move(i)); return *this; }
  OpCase& attr(const std::string& name, Attribute a) { attrs[name] = std::move(a); return *this; }
  OpCase& outs(size_t n) { outputs = n; return *this; }
  OpCase& tol(DType dt, Tol t) { tols[dt] = t; return *this; }
  OpCase& tol(Tol t) { for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) tols[d] = t; return *this; }
  OpCase& exact() { return tol(kExact); }
  OpCase& in_place(std::vector<size_t> inputs) { inplace = std::move(inputs); return *this; }
  OpCase& needs(const std::set<Backend>& bs) { must.insert(bs.begin(), bs.end()); return *this; }
  std::string describe() const;  // "Relu [odd sizes] f32[7,13]"
  Tol tol_for(DType dt) const;
};

// The list the family files fill.
class Cases {
 public:
  OpCase& add(OpKind op, std::string label);
  const std::vector<OpCase>& all() const { return cases_; }

 private:
  std::vector<OpCase> cases_;
};

// Every case of every family, in a fixed order.
const std::vector<OpCase>& all_cases();
// Ops that have no case, with the reason (control flow with regions, ops only passes form).
const std::map<OpKind, std::string>& exempt_ops();

// What running one case on one backend gave.
struct BackendResult {
  explicit BackendResult(Backend b) : backend(b) {}
  Backend backend;
  bool claimed = false;         // false: the backend has no kernel for this case (not a failure unless `must`)
  std::string impl;             // the kernel that ran ("cpu:softmax", "jit:...", "onednn:...", "ref:Relu")
  std::vector<std::string> failures;  // mismatches and errors; empty when it agreed with the reference
  double us = 0;                // perf mode: median microseconds per run
};

struct RunOptions {
  std::set<Backend> backends;   // empty: all
  bool perf = false;            // time each claimed kernel instead of (as well as) comparing
  int perf_reps = 20;
};

// Runs `c` on the reference and on each backend asked; one result per backend (ref first). A case whose
// reference run fails yields a ref result holding the error.
std::vector<BackendResult> run_case(const OpCase& c, const RunOptions& options);

// The case's inputs (by slot, undefined when absent), as run_case makes them.
std::vector<Tensor> make_inputs(const OpCase& c);

}  // namespace cuvil::optest
