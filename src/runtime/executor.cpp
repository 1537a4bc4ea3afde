#include "runtime/executor.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <list>
#include <new>
#include <system_error>
#include <thread>

#include <time.h>

#include "ir/op_schema.h"
#include "ir/verifier.h"
#include "kernels/workers.h"
#include "support/check_failed.h"
#include "support/huge_pages.h"
#include "support/log.h"
#include "runtime/kernel_selection.h"
#include "runtime/bf16_links.h"
#include "runtime/int8_links.h"
#include "runtime/memory_plan.h"
#include "runtime/run_error.h"
#include "runtime/strided_copy.h"

namespace cuvil {

#define CUVIL_CHECK_INPUT(cond, ...) \
  do {                               \
    if (!(cond)) throw InputError(str_cat(__VA_ARGS__)); \
  } while (0)

namespace {

// A kernel's name in profiles, with its precision decision where one was made (a lower precision asked):
// "onednn:brg:avx512_core_bf16 [bf16]", "cpu:softmax [fp32 (numerically sensitive: f32)]".
std::string profile_name(const PreparedKernel& k) {
  if (k.precision.precision == Precision::fp32 && k.precision.reason.empty()) return k.impl_name();
  return k.impl_name() + " [" + k.precision.str() + "]";
}

// Checks the inputs' dtypes and shapes against the graph's declared inputs; returns the symbol values they imply.
SymbolBindings bind_types(const Graph& g, const std::vector<DType>& dtypes,
                          const std::vector<const std::vector<int64_t>*>& shapes) {
  const auto& decl = g.inputs();
  CUVIL_CHECK_INPUT(shapes.size() == decl.size(), "expected ", decl.size(), " inputs, got ", shapes.size());
  SymbolBindings b;
  for (size_t i = 0; i < decl.size(); ++i) {
    const Value* v = decl[i];
    const std::vector<int64_t>& t = *shapes[i];
    CUVIL_CHECK_INPUT(dtypes[i] == v->dtype(), "input '", v->name(), "': expected dtype ", dtype_name(v->dtype()),
                ", got ", dtype_name(dtypes[i]));
    const Shape& s = v->shape();
    if (!s.rank_known()) continue;
    CUVIL_CHECK_INPUT(t.size() == s.rank(), "input '", v->name(), "': expected rank ", s.rank(), " (shape ", s.str(),
                "), got rank ", t.size(), " (shape ", shape_str(t), ")");
    for (size_t d = 0; d < s.rank(); ++d) {
      const Dim& dim = s[d];
      int64_t got = t[d];
      if (dim.is_const()) {
        CUVIL_CHECK_INPUT(dim.value() == got, "input '", v->name(), "': dim ", d, " must be ", dim.value(), " (shape ",
                    s.str(), "), got ", got, " (shape ", shape_str(t), ")");
      } else if (dim.is_symbol()) {
        auto [it, fresh] = b.emplace(dim.symbol_name(), got);
        CUVIL_CHECK_INPUT(fresh || it->second == got, "input '", v->name(), "': dim ", d, " is '", dim.symbol_name(),
                    "' = ", it->second, " from an earlier input, but this input has ", got);
      }
    }
  }
  // Expression dims (rare on inputs) must agree with the symbols bound above.
  for (size_t i = 0; i < decl.size(); ++i) {
    const Shape& s = decl[i]->shape();
    if (!s.rank_known()) continue;
    for (size_t d = 0; d < s.rank(); ++d) {
      if (s[d].is_const() || s[d].is_symbol()) continue;
      auto want = s[d].eval(b);
      CUVIL_CHECK_INPUT(!want || *want == (*shapes[i])[d], "input '", decl[i]->name(), "': dim ", d, " must be ",
                  s[d].str(), " = ", want.value_or(0), ", got ", (*shapes[i])[d]);
    }
  }
  return b;
}

}  // namespace

SymbolBindings bind_inputs(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<DType> dtypes;
  std::vector<const std::vector<int64_t>*> shapes;
  for (const Tensor& t : inputs) {
    dtypes.push_back(t.dtype());
    shapes.push_back(&t.shape());
  }
  return bind_types(g, dtypes, shapes);
}

namespace {

// A node's kernel for one set of input types and, when its inference did not read input contents, its output
// dims: a loop body's nodes then do no shape work after the first iteration.
struct NodeCacheEntry {
  std::vector<DType> dtypes;
  std::vector<std::vector<int64_t>> shapes;  // of the inputs; an absent input has dtype undefined, no dims
  std::vector<bool> present;
  std::unique_ptr<PreparedKernel> kernel;
  bool dims_known = false;
  std::vector<std::vector<int64_t>> out_dims;
  // By output: buffers that earlier runs of the node wrote, reused once nothing else holds them (the value was
  // consumed), so a loop body in its steady state allocates nothing. Two per output cover a value carried into
  // the next iteration while the node writes its successor; a value kept longer (a scan output) gets a fresh one.
  std::vector<std::array<Tensor, 2>> recycled;

