// The harness's machinery: inputs from generators, the one-node graph, each backend forced on its own, the
// comparison with the reference. See harness.h.
#include "harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/onednn/onednn_kernels.h"
#include "passes/pass.h"
#include "runtime/executor.h"
#include "support/error.h"

namespace cuvil::optest {

Input rnd(DType dtype, Ints shape, double lo, double hi) {
  Input i;
  i.dtype = dtype;
  i.shape = std::move(shape);
  i.lo = lo;
  i.hi = hi;
  return i;
}

Input val(Tensor t) {
  Input i;
  i.dtype = t.dtype();
  i.shape = t.shape();
  i.value = std::move(t);
  return i;
}

Input none() {
  Input i;
  i.role = Input::Absent;
  return i;
}

Tol default_tol(DType dtype) {
  switch (dtype) {
    case DType::f32: return {1e-5, 1e-6};
    case DType::f64: return {1e-12, 1e-300};
    case DType::f16: return {2e-3, 1e-4};
    case DType::bf16: return {1.6e-2, 1e-3};
    default: return kExact;
  }
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::ref: return "ref";
    case Backend::generated: return "generated";
    case Backend::cpu: return "cpu";
    case Backend::onednn: return "onednn";
    case Backend::automatic: return "auto";
  }
  return "?";
}

std::optional<Backend> backend_from_name(const std::string& s) {
  for (Backend b : kBackends)
    if (s == backend_name(b)) return b;
  return std::nullopt;
}

std::string OpCase::describe() const {
  std::ostringstream os;
  os << op_name(op);
  if (!label.empty()) os << " [" << label << "]";
  for (const Input& i : inputs) {
    if (i.role == Input::Absent) {
      os << " -";
      continue;
    }
    os << " " << (i.role == Input::Constant ? "const " : "") << dtype_name(i.dtype) << shape_str(i.shape);
    if (i.strided) os << "(view)";
  }
  return os.str();
}

Tol OpCase::tol_for(DType dt) const {
  auto it = tols.find(dt);
  return it != tols.end() ? it->second : default_tol(dt);
}

OpCase& Cases::add(OpKind op, std::string label) {
  cases_.emplace_back(op, std::move(label));
  cases_.back().seed = uint32_t(cases_.size()) * 7919u;
  return cases_.back();
}

namespace {

// ---- inputs

// Special values: NaN, infinities, signed zeros, denormals, huge magnitudes, exp's overflow and underflow edges.
constexpr double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                0.0,
                                -0.0,
                                1e-40,
                                -1e-40,
                                1e30,
                                -1e30,
                                88.8,
                                -104.5,
                                1e-30};

Tensor make_input(const Input& in, uint32_t seed) {
  if (in.value) return *in.value;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(in.lo, in.hi);
  Tensor t = Tensor::zeros(in.dtype, in.shape);
  visit_dtype(in.dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = d(rng);
      if (in.grid > 0) v = std::round(v / in.grid) * in.grid;
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v >= (in.lo + in.hi) / 2;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = T(std::llround(std::floor(v)));
      } else {
        if (in.specials && i % 7 == 3) v = kSpecials[(i / 7) % std::size(kSpecials)];
        p[i] = T(v);
      }
    }
  });
  return t;
}

// ---- the one-node graph

struct Built {
  std::shared_ptr<Graph> g;
  Node* node = nullptr;
  std::vector<Tensor> feeds;        // graph inputs' values, in order
  std::vector<int> feed_of;         // per case input: its index in feeds, or -1
};

Built build(const OpCase& c, const std::vector<Tensor>& ins) {
  Built b;
  b.g = std::make_shared<Graph>();
  std::vector<Value*> values;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    std::string name = "in" + std::to_string(i);
    b.feed_of.push_back(-1);
    if (in.role == Input::Absent) {
      values.push_back(nullptr);
    } else if (in.role == Input::Constant) {
      values.push_back(b.g->add_constant(name, ins[i]));
    } else {
      values.push_back(b.g->add_input(name, TensorType{ins[i].dtype(), Shape::of(ins[i].shape())}));
      b.feed_of.back() = int(b.feeds.size());
      b.feeds.push_back(ins[i]);
    }
  }
  std::vector<std::string> outs;
  for (size_t k = 0; k < c.outputs; ++k) outs.push_back("out" + std::to_string(k));
  b.node = b.g->add_node(c.op, values, outs, c.attrs, Location{"node_under_test", "", 0});
  for (Value* v : b.node->outputs()) b.g->add_output(v);
  infer_shapes(*b.g);
  verify(*b.g);
  return b;
}

