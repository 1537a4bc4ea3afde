// Runs a graph with a static memory plan and kernels prepared per shape signature.
//
// Per shape signature (the values of the input symbols) the executor evaluates every intermediate value's
// symbolic size, plans one arena (liveness -> offsets, in-place reuse where the op allows it) and caches the plan
// together with each node's prepared kernel (oneDNN primitives, packed weights; see kernels/prepared_kernel.h)
// and, where they follow from the signature alone, its output dims, so a steady-state run does no shape work.
// Values whose size depends on data (NonZero, control flow) are allocated when produced and freed after their
// last use. Inputs are validated first: count, names, dtypes, ranks, static dims and consistent symbol values.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "codegen/kernel_code.h"
#include "kernels/prepared_kernel.h"
#include "support/error.h"

namespace cuvil {

struct RunStats {
  int64_t arena_bytes = 0;        // the planned arena of the last run
  int64_t planned_bytes = 0;      // sum of planned buffer sizes (what no reuse would cost)
  int64_t dynamic_bytes = 0;      // bytes newly allocated outside the arena in the last run (recycled ones not)
  int64_t inplace_reuses = 0;     // outputs that share their input's buffer
  int64_t plans_built = 0;        // shape signatures planned so far (again after an eviction)
  int64_t plans_cached = 0;       // plans held now (at most ExecutorOptions::max_plans)
  int64_t plan_evictions = 0;     // plans dropped to stay within max_plans
  int64_t kernel_evictions = 0;   // region kernels dropped to stay within max_region_kernels
  int64_t kernels_prepared = 0;   // kernels prepared so far (per node and shape, or once for shape-generic ones)
  int64_t staged_inputs = 0;      // non-contiguous inputs of the last run_strided, copied into the plan's buffers
};

// An input given as a view of the caller's memory that may be strided (a NumPy or torch slice, a window of a larger
// batch): `data` points at the element of index [0, 0, ...]; `strides` are in elements, one per dim, of any sign.
struct StridedInput {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  const void* data = nullptr;
};

// Time spent in one node's kernel (regions' nodes included, in execution order).
struct NodeTime {
  const Node* node;
  double ms;
  std::string impl;  // the kernel that ran: "onednn:brgconv:avx512_core", "cpu:softmax", "ref:Conv"
                    // (with " [bf16]" / " [fp32 (why)]" where a lower precision was asked)
  PrecisionDecision precision;  // what the kernel multiplies at and, where not what was asked, why
  std::string fallback;  // why a faster kernel was passed over (PreparedKernel::fallback); empty when none was
  // Entries of the nodes it ran inside (a fused body run op by op, a Loop's body), listed just before this one:
  // their time is part of this node's.
  size_t nested = 0;
  double start_ms = 0;  // when the kernel started, from the start of the profiled run
};

// Stops runs from another thread: after cancel(), every run watching this token throws RunCancelled at its next
// check (before each node, and before each Loop/Scan iteration, inside regions too). It stays cancelled, so runs
// that start later stop at once, until reset().
class CancelToken {
 public:
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }
  void reset() noexcept { cancelled_.store(false, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// A run stopped by its RunControl; the message names the node that was about to run (or the loop) and why.
class RunInterrupted : public Error {
 public:
  using Error::Error;
};
// ... because its CancelToken was cancelled.
class RunCancelled : public RunInterrupted {
 public:
  using RunInterrupted::RunInterrupted;
};
// ... because it ran past RunControl::timeout, or a loop past RunControl::max_loop_iterations.
class RunLimitExceeded : public RunInterrupted {
 public:
  using RunInterrupted::RunInterrupted;
};

// What a run watches besides its work, checked between nodes and between Loop/Scan iterations (regions
// included; a single kernel is never interrupted). Nothing set: one predictable branch per node. A token or a
// limit: a relaxed atomic load and/or a read of the coarse monotonic clock (a few ms resolution) per check.
struct RunControl {
  std::shared_ptr<CancelToken> cancel;  // cancel() from any thread stops the run (RunCancelled)
  // Iterations one execution of a Loop or Scan node may run; the next one throws RunLimitExceeded. 0: no limit.
  int64_t max_loop_iterations = 0;
  // Wall-clock time one run may take (from its start; RunLimitExceeded at the first check past it). 0: no limit.
  std::chrono::nanoseconds timeout{0};
  // Called on the running thread at checks at least `poll_interval` apart (the first one `poll_interval` after
  // the run starts); it stops the run by throwing, and that exception leaves run() as it is. The Python binding
  // uses it to turn a pending Ctrl-C into KeyboardInterrupt.
  std::function<void()> poll;
  std::chrono::nanoseconds poll_interval = std::chrono::milliseconds(20);
};

struct ExecutorOptions {
  KernelOptions kernels;  // fast kernels on (default) or reference only
  // Machine code for generated kernels (an artifact's), asked before the process's compiler; may be null.
  std::shared_ptr<codegen::KernelCodeSource> kernel_code;
  int threads = 0;        // threads for oneDNN and Cuvil's parallel loops; 0 = the machine's cores
  // Threads that prepare a plan's kernels at once (oneDNN's JIT, weight packing) before its first run; 0 =
  // `threads` (or CUVIL_PREPARE_THREADS when set), 1 = the running thread alone. The kernels are the same.
  int prepare_threads = 0;
  // Bounds that keep memory flat when many distinct shapes arrive: plans (arena layout, prepared kernels) per
  // shape signature, least recently used dropped first; and, per node inside regions, kernels per input shapes.
  size_t max_plans = 64;
  size_t max_region_kernels = 8;
  // Cancellation, limits and polling for every run (set_control changes it between runs).
  RunControl control;
};

// Not thread-safe: one run at a time per Executor (the Python layer keeps a pool of them).
class Executor {
 public:
  // `graph` must be shape-inferred (infer_shapes) and verified.
  explicit Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options = {});
  ~Executor();

  // Inputs in the graph's input order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Like run, but writes the outputs into the caller's tensors (each of the dtype and shape the run produces),
  // so a steady loop allocates nothing; ONNX Runtime's bound outputs do the same.
  void run_into(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  // Like run, for inputs that may be strided views: a contiguous view is used in place; a non-contiguous one is
  // copied once into a buffer its plan keeps for it (no allocation in steady state), then the run reads that.
  std::vector<Tensor> run_strided(const std::vector<StridedInput>& inputs);
  // Inputs by name; every graph input must be given.
  std::vector<Tensor> run_named(const std::map<std::string, Tensor>& inputs);

  // Plans the signature these input shapes give and prepares every kernel the signature fixes (oneDNN
  // primitives, packed weights), so the first run with such inputs only executes. Checks the shapes like run().
  void prepare(const std::vector<std::vector<int64_t>>& input_shapes);

  // Runs once and returns each kernel's time.
  std::vector<NodeTime> profile(const std::vector<Tensor>& inputs);

  const Graph& graph() const { return *graph_; }
  const RunStats& stats() const { return stats_; }
  const ExecutorOptions& options() const { return options_; }
  // Replaces options().control for the runs that follow (not during a run).
  void set_control(RunControl control);

 private:
  struct Impl;
  std::shared_ptr<const Graph> graph_;
  ExecutorOptions options_;
  std::unique_ptr<Impl> impl_;
  RunStats stats_;
};

// Checks `inputs` against the graph's declared inputs and returns the symbol bindings they imply.
SymbolBindings bind_inputs(const Graph& g, const std::vector<Tensor>& inputs);

}  // namespace cuvil