  bool matches(const std::vector<const Tensor*>& ins) const {
    if (ins.size() != shapes.size()) return false;
    for (size_t k = 0; k < ins.size(); ++k) {
      if (bool(ins[k]) != present[k]) return false;
      if (ins[k] && (ins[k]->dtype() != dtypes[k] || ins[k]->shape() != shapes[k])) return false;
    }
    return true;
  }
  explicit NodeCacheEntry(const std::vector<const Tensor*>& ins) {
    for (const Tensor* t : ins) {
      present.push_back(t != nullptr);
      dtypes.push_back(t ? t->dtype() : DType::f32);
      shapes.push_back(t ? t->shape() : std::vector<int64_t>{});
    }
  }
};

// Control flow runs its regions and hands their results over, so its outputs are neither planned nor inferred
// ahead; a FusedKernel's body is only its kernel's definition, so the node is planned like any other.
bool runs_regions(const Node& n) { return !n.regions().empty() && n.op() != OpKind::FusedKernel; }

// Static facts about one graph (the main graph or a region), computed once.
struct Program {
  const Graph* graph;
  std::vector<std::vector<size_t>> frees_after;  // values (by id) whose last use is node i
  std::vector<int> last_use;                      // by value id: last node index using it (-1: none)
  std::vector<bool> is_output;                    // by value id
  std::vector<int> output_index;                  // by value id: its first position among the graph outputs, or -1
  std::vector<bool> arena_eligible;               // by value id: node output the plan may place in the arena
  std::vector<bool> region_runner;                // by node index: runs_regions(node), asked once (attrs are a map)
  // What nodes run without a plan (inside regions, or with shapes that depend on data) keep per input types, by
  // node index, most recently used first, at most ExecutorOptions::max_region_kernels each.
  std::vector<std::vector<NodeCacheEntry>> node_cache;
  // By node index: the node's shape-generic kernel (prepare_shape_generic_kernel), shared by every plan and
  // cache entry; tried once.
  std::vector<std::unique_ptr<PreparedKernel>> generic;
  std::vector<bool> generic_tried;
  // By output position: the graph's own value, not yielded again later, so the result may take it from the frame.
  std::vector<bool> output_movable;
  // By value id: recycled buffers (see recycled_or_new) of values a plan sizes but leaves out of the arena — the
  // graph's outputs (reused once the caller has let go of an earlier result) and outputs nothing reads.
  std::vector<std::array<Tensor, 2>> outside_arena;
  // Working storage of an execution, kept so that a loop body's next iteration allocates none of it: the frame's
  // values (dropped when the execution ends) and one node's input and output lists. A graph never runs inside
  // itself, so one set per graph suffices; `busy` checks that.
  std::vector<Tensor> values;
  std::vector<const Tensor*> ins;
  std::vector<Tensor> outs;
  bool busy = false;

  explicit Program(const Graph& g) : graph(&g) {
    size_t nv = g.num_values();
    last_use.assign(nv, -1);
    is_output.assign(nv, false);
    output_index.assign(nv, -1);
    arena_eligible.assign(nv, false);
    const auto& nodes = g.nodes();
    frees_after.resize(nodes.size());
    region_runner.resize(nodes.size());
    // A region may yield a value of an enclosing graph (or a constant of its own): only this graph's count here.
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      Value* v = g.outputs()[j];
      if (v->graph() != &g) continue;
      is_output[size_t(v->id())] = true;
      if (output_index[size_t(v->id())] < 0) output_index[size_t(v->id())] = int(j);
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      for (Value* v : n.inputs())
        if (v && v->graph() == &g) last_use[size_t(v->id())] = int(i);
      // A region's uses of this graph's values keep them alive until the node that owns the region finishes.
      for (Graph* r : n.regions()) mark_captures(*r, g, int(i));
      region_runner[i] = runs_regions(n);
      for (Value* v : n.outputs()) arena_eligible[size_t(v->id())] = !region_runner[i] && !is_output[size_t(v->id())];
    }
    for (size_t id = 0; id < nv; ++id)
      if (last_use[id] >= 0 && !is_output[id]) frees_after[size_t(last_use[id])].push_back(id);
    node_cache.resize(nodes.size());
    generic.resize(nodes.size());
    generic_tried.assign(nodes.size(), false);
    const auto& outs = g.outputs();
    for (size_t j = 0; j < outs.size(); ++j)
      output_movable.push_back(outs[j]->graph() == &g && std::find(outs.begin() + std::ptrdiff_t(j) + 1, outs.end(),
                                                                   outs[j]) == outs.end());
  }