// ---- comparison

void compare(const Tensor& got, const Tensor& want, Tol tol, const std::string& what,
             std::vector<std::string>& failures) {
  if (!got.defined()) {
    failures.push_back(what + ": no result");
    return;
  }
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    failures.push_back(what + ": " + got.type_str() + ", reference " + want.type_str());
    return;
  }
  if (want.dtype() == DType::str) {  // text, not the pointers to it
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got.str(i) != want.str(i)) {
        failures.push_back(what + ": element " + std::to_string(i) + " is \"" + got.str(i) + "\", reference \"" +
                           want.str(i) + "\"");
        return;
      }
    return;
  }
  bool fp = is_float(want.dtype());
  size_t es = dtype_size(want.dtype());
  const auto* gb = static_cast<const uint8_t*>(got.raw());
  const auto* wb = static_cast<const uint8_t*>(want.raw());
  int bad = 0;
  for (int64_t i = 0; i < want.numel() && bad < 5; ++i) {
    bool ok;
    double g = 0, w = 0;
    if (!fp) {
      ok = std::memcmp(gb + size_t(i) * es, wb + size_t(i) * es, es) == 0;
      g = got.get_f64(i);
      w = want.get_f64(i);
    } else {
      g = got.get_f64(i);
      w = want.get_f64(i);
      if (std::isnan(w)) ok = std::isnan(g);
      else if (tol.rel < 0) ok = g == w && std::signbit(g) == std::signbit(w);
      else if (std::isinf(w)) ok = g == w;
      else ok = std::fabs(g - w) <= tol.rel * std::fabs(w) + tol.abs;
    }
    if (!ok) {
      ++bad;
      std::ostringstream os;
      os.precision(9);
      os << what << ": element " << i << " = " << g << ", reference " << w;
      failures.push_back(os.str());
    }
  }
}

void compare_all(const OpCase& c, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what, std::vector<std::string>& failures) {
  if (got.size() != want.size()) {
    failures.push_back(what + ": " + std::to_string(got.size()) + " outputs, reference " +
                       std::to_string(want.size()));
    return;
  }
  for (size_t k = 0; k < got.size(); ++k)
    compare(got[k], want[k], c.tol_for(want[k].dtype()), what + " output " + std::to_string(k), failures);
}

// ---- running