  // Values of `owner` read in `top` or in regions inside it (any depth: an explicit stack, no recursion).
  void mark_captures(const Graph& top, const Graph& owner, int node_index) {
    auto use = [&](const Value* v) {
      if (v && v->graph() == &owner) last_use[size_t(v->id())] = std::max(last_use[size_t(v->id())], node_index);
    };
    std::vector<const Graph*> pending{&top};
    while (!pending.empty()) {
      const Graph& region = *pending.back();
      pending.pop_back();
      for (auto& n : region.nodes()) {
        for (Value* v : n->inputs()) use(v);
        for (Graph* r : n->regions()) pending.push_back(r);
      }
      for (Value* v : region.outputs()) use(v);
    }
  }
};

// Everything decided once per shape signature: the arena layout, each node's prepared kernel and, for nodes
// whose shapes follow from the signature alone, their output dims.
struct Plan {
  std::vector<int64_t> offset;  // by value id; -1: not in the arena
  std::vector<int64_t> bytes;   // by value id
  int64_t arena_bytes = 0;
  int64_t planned_bytes = 0;
  int64_t inplace = 0;
  // By node index. `fixed_shapes`: every input and output shape of the node evaluates under the signature, so
  // the output dims found by the first run's inference (which also checked them) hold for every later run.
  std::vector<bool> fixed_shapes;
  std::vector<std::vector<std::vector<int64_t>>> out_dims;  // filled by the first run, when fixed_shapes
  std::vector<std::unique_ptr<PreparedKernel>> kernels;      // prepared by the first run
  std::vector<Tensor> staging;  // by input index: where run_strided makes a non-contiguous input contiguous
  bool ahead = false;           // prepare_ahead has prepared the kernels
};

// What a kernel is prepared for about input value v at these dims; constants come with their contents.
PrepareInput prepare_input(const Value& v, std::vector<int64_t> dims) {
  return {v.dtype(), std::move(dims), v.is_constant() ? &v.constant() : nullptr, true};
}

bool shape_fixed_by(const Value* v, const SymbolBindings& b) {
  if (!v->shape().rank_known()) return false;
  for (const Dim& d : v->shape().dims())
    if (!d.eval(b)) return false;
  return true;
}

Plan build_plan(const Program& p, const SymbolBindings& b) {
  const Graph& g = *p.graph;
  Plan plan;
  size_t nv = g.num_values();
  plan.offset.assign(nv, -1);
  plan.bytes.assign(nv, 0);
  // Each arena value maps to a buffer; a buffer's last use is the latest of all values in it.
  std::vector<int> buffer_of(nv, -1);
  std::vector<BufferRequest> buffers;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    const OpSchema& schema = op_schema(n.op());
    for (Value* out : n.outputs()) {
      size_t id = size_t(out->id());
      if (!p.arena_eligible[id] || !out->shape().rank_known() || p.last_use[id] < 0) continue;
      auto numel = out->shape().numel().eval(b);
      if (!numel) continue;  // data-dependent size: allocated when produced
      int64_t bytes = *numel * int64_t(dtype_size(out->dtype()));
      plan.bytes[id] = bytes;
      // The input of an (input, output) pair whose buffer `out` may take: in this graph's arena, the same size.
      auto pair_input = [&](std::pair<int, int> pair) -> Value* {
        if (n.output(size_t(pair.second)) != out) return nullptr;
        Value* in = n.input(size_t(pair.first));
        if (!in || in->graph() != &g || buffer_of[size_t(in->id())] < 0) return nullptr;
        return plan.bytes[size_t(in->id())] == bytes ? in : nullptr;
      };
      // Written in place, element k of the output overwrites element k of the input: only when the input is not
      // broadcast and its elements are as wide (the same bytes are not enough: Less(i64[8], i64[2, 1]) -> bool[2, 8]
      // is 16 bytes each way, and writing it over the [2, 1] operand while reading it gave wrong answers).
      auto same_elements = [&](const Value* in) {
        return dtype_size(in->dtype()) == dtype_size(out->dtype()) && in->shape().numel().eval(b) == numel;
      };
      int buf = -1;
      // A view (a reshape) shares its input's buffer outright: the buffer then lives until both are read.
      for (auto pair : schema.views)
        if (Value* in = pair_input(pair); in && buf < 0) buf = buffer_of[size_t(in->id())];
      // An output written in place takes the buffer of an input that dies here, unless another value still needs
      // that buffer or another input of the node views it (the kernel may read that one out of element order).
      for (auto pair : schema.inplace) {
        Value* in = pair_input(pair);
        if (buf >= 0 || !in || p.last_use[size_t(in->id())] != int(i) || !same_elements(in)) continue;
        int cand = buffer_of[size_t(in->id())];
        if (buffers[size_t(cand)].last != int(i)) continue;
        bool viewed = false;
        for (Value* other : n.inputs())
          viewed = viewed || (other && other != in && other->graph() == &g && buffer_of[size_t(other->id())] == cand);
        if (!viewed) buf = cand;
      }
      if (buf >= 0) {
        ++plan.inplace;
      } else {
        buf = int(buffers.size());
        buffers.push_back({bytes, int(i), int(i)});
      }
      buffer_of[id] = buf;
      buffers[size_t(buf)].last = std::max(buffers[size_t(buf)].last, p.last_use[id]);
    }
  }
  plan.fixed_shapes.assign(nodes.size(), false);
  plan.out_dims.resize(nodes.size());
  plan.kernels.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    bool fixed = !runs_regions(n);
    for (Value* v : n.inputs()) fixed = fixed && (!v || shape_fixed_by(v, b));
    for (Value* v : n.outputs()) fixed = fixed && shape_fixed_by(v, b);
    plan.fixed_shapes[i] = fixed;
  }
  MemoryPlan mp = plan_memory(buffers);
  for (size_t id = 0; id < nv; ++id)
    if (buffer_of[id] >= 0) plan.offset[id] = mp.offsets[size_t(buffer_of[id])];
  plan.arena_bytes = mp.arena_bytes;
  plan.planned_bytes = mp.total_bytes;
  return plan;
}

std::string signature_key(const SymbolBindings& b) {
  std::map<std::string, int64_t> sorted(b.begin(), b.end());
  std::string k;
  for (auto& [s, v] : sorted) k += s + "=" + std::to_string(v) + ";";
  return k;
}

}  // namespace

// The monotonic clock at its coarse resolution (the last tick, a few ms): read from the vDSO without the
// time-stamp counter, the cheapest clock there is, precise enough for deadlines and polling.
int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One run's RunControl, armed when the run starts. A run without one pays one predictable branch per check.
struct Watch {
  const RunControl* control = nullptr;
  bool active = false;  // anything to check
  bool timed = false;   // a deadline or a poll: the clock is read at each check
  int64_t deadline_ns = std::numeric_limits<int64_t>::max();
  int64_t next_poll_ns = std::numeric_limits<int64_t>::max();

  void arm(const RunControl& c) {
    control = &c;
    int64_t now = c.timeout.count() > 0 || c.poll ? coarse_now_ns() : 0;
    deadline_ns = c.timeout.count() > 0 ? now + c.timeout.count() : std::numeric_limits<int64_t>::max();
    next_poll_ns = c.poll ? now + std::max<int64_t>(c.poll_interval.count(), 0) : std::numeric_limits<int64_t>::max();
    timed = c.timeout.count() > 0 || bool(c.poll);
    active = timed || c.cancel != nullptr;
  }
  // Before node n runs (or loop n's next iteration).
  void check(const Node& n) {
    if (active) [[unlikely]] check_now(n);
  }
  [[gnu::noinline]] void check_now(const Node& n) {
    if (control->cancel && control->cancel->cancelled())
      throw RunCancelled(str_cat(n.describe(), ": the run was cancelled"));
    if (!timed) return;
    int64_t now = coarse_now_ns();
    if (now >= deadline_ns)
      throw RunLimitExceeded(str_cat(n.describe(), ": the run exceeded its time limit of ",
                                     double(control->timeout.count()) / 1e6, " ms (RunControl::timeout)"));
    if (now >= next_poll_ns) {
      next_poll_ns = now + std::max<int64_t>(control->poll_interval.count(), 0);
      control->poll();
    }
  }
};