template <class Fn>
double median_us(int reps, Fn&& fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The prepare types of `n`'s inputs, from the values the graph gives them (feeds for graph inputs).
std::vector<PrepareInput> prepare_inputs(const Built& b, const Node& n, std::vector<const Tensor*>& tensors) {
  std::vector<PrepareInput> prep;
  tensors.clear();
  for (const Value* v : n.inputs()) {
    PrepareInput p;
    const Tensor* t = nullptr;
    if (v) {
      if (v->is_constant()) {
        t = &v->constant();
      } else {
        auto it = std::find(b.g->inputs().begin(), b.g->inputs().end(), v);
        CUVIL_CHECK(it != b.g->inputs().end(), "op harness: an input of ", n.describe(), " has no value");
        t = &b.feeds[size_t(it - b.g->inputs().begin())];
      }
      p.present = true;
      p.dtype = t->dtype();
      p.shape = t->shape();
      if (v->is_constant()) p.value = t;
    }
    prep.push_back(p);
    tensors.push_back(t);
  }
  return prep;
}

// Outputs as the runtime allocates them: at inferred static sizes, else left for the kernel to allocate.
std::vector<Tensor> fresh_outputs(const Node& n) {
  std::vector<Tensor> outs;
  for (const Value* v : n.outputs())
    outs.push_back(v->shape().is_static() ? Tensor::zeros(v->dtype(), v->shape().static_dims()) : Tensor());
  return outs;
}

// Prepares `n` with `prepare` and, when it claims the node, runs the kernel twice (a prepared kernel must run
// again) and compares the second run with `want`.
template <class Prepare>
void run_direct(const OpCase& c, const Built& b, const Node& n, Prepare&& prepare, const std::vector<Tensor>& want,
                const RunOptions& options, BackendResult& r) {
  std::vector<const Tensor*> tensors;
  std::vector<PrepareInput> prep = prepare_inputs(b, n, tensors);
  std::unique_ptr<PreparedKernel> k = prepare(n, prep);
  if (!k) return;
  r.claimed = true;
  r.impl = k->impl_name();
  std::vector<Tensor> outs;
  for (int pass = 0; pass < 2; ++pass) {
    outs = fresh_outputs(n);
    KernelContext ctx(n, std::vector<const Tensor*>(tensors), &outs, nullptr);
    k->run(ctx);
  }
  compare_all(c, outs, want, backend_name(r.backend), r.failures);
  // In place: output 0 over (a copy of) input i, as the memory plan reuses a dead input's buffer.
  if (r.backend == Backend::cpu) {
    for (size_t i : c.inplace) {
      std::vector<const Tensor*> ins = tensors;
      Tensor copy = ins.at(i)->clone();
      ins[i] = &copy;
      std::vector<Tensor> o = fresh_outputs(n);
      if (copy.nbytes() != o.at(0).nbytes()) {
        r.failures.push_back("in place on input " + std::to_string(i) + ": sizes differ (a wrong case)");
        continue;
      }
      o[0] = Tensor::view(o[0].dtype(), o[0].shape(), copy.raw());
      KernelContext ctx(n, std::move(ins), &o, nullptr);
      k->run(ctx);
      o[0] = o[0].clone();
      compare_all(c, o, want, "cpu in place on input " + std::to_string(i), r.failures);
    }
  }
  if (options.perf) {
    r.us = median_us(options.perf_reps, [&] {
      KernelContext ctx(n, std::vector<const Tensor*>(tensors), &outs, nullptr);
      k->run(ctx);
    });
  }
}

// A non-contiguous view of `t`'s values: every other element of a buffer twice as wide in the innermost dim.
struct StridedCopy {
  std::vector<uint8_t> bytes;
  StridedInput in;
};
StridedCopy strided_copy(const Tensor& t) {
  StridedCopy s;
  s.in.dtype = t.dtype();
  s.in.shape = t.shape();
  size_t es = dtype_size(t.dtype());
  size_t rank = t.shape().size();
  s.bytes.assign(std::max<size_t>(1, size_t(t.numel()) * 2) * es, 0xAB);
  s.in.strides.assign(rank, 0);
  int64_t stride = 2;
  for (size_t d = rank; d-- > 0;) {
    s.in.strides[d] = stride;
    stride *= t.shape()[d];
  }
  const auto* src = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(&s.bytes[size_t(i) * 2 * es], src + size_t(i) * es, es);
  s.in.data = s.bytes.data();
  return s;
}

void run_auto(const OpCase& c, const Built& b, const std::vector<Tensor>& want, const RunOptions& options,
              BackendResult& r) {
  Executor ex(b.g);
  std::vector<StridedCopy> copies;
  bool strided = false;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].strided && b.feed_of[i] >= 0) strided = true;
  if (strided) {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (b.feed_of[i] < 0) continue;
      const Tensor& t = b.feeds[size_t(b.feed_of[i])];
      if (c.inputs[i].strided) {
        copies.push_back(strided_copy(t));
      } else {
        StridedCopy s;
        s.in.dtype = t.dtype();
        s.in.shape = t.shape();
        int64_t stride = 1;
        s.in.strides.assign(t.shape().size(), 0);
        for (size_t d = t.shape().size(); d-- > 0;) {
          s.in.strides[d] = stride;
          stride *= t.shape()[d];
        }
        s.in.data = t.raw();
        copies.push_back(std::move(s));
      }
    }
  }
  auto run = [&] {
    if (!strided) return ex.run(b.feeds);
    std::vector<StridedInput> ins;
    for (const StridedCopy& s : copies) ins.push_back(s.in);
    return ex.run_strided(ins);
  };
  r.claimed = true;
  std::vector<NodeTime> prof = ex.profile(b.feeds);
  for (const NodeTime& t : prof) r.impl += (r.impl.empty() ? "" : "+") + t.impl;
  compare_all(c, run(), want, "auto", r.failures);
  if (options.perf) r.us = median_us(options.perf_reps, run);
}

void run_generated(const OpCase& c, const std::vector<Tensor>& ins, const std::vector<Tensor>& want,
                   const RunOptions& options, BackendResult& r) {
  Built b = build(c, ins);  // a graph of its own: fusion rewrites it
  PassContext ctx;
  ctx.verify_each = true;
  run_pass(*create_pass("fuse-elementwise"), *b.g, ctx);
  // Forced on its own: only when the op became exactly one FusedKernel (nothing left to other backends).
  if (b.g->nodes().size() != 1 || b.g->nodes()[0]->op() != OpKind::FusedKernel) return;
  const Node& fk = *b.g->nodes()[0];
  run_direct(
      c, b, fk,
      [](const Node& n, const std::vector<PrepareInput>& prep) {
        return codegen::prepare_generated_kernel(n, prep, KernelOptions{});
      },
      want, options, r);
  if (r.claimed && r.impl.rfind("jit:", 0) != 0) r.failures.push_back("generated: ran " + r.impl + ", not jit code");
}

}  // namespace

std::vector<Tensor> make_inputs(const OpCase& c) {
  std::vector<Tensor> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(c.inputs[i].role == Input::Absent ? Tensor() : make_input(c.inputs[i], c.seed + uint32_t(i)));
  return ins;
}

std::vector<BackendResult> run_case(const OpCase& c, const RunOptions& options) {
  std::vector<BackendResult> results;
  BackendResult ref(Backend::ref);
  std::vector<Tensor> ins, want;
  Built b;
  try {
    ins = make_inputs(c);
    b = build(c, ins);
    ExecutorOptions eo;
    eo.kernels.fast = false;
    Executor ex(b.g, eo);
    want = ex.run(b.feeds);
    ref.claimed = true;
    ref.impl = "ref:" + std::string(op_name(c.op));
    if (options.perf) ref.us = median_us(options.perf_reps, [&] { ex.run(b.feeds); });
  } catch (const std::exception& e) {
    ref.failures.push_back(std::string("reference: ") + e.what());
  }
  bool ref_ok = ref.failures.empty();
  if (options.backends.empty() || options.backends.count(Backend::ref)) results.push_back(ref);
  else if (!ref_ok) results.push_back(ref);
  if (!ref_ok) return results;

  for (Backend be : kBackends) {
    if (be == Backend::ref || (!options.backends.empty() && !options.backends.count(be))) continue;
    BackendResult r(be);
    try {
      switch (be) {
        case Backend::generated: run_generated(c, ins, want, options, r); break;
        case Backend::cpu:
          run_direct(
              c, b, *b.node,
              [](const Node& n, const std::vector<PrepareInput>& prep) {
                auto k = cpu::prepare_matmul(n, prep);
                return k ? std::move(k) : cpu::prepare_cpu_kernel(n, prep);
              },
              want, options, r);
          break;
        case Backend::onednn:
          run_direct(
              c, b, *b.node,
              [](const Node& n, const std::vector<PrepareInput>& prep) {
                return onednn::prepare_onednn_kernel(n, prep, KernelOptions{});
              },
              want, options, r);
          break;
        case Backend::automatic: run_auto(c, b, want, options, r); break;
        case Backend::ref: break;
      }
    } catch (const std::exception& e) {
      r.failures.push_back(std::string(backend_name(be)) + ": " + e.what());
    }
    if (!r.claimed && c.must.count(be))
      r.failures.push_back(std::string(backend_name(be)) + ": has no kernel for this case, and the case needs one");
    results.push_back(std::move(r));
  }
  return results;
}

// ---- the families

void add_elementwise_cases(Cases& cs);
void add_reduction_cases(Cases& cs);
void add_tensor_cases(Cases& cs);
void add_nn_cases(Cases& cs);
void add_recurrent_cases(Cases& cs);
void add_control_cases(Cases& cs);
void add_text_cases(Cases& cs);
void add_fused_cases(Cases& cs);
void add_sampling_cases(Cases& cs);
void add_detection_cases(Cases& cs);
void add_signal_cases(Cases& cs);
void add_trees_cases(Cases& cs);
void add_strings_cases(Cases& cs);
void add_lookup_cases(Cases& cs);

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    Cases cs;
    add_elementwise_cases(cs);
    add_reduction_cases(cs);
    add_tensor_cases(cs);
    add_nn_cases(cs);
    add_recurrent_cases(cs);
    add_control_cases(cs);
    add_text_cases(cs);
    add_fused_cases(cs);
    add_sampling_cases(cs);
    add_detection_cases(cs);
    add_signal_cases(cs);
    add_trees_cases(cs);
    add_strings_cases(cs);
    add_lookup_cases(cs);
    return cs.all();
  }();
  return cases;
}

const std::map<OpKind, std::string>& exempt_ops() {
  // Each entry says why the op cannot be a one-node case here, and where it is tested instead.
  static const std::map<OpKind, std::string> exempt = {
      {OpKind::If, "control flow: its branches are regions (nested graphs); tests/unit/ref_control_test.cpp"},
      {OpKind::Loop, "control flow: its body is a region; tests/unit/ref_control_test.cpp, deep_graph_test.cpp"},
      {OpKind::Scan, "control flow: its body is a region; tests/unit/ref_control_test.cpp"},
      {OpKind::FusedKernel,
       "formed by fuse-elementwise around other ops; the `generated` backend runs every case through one"},
  };
  return exempt;
}

}  // namespace cuvil::optest