struct Executor::Impl : RegionRunner {
  // Values of one graph during one execution; regions look up captured values through `parent`.
  struct Frame {
    const Graph* graph;
    std::vector<Tensor>& values;
    Frame* parent;
  };

  const Graph* graph = nullptr;
  RunStats* stats;
  const ExecutorOptions* options;

  // The plan of signature b: cached (and moved to the front of the LRU) or built, evicting the oldest.
  Plan& plan_for(const SymbolBindings& b);
  // Runs the main graph on `inputs` (of plan's signature).
  std::vector<Tensor> run_with_plan(Plan& plan, const std::vector<Tensor>& inputs);

  // Prepares the kernel of every node whose input types the signature fixes (oneDNN's JIT, packing constant
  // weights), on up to options->prepare_threads threads at once (see ExecutorOptions):
  // each preparation is independent and writes its own slot, so the kernels are the ones a serial pass makes
  // (each thread asks OpenMP for the run's count first: oneDNN fixes a primitive's split when it is created).
  // A preparation that fails leaves its slot empty; with `rethrow` the first failure in node order is thrown once
  // all are done, else the run prepares that node itself and reports the error as it would have.
  void prepare_kernels(const Graph& g, Plan& plan, const SymbolBindings& b, bool rethrow) {
    const auto& nodes = g.nodes();
    std::vector<size_t> todo;
    std::vector<std::vector<PrepareInput>> pins;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      if (!plan.fixed_shapes[i] || plan.kernels[i] || shape_generic(program(g), i)) continue;
      std::vector<PrepareInput> pin(n.num_inputs());
      for (size_t k = 0; k < n.num_inputs(); ++k) {
        if (!n.input(k)) continue;
        std::vector<int64_t> dims;
        for (const Dim& d : n.input(k)->shape().dims()) dims.push_back(*d.eval(b));
        pin[k] = prepare_input(*n.input(k), std::move(dims));
      }
      todo.push_back(i);
      pins.push_back(std::move(pin));
    }
    std::vector<std::exception_ptr> failed(todo.size());
    std::atomic<size_t> next{0};
    const int threads = options->threads;
    auto work = [&] {
      if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
      for (size_t j; (j = next.fetch_add(1)) < todo.size();) {
        try {
          plan.kernels[todo[j]] = prepare_kernel(*nodes[todo[j]], pins[j], options->kernels, options->kernel_code);
        } catch (...) {
          failed[j] = std::current_exception();
        }
      }
    };
    size_t helpers = std::min<size_t>(size_t(prepare_threads() - 1), todo.size() / 2);
    std::vector<std::thread> pool;
    for (size_t t = 0; t < helpers; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no thread to be had: the others (this one at least) do the work
      }
    }
    work();
    for (std::thread& t : pool) t.join();
    for (size_t j = 0; j < todo.size(); ++j) {
      if (plan.kernels[todo[j]]) ++stats->kernels_prepared;
      else if (rethrow && failed[j]) std::rethrow_exception(failed[j]);
    }
  }
  int prepare_threads() const {
    static const int from_env = [] {
      const char* e = std::getenv("CUVIL_PREPARE_THREADS");
      return e && *e ? std::atoi(e) : 0;
    }();
    int n = options->prepare_threads > 0 ? options->prepare_threads : from_env > 0 ? from_env : options->threads;
    return std::clamp(n, 1, 64);
  }
  // Before the first run of a plan: its kernels, prepared ahead (see prepare_kernels), not one by one as the
  // run reaches them, so that several threads share oneDNN's JIT and the weight packing.
  void prepare_ahead(Plan& plan, const SymbolBindings& b) {
    if (plan.ahead) return;
    plan.ahead = true;
    bool timed = log_enabled("time");
    auto [wall0, cpu0] = timed ? wall_and_cpu_ms() : std::pair<double, double>{};
    int64_t before = stats->kernels_prepared;
    prepare_kernels(*graph, plan, b, /*rethrow=*/false);
    if (timed) {  // (CUVIL_LOG=time: where a cold start goes)
      auto [wall1, cpu1] = wall_and_cpu_ms();
      log_line("time", str_cat("prepared ", stats->kernels_prepared - before, " kernels ahead on ",
                               prepare_threads(), " thread(s): ", fixed_ms(wall1 - wall0), " ms wall, ",
                               fixed_ms(cpu1 - cpu0), " ms CPU (process)"));
    }
  }
  Watch watch;  // the running run's control
  int region_depth = 0;  // regions being run inside one another now
  std::vector<NodeTime>* profile = nullptr;  // set while profiling
  std::chrono::steady_clock::time_point profile_start;  // when the profiled run started
  const std::vector<Tensor>* bound = nullptr;  // run_into: the caller's buffers for the main graph's outputs
  std::unordered_map<const Graph*, std::unique_ptr<Program>> programs;
  // Plans of the main graph by signature, most recently used first in `lru`.
  std::list<std::pair<std::string, Plan>> lru;
  std::unordered_map<std::string, std::list<std::pair<std::string, Plan>>::iterator> plans;
  struct AlignedDelete {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  static uint8_t* allocate_arena(size_t bytes) {
    static_assert(kTensorAlignment <= 64, "aligned_alloc_huge aligns small blocks to 64 bytes");
    return static_cast<uint8_t*>(aligned_alloc_huge(bytes, 2 * kHugePage));
  }
  std::unique_ptr<uint8_t, AlignedDelete> arena_storage;
  size_t arena_capacity = 0;
  Frame* current = nullptr;

  Program& program(const Graph& g) {
    auto& p = programs[&g];
    if (!p) p = std::make_unique<Program>(g);
    return *p;
  }

  static Tensor* find(Frame* f, const Value* v) {
    for (; f; f = f->parent)
      if (f->graph == v->graph()) return &f->values[size_t(v->id())];
    return nullptr;
  }

  // The arena for a plan of `bytes`: shared by every plan (one runs at a time), grown by half again when too
  // small so that a run of ever larger shapes reallocates rarely, and never cleared (every kernel writes its
  // outputs). Large arenas ask for transparent huge pages: the first run at a large new shape otherwise spends
  // much of its time faulting in 4 KB pages.
  uint8_t* arena(int64_t bytes) {
    size_t need = size_t(bytes);
    if (!arena_storage || arena_capacity < need) {
      size_t cap = std::max(need, arena_capacity + arena_capacity / 2);
      arena_storage.reset();  // free first: the old contents are dead
      arena_storage.reset(allocate_arena(cap));
      arena_capacity = cap;
    }
    return arena_storage.get();
  }

  // Runs graph g (the main graph with its plan and arena, or a region without) and puts its results in `result`.
  // Results are owned by the caller (never a constant, an input or the arena) except the first `borrowed`, which
  // the caller only reads before its next call (a loop's condition).
  void execute(const Graph& g, const std::vector<Tensor>& inputs, Frame* parent, Plan* plan, uint8_t* arena_base,
               std::vector<Tensor>& result, size_t borrowed = 0) {
    Program& p = program(g);
    CUVIL_ASSERT(!p.busy, "graph '", g.name(), "' runs inside itself");
    // Marks the program's storage in use and drops the frame's values when done, also when a kernel throws: they
    // may hold the caller's inputs, and buffers are only recycled once nothing holds them.
    struct Release {
      Program& p;
      ~Release() {
        for (Tensor& t : p.values) t = Tensor();
        p.busy = false;
      }
    } release{p};
    p.busy = true;
    p.values.resize(g.num_values());
    Frame frame{&g, p.values, parent};
    for (size_t i = 0; i < inputs.size(); ++i) frame.values[size_t(g.inputs()[i]->id())] = inputs[i];
    for (Value* c : g.constants()) frame.values[size_t(c->id())] = c->constant();
    // Regions run by this graph's kernels capture from this frame; restored even when a kernel throws.
    struct Restore {
      Frame*& slot;
      Frame* saved;
      ~Restore() { slot = saved; }
    } restore{current, current};
    current = &frame;
    const auto& nodes = g.nodes();
    int64_t fresh = 0;
    std::vector<const Tensor*>& ins = p.ins;
    std::vector<Tensor>& outs = p.outs;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      watch.check(n);
      ins.clear();
      for (Value* v : n.inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        Tensor* t = find(&frame, v);
        CUVIL_ASSERT(t && t->defined(), n.describe(), ": input '", v->name(), "' has no value");
        ins.push_back(t);
      }
      outs.assign(n.num_outputs(), Tensor());  // fresh: a moved-from Tensor keeps its data pointer
      bool planned = plan && plan->fixed_shapes[i];
      NodeCacheEntry* entry = planned ? nullptr : &cache_entry(p, i, ins);
      if (!p.region_runner[i]) allocate_outputs(p, n, i, ins, outs, plan, entry, arena_base, fresh);
      PreparedKernel* generic = shape_generic(p, i);
      std::unique_ptr<PreparedKernel>& slot = planned ? plan->kernels[i] : entry->kernel;
      PreparedKernel* kernel = generic ? generic : slot.get();
      // A kernel's failure (its Error) leaves as a RunError naming the node, its kernel and its source; one from
      // inside a FusedKernel's body gains the fused kernel. Interruptions, input errors, the model's own checks
      // and internal errors leave as they are.
      size_t profiled = profile ? profile->size() : 0;
      auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      try {
        if (!kernel) {
          // oneDNN fixes a primitive's thread split when it is created: prepare for the full count
          if (omp_get_max_threads() != options->threads) omp_set_num_threads(options->threads);
          kernel = (slot = prepare(n, ins)).get();
        }
        // no more threads than the machine has free now (kernels/workers.h, "Threads under load")
        int free_threads = cpu::threads_free(options->threads);
        if (omp_get_max_threads() != free_threads) omp_set_num_threads(free_threads);
        KernelContext ctx(n, ins, &outs, this);
        kernel->run(ctx);
      } catch (const RunError& e) {
        if (n.op() == OpKind::FusedKernel && e.fused().empty()) throw e.in_fused(n, kernel ? kernel->impl_name() : "");
        throw;
      } catch (const RunInterrupted&) {
        throw;
      } catch (const InputError&) {
        throw;
      } catch (const InternalError&) {
        throw;
      } catch (const CheckFailed&) {
        throw;
      } catch (const Error& e) {
        throw RunError::at(n, kernel ? kernel->impl_name() : "", e.what());
      }
      if (profile) {
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        // (a fused body run op by op lists its nodes first, then this node's whole time)
        double start = std::chrono::duration<double, std::milli>(t0 - profile_start).count();
        profile->push_back({&n, ms, profile_name(*kernel), kernel->precision, kernel->fallback(), profile->size() - profiled,
                            start});
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        CUVIL_ASSERT(outs[k].defined(), n.describe(), ": kernel left output ", k, " unset");
        // a string output may point at its inputs' text, which is freed below (Tensor::strings)
        if (outs[k].dtype() == DType::str) outs[k] = outs[k].with_own_strings();
        frame.values[size_t(n.output(k)->id())] = std::move(outs[k]);
      }
      for (size_t id : p.frees_after[i]) frame.values[id] = Tensor();
    }
    result.clear();
    const auto& graph_outputs = g.outputs();
    for (size_t j = 0; j < graph_outputs.size(); ++j) {
      const Value* v = graph_outputs[j];
      Tensor* t = find(&frame, v);
      CUVIL_ASSERT(t && t->defined(), "graph output '", v->name(), "' has no value");
      // Outputs never alias constants, inputs or the arena: the caller owns them.
      bool owned = j < borrowed || (v->graph() == &g && v->producer() && !(plan && plan->offset[size_t(v->id())] >= 0));
      // A value listed twice as an output is returned as separate tensors: the caller may write one of them.
      if (!owned || !p.output_movable[j]) result.push_back(t->clone());
      else result.push_back(std::move(*t));
    }
  }

  // Node i's shape-generic kernel, made on first use; null when it has none.
  PreparedKernel* shape_generic(Program& p, size_t i) {
    if (!p.generic_tried[i]) {
      p.generic_tried[i] = true;
      p.generic[i] = prepare_shape_generic_kernel(*p.graph->nodes()[i], options->kernels);
      stats->kernels_prepared += p.generic[i] != nullptr;
    }
    return p.generic[i].get();
  }

  // The cache entry of node i for these input types: found (and moved to the front) or made, evicting the least
  // recently used entry beyond max_region_kernels.
  NodeCacheEntry& cache_entry(Program& p, size_t i, const std::vector<const Tensor*>& ins) {
    auto& cache = p.node_cache[i];
    auto hit = std::find_if(cache.begin(), cache.end(), [&](const NodeCacheEntry& e) { return e.matches(ins); });
    if (hit == cache.end()) {
      if (cache.size() >= std::max<size_t>(options->max_region_kernels, 1)) {
        cache.pop_back();
        ++stats->kernel_evictions;
      }
      cache.emplace(cache.begin(), ins);
    } else if (hit != cache.begin()) {
      std::rotate(cache.begin(), hit, hit + 1);  // most recently used first
    }
    return cache.front();
  }

  std::unique_ptr<PreparedKernel> prepare(const Node& n, const std::vector<const Tensor*>& ins) {
    std::vector<PrepareInput> pin(ins.size());
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k]) pin[k] = prepare_input(*n.input(k), ins[k]->shape());
    ++stats->kernels_prepared;
    return prepare_kernel(n, pin, options->kernels, options->kernel_code);
  }

  // Allocates each output of node n (index i) that its shape inference can size: in the arena when the plan
  // placed it there, else on the heap. Outputs inference cannot size are left for the kernel to allocate. Nodes
  // whose shapes the signature fixes run inference once per plan, others once per input types unless their
  // inference reads input contents; later runs reuse the dims.
  void allocate_outputs(Program& p, const Node& n, size_t i, const std::vector<const Tensor*>& ins,
                        std::vector<Tensor>& outs, Plan* plan, NodeCacheEntry* entry, uint8_t* arena_base,
                        int64_t& fresh) {
    bool planned = plan && plan->fixed_shapes[i];
    const std::vector<std::vector<int64_t>>* known = nullptr;
    if (planned && !plan->out_dims[i].empty()) known = &plan->out_dims[i];
    if (entry && entry->dims_known) known = &entry->out_dims;
    std::vector<std::vector<int64_t>> dims;
    std::vector<bool> sized(outs.size(), known != nullptr);
    if (!known) {
      std::vector<TensorType> in_types;
      in_types.reserve(ins.size());
      for (const Tensor* t : ins) in_types.push_back(t ? TensorType{t->dtype(), Shape::of(t->shape())} : TensorType{});
      std::vector<const TensorType*> type_ptrs;
      for (size_t k = 0; k < ins.size(); ++k) type_ptrs.push_back(ins[k] ? &in_types[k] : nullptr);
      InferContext ctx(n, type_ptrs, ins, {}, &fresh);
      op_schema(n.op()).infer(ctx);
      dims.resize(outs.size());
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!ctx.output_set(k)) continue;
        const TensorType& t = ctx.output_types()[k];
        if (!t.shape.is_static()) continue;  // data-dependent: the kernel allocates it
        CUVIL_ASSERT(t.dtype == n.output(k)->dtype(), n.describe(), ": output ", k, " has dtype ",
                    dtype_name(t.dtype), " at run time but ", dtype_name(n.output(k)->dtype()), " in the IR");
        dims[k] = t.shape.static_dims();
        sized[k] = true;
      }
      bool all_sized = std::all_of(sized.begin(), sized.end(), [](bool b) { return b; });
      if (planned && all_sized) plan->out_dims[i] = dims;
      if (entry && all_sized && !ctx.read_values()) {
        entry->out_dims = dims;
        entry->dims_known = true;
      }
      known = &dims;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!sized[k]) continue;
      Value* v = n.output(k);
      DType dt = v->dtype();
      int64_t off = plan ? plan->offset[size_t(v->id())] : -1;
      int j = bound && p.graph == graph ? p.output_index[size_t(v->id())] : -1;
      if (j >= 0 && (*bound)[size_t(j)].dtype() == dt && (*bound)[size_t(j)].shape() == (*known)[k]) {
        outs[k] = Tensor::view(dt, (*known)[k], const_cast<void*>((*bound)[size_t(j)].raw()));
      } else if (off >= 0) {
        Tensor view = Tensor::view(dt, (*known)[k], arena_base + off);
        CUVIL_ASSERT(int64_t(view.nbytes()) == plan->bytes[size_t(v->id())], n.describe(),
                     ": output ", k, " is ", view.type_str(), " at run time but the plan sized it ",
                    plan->bytes[size_t(v->id())], " bytes from ", v->type().str());
        outs[k] = view;
      } else if (entry) {
        if (entry->recycled.size() <= k) entry->recycled.resize(k + 1);
        outs[k] = recycled_or_new(entry->recycled[k], dt, (*known)[k], kMaxRecycledBytes);
      } else {
        auto& slots = p.outside_arena;
        if (slots.size() < p.graph->num_values()) slots.resize(p.graph->num_values());
        outs[k] = recycled_or_new(slots[size_t(v->id())], dt, (*known)[k], std::numeric_limits<int64_t>::max());
      }
    }
  }

  // A buffer for a value allocated outside the arena: one of its two recycled `slots` that nothing else holds
  // any more, or a new one. The slots keep the two most recent buffers (replacing one nothing holds, else the
  // older), so a caller that keeps last call's result or a loop that stacks every iteration's value costs one
  // allocation per value and the steady state returns to none. Buffers above `max_kept` bytes are not kept.
  // Region nodes keep theirs up to kMaxRecycledBytes: the work on a larger one dwarfs its allocation, and keeping
  // every large intermediate of a branch would hold on to much memory. A plan's values outside the arena (graph
  // outputs) are kept whatever their size: a fresh large buffer costs its page faults on every call.
  static constexpr int64_t kMaxRecycledBytes = int64_t(1) << 20;
  Tensor recycled_or_new(std::array<Tensor, 2>& slots, DType dt, const std::vector<int64_t>& dims, int64_t max_kept) {
    auto unheld = [](const Tensor& t) { return !t.defined() || t.sole_owner(); };
    for (Tensor& t : slots)
      if (t.defined() && unheld(t) && t.dtype() == dt && t.shape() == dims) return t;
    size_t v = unheld(slots[0]) ? 0 : 1;  // slot 1 is the older when both are held
    if (unheld(slots[v])) slots[v] = Tensor();  // free it before allocating the new one
    Tensor t = Tensor::zeros(dt, dims);
    stats->dynamic_bytes += int64_t(t.nbytes());
    if (int64_t(t.nbytes()) > max_kept) return t;
    slots[v] = t;
    if (v == 1) std::swap(slots[0], slots[1]);  // newest first
    return t;
  }

  void run_region(const Graph& region, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                  size_t borrowed) override {
    CUVIL_CHECK(inputs.size() == region.inputs().size(), "region '", region.name(), "' takes ",
                region.inputs().size(), " inputs, given ", inputs.size());
    // A region inside a region is a recursion through its node's kernel: as deep as the verifier allows.
    CUVIL_CHECK(region_depth < kMaxRegionDepth, "region '", region.name(), "' runs inside ", region_depth,
                " other regions, more than the limit of ", kMaxRegionDepth);
    struct Level {
      int& depth;
      explicit Level(int& d) : depth(d) { ++depth; }
      ~Level() { --depth; }
    } level(region_depth);
    execute(region, inputs, current, nullptr, nullptr, outputs, borrowed);
  }

  void loop_iteration(const Node& loop, int64_t iteration) override {
    int64_t limit = options->control.max_loop_iterations;
    if (limit > 0 && iteration >= limit)
      throw RunLimitExceeded(str_cat(loop.describe(), ": the loop reached the limit of ", limit,
                                     " iterations (RunControl::max_loop_iterations)"));
    watch.check(loop);
  }
};

Executor::Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options)
    : graph_(std::move(graph)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  // int8: consecutive int8 layers pass u8 activations (on a copy of the graph; runtime/int8_links.h)
  if (options_.kernels.precision == Precision::int8 && options_.kernels.fast)
    graph_ = link_int8_activations(graph_);
  // fp32: a QDQ model's own int8 layers (kernel_selection.cpp's node_precision) link between themselves the same way
  if (options_.kernels.precision == Precision::fp32 && options_.kernels.fast)
    graph_ = link_int8_activations(graph_, /*model_int8_only=*/true);
  // bf16: consecutive bf16 convolutions pass bf16 activations (runtime/bf16_links.h)
  if (options_.kernels.precision == Precision::bf16 && options_.kernels.fast)
    graph_ = link_bf16_activations(graph_);
  CUVIL_CHECK(options_.threads >= 0, "threads must be >= 0 (0 = all cores), got ", options_.threads);
  if (options_.threads == 0) options_.threads = omp_get_num_procs();
  // Never more than OpenMP will grant (OMP_THREAD_LIMIT): oneDNN splits work for the threads it asked for, and
  // its run-time-dim products leave the parts of missing threads unwritten.
  options_.threads = std::min(options_.threads, std::max(1, omp_get_thread_limit()));
  impl_->stats = &stats_;
  impl_->options = &options_;
  impl_->graph = graph_.get();
}

Executor::~Executor() = default;

void Executor::set_control(RunControl control) { options_.control = std::move(control); }

std::vector<NodeTime> Executor::profile(const std::vector<Tensor>& inputs) {
  std::vector<NodeTime> times;
  impl_->profile = &times;
  impl_->profile_start = std::chrono::steady_clock::now();
  struct Reset {
    Impl* impl;
    ~Reset() { impl->profile = nullptr; }
  } reset{impl_.get()};
  run(inputs);
  return times;
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs) {
  stats_.staged_inputs = 0;
  SymbolBindings b = bind_inputs(*graph_, inputs);
  Plan& plan = impl_->plan_for(b);
  impl_->prepare_ahead(plan, b);
  return impl_->run_with_plan(plan, inputs);
}

std::vector<Tensor> Executor::run_strided(const std::vector<StridedInput>& inputs) {
  std::vector<DType> dtypes;
  std::vector<const std::vector<int64_t>*> shapes;
  for (const StridedInput& in : inputs) {
    CUVIL_CHECK_INPUT(in.strides.empty() || in.strides.size() == in.shape.size(), "an input of shape ",
                      shape_str(in.shape), " has ", in.strides.size(), " strides");
    CUVIL_CHECK_INPUT(in.data || shape_numel(in.shape) == 0, "an input of shape ", shape_str(in.shape),
                      " has no data");
    dtypes.push_back(in.dtype);
    shapes.push_back(&in.shape);
  }
  SymbolBindings b = bind_types(*graph_, dtypes, shapes);
  Plan& plan = impl_->plan_for(b);
  impl_->prepare_ahead(plan, b);
  if (omp_get_max_threads() != options_.threads) omp_set_num_threads(options_.threads);
  static uint8_t empty_anchor[kTensorAlignment];
  std::vector<Tensor> tensors;
  tensors.reserve(inputs.size());
  stats_.staged_inputs = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const StridedInput& in = inputs[i];
    if (in.strides.empty() || is_contiguous(in.shape, in.strides)) {
      tensors.push_back(Tensor::view(in.dtype, in.shape, const_cast<void*>(in.data ? in.data : empty_anchor)));
      continue;
    }
    if (plan.staging.size() < inputs.size()) plan.staging.resize(inputs.size());
    Tensor& buf = plan.staging[i];
    if (!buf.defined() || buf.dtype() != in.dtype || buf.shape() != in.shape) buf = Tensor::zeros(in.dtype, in.shape);
    copy_strided(buf.raw(), in.data, in.shape, in.strides, dtype_size(in.dtype));
    tensors.push_back(buf);
    ++stats_.staged_inputs;
  }
  return impl_->run_with_plan(plan, tensors);
}

std::vector<Tensor> Executor::Impl::run_with_plan(Plan& plan, const std::vector<Tensor>& inputs) {
  // OpenMP's thread count is per calling thread: set it for this run (oneDNN and Cuvil's loops both use it).
  if (omp_get_max_threads() != options->threads) omp_set_num_threads(options->threads);
  stats->arena_bytes = plan.arena_bytes;
  stats->planned_bytes = plan.planned_bytes;
  stats->inplace_reuses = plan.inplace;
  stats->dynamic_bytes = 0;
  uint8_t* base = arena(plan.arena_bytes);
  std::vector<Tensor> result;
  watch.arm(options->control);
  // Kernels may have run on fewer threads (cpu::threads_free): the caller's thread keeps the count asked for.
  struct RestoreThreads {
    int threads;
    ~RestoreThreads() {
      if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
    }
  } restore_threads{options->threads};
  execute(*graph, inputs, nullptr, &plan, base, result);
  return result;
}

void Executor::run_into(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  CUVIL_CHECK_INPUT(outputs.size() == graph_->outputs().size(), "run_into: the graph has ",
                    graph_->outputs().size(), " outputs, given ", outputs.size(), " buffers");
  impl_->bound = &outputs;
  struct Reset {
    Impl* impl;
    ~Reset() { impl->bound = nullptr; }
  } reset{impl_.get()};
  std::vector<Tensor> got = run(inputs);
  for (size_t j = 0; j < got.size(); ++j) {
    if (got[j].raw() == outputs[j].raw()) continue;  // written in place
    CUVIL_CHECK_INPUT(got[j].dtype() == outputs[j].dtype() && got[j].shape() == outputs[j].shape(),
                      "run_into: output ", j, " is ", got[j].type_str(), " but its buffer is ", outputs[j].type_str());
    std::memcpy(const_cast<void*>(outputs[j].raw()), got[j].raw(), got[j].nbytes());
  }
}

void Executor::prepare(const std::vector<std::vector<int64_t>>& input_shapes) {
  std::vector<DType> dtypes;
  std::vector<const std::vector<int64_t>*> shapes;
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    dtypes.push_back(i < graph_->inputs().size() ? graph_->inputs()[i]->dtype() : DType::f32);
    shapes.push_back(&input_shapes[i]);
  }
  SymbolBindings b = bind_types(*graph_, dtypes, shapes);
  Plan& plan = impl_->plan_for(b);
  if (omp_get_max_threads() != options_.threads) omp_set_num_threads(options_.threads);
  impl_->prepare_kernels(*graph_, plan, b, /*rethrow=*/true);
  plan.ahead = true;
}

Plan& Executor::Impl::plan_for(const SymbolBindings& b) {
  std::string key = signature_key(b);
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (lru.size() >= std::max<size_t>(options->max_plans, 1)) {
      plans.erase(lru.back().first);
      lru.pop_back();
      ++stats->plan_evictions;
    }
    lru.emplace_front(key, build_plan(program(*graph), b));
    it = plans.emplace(key, lru.begin()).first;
    ++stats->plans_built;
  } else if (it->second != lru.begin()) {
    lru.splice(lru.begin(), lru, it->second);
  }
  stats->plans_cached = int64_t(lru.size());
  return it->second->second;
}

std::vector<Tensor> Executor::run_named(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> ordered;
  for (Value* v : graph_->inputs()) {
    auto it = inputs.find(v->name());
    CUVIL_CHECK_INPUT(it != inputs.end(), "missing input '", v->name(), "'");
    ordered.push_back(it->second);
  }
  for (auto& [name, t] : inputs) {
    bool known = false;
    for (Value* v : graph_->inputs()) known |= v->name() == name;
    CUVIL_CHECK_INPUT(known, "unknown input '", name, "'");
  }
  return run(ordered);
}

}  // namespace cuvil
