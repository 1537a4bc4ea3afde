#include "codegen/generated_kernel.h"

#include "codegen/kernel_code.h"
#include "codegen/lower.h"
#include "kernels/parallel.h"
#include "kernels/ref/ref_kernels.h"
#include <algorithm>
#include <cstdlib>
#include <set>

namespace cuvil::codegen {

namespace {

// Whether an integer tensor holds a value for which pred holds (false for other dtypes).
template <class Pred>
bool any_integer(const Tensor& t, Pred pred) {
  bool any = false;
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      const T* p = t.data<T>();
      any = std::any_of(p, p + t.numel(), pred);
    }
  });
  return any;
}

// The inputs the kernel must not meet: a zero integer divisor (the reference reports it), a negative integer
// exponent (0 to a negative power is an error; other bases give 0 or +-1), a loss's target that is no class
// (the reference reports it). With any of them the body runs op by op instead; the result says which (null: none).
const char* needs_reference(const LoweredKernel& lk, const KernelContext& ctx) {
  for (int i : lk.nonzero_inputs)
    if (any_integer(ctx.input(size_t(i)), [](auto v) { return v == 0; }))
      return "an integer divisor holds 0 in this call: the body ran op by op (the reference reports it)";
  for (int i : lk.nonnegative_inputs)
    if (any_integer(ctx.input(size_t(i)), [](auto v) {
          if constexpr (std::is_signed_v<decltype(v)>) return v < 0;
          else return false;
        }))
      return "an integer exponent is negative in this call: the body ran op by op";
  for (const auto& ct : lk.class_targets)
    if (any_integer(ctx.input(size_t(ct.input)), [&](auto v) {
          int64_t t = int64_t(v);
          return !((t >= 0 && t < ct.classes) || (ct.ignore && t == *ct.ignore));
        }))
      return "a loss target is no class in this call: the body ran op by op (the reference reports it)";
  return nullptr;
}

// Expressions computed per element (not once per row) whose math costs several times a load and a store.
int64_t costly_exprs(const Kernel& k) {
  std::vector<bool> uniform = k.row_uniform();
  int64_t n = 0;
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    Op op = k.exprs[i].op;
    n += !uniform[i] && (is_transcendental(op) || op == Op::div);
  }
  return n;
}

class GeneratedKernel final : public PreparedKernel {
 public:
  GeneratedKernel(LoweredKernel lk, Schedule s, GeneratedFn fn, std::shared_ptr<KernelCodeSource> code)
      : lk_(std::move(lk)), s_(s), fn_(fn), code_(std::move(code)), ptrs_(lk_.kernel.operands.size()) {
    // The thread split. Row kernels split by rows (a row reads its elements once per reduction); columns kernels
    // by positions of the innermost dim (a column each); element kernels by elements, at whole vectors. Work per
    // item: transcendental math costs several times a load and a store.
    bool rows = lk_.kernel.has_rows() && !lk_.kernel.columns;
    int64_t cost = 1 + costly_exprs(lk_.kernel);
    items_ = rows ? lk_.rows : lk_.rows * lk_.inner;
    item_cost_ = lk_.kernel.columns ? lk_.reduced * cost * 2 : rows ? lk_.inner * cost * 2 : cost;
    align_ = rows ? 1 : int64_t(s_.vector_width) * (lk_.kernel.columns ? 1 : s_.unroll);
    char buf[24];
    std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(lk_.kernel.hash() >> 32));
    name_ = "jit:" + lk_.ops + ":" + buf;
  }

  static constexpr int64_t kMinWorkAsleep = int64_t(1) << 20, kMinWorkSpinning = int64_t(1) << 16;

  void run(KernelContext& ctx) override {
    per_call_fallback_ = needs_reference(lk_, ctx);
    if (per_call_fallback_) {
      ref_kernel(OpKind::FusedKernel)(ctx);
      return;
    }
    // ptrs_ is sized at prepare; a prepared kernel runs one call at a time (its executor is not shared).
    size_t k = 0;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) ptrs_[k++] = const_cast<void*>(ctx.input(i).raw());
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ptrs_[k++] = ctx.output(i).raw();
    for (int src : lk_.views) ptrs_[k++] = const_cast<void*>(ctx.input(size_t(src)).raw());
    const int64_t* dims = lk_.dims.data();
    const int64_t* strides = lk_.strides.data();
    void* const* p = ptrs_.data();
    GeneratedFn fn = fn_;
    // Waking a sleeping worker costs 80-400 us on these virtual machines (they sleep between calls of a model
    // run alternately with another runtime), so then threads pay off only above about a million element
    // operations (256K took Softmax over [12, 128, 128] from 52 to 30 us with the workers spinning, but to 460 us
    // alternated with ONNX Runtime). Right after a parallel region they still spin, and 64K is enough: BERT's
    // LayerNorms after its products, which also read what the other core wrote, 0.061 -> 0.037 ms.
    int64_t min_work = cpu::workers_spinning() ? kMinWorkSpinning : kMinWorkAsleep;
    cpu::parallel_ranges(items_, item_cost_, align_, [&](int64_t b, int64_t e) { fn(dims, strides, p, b, e); },
                         min_work);
  }
  std::string impl_name() const override { return name_; }
  std::string fallback() const override { return per_call_fallback_ ? per_call_fallback_ : ""; }

 private:
  const char* per_call_fallback_ = nullptr;  // why the last call ran op by op; null when it ran the code
  LoweredKernel lk_;
  Schedule s_;
  GeneratedFn fn_;
  std::shared_ptr<KernelCodeSource> code_;  // keeps fn_'s code mapped
  std::vector<void*> ptrs_;  // operand base pointers of the current call
  int64_t items_ = 0, item_cost_ = 1, align_ = 1;  // the thread split (constructor)
  std::string name_;
};

// CUVIL_NO_CODEGEN: "all" (or "1") turns generated kernels off; otherwise op names separated by commas.
struct EnvSwitch {
  bool all = false;
  std::set<OpKind> ops;
  EnvSwitch() {
    const char* e = std::getenv("CUVIL_NO_CODEGEN");
    if (!e) return;
    std::string s(e);
    if (s == "all" || s == "1") {
      all = true;
      return;
    }
    size_t at = 0;
    while (at <= s.size()) {
      size_t comma = std::min(s.find(',', at), s.size());
      std::string name = s.substr(at, comma - at);
      if (!name.empty()) {
        auto op = op_from_name(name);
        CUVIL_CHECK(op, "CUVIL_NO_CODEGEN names an unknown op '", name, "'");
        ops.insert(*op);
      }
      at = comma + 1;
    }
  }
};

bool body_disabled(const Graph& body, const KernelOptions& options) {
  static const EnvSwitch env;
  if (env.all) return true;
  for (const auto& n : body.nodes())
    if (options.no_codegen_ops.count(n->op()) || env.ops.count(n->op())) return true;
  return false;
}

}  // namespace

// Outputs this large (bytes, all element-level outputs together) are written with streaming stores: far larger
// than a core's caches, so nothing downstream would find them there.
constexpr int64_t kStreamingBytes = int64_t(16) << 20;

// The default schedule, except:
// - erf's polynomials hold about twenty constants; a second vector in flight gains nothing (GELU over 128K floats
//   in cache: 37-45 us at unroll 1, 38-42 at 2) and risks spilling registers when other math is fused with it;
// - large outputs (kStreamingBytes) of memory-bound kernels stream: Add 64 MB went from ~1x ONNX Runtime's time
//   to 0.78x, LayerNorm 64 MB from 49-61 % of the copy bandwidth to 84-91 %. Kernels whose output pass does
//   transcendental math per element do not: GELU 64 MB measured 15-30 % slower with streaming stores. Softmax's
//   exp is computed in the sum's pass and kept for the output pass (the row cache, in a stack buffer when
//   streaming), so its output pass is a multiply and streams: 64 MB 3.25 ms against 3.70 (medians of 12
//   alternated runs).
Schedule choose_schedule(const LoweredKernel& lk) {
  Schedule s;
  if (lk.kernel.columns) {
    // A columns step walks its lanes down every row of the block, and its rows are a whole row stride apart:
    // wide steps read more contiguous bytes per row (Softmax over 64 channels of 512x512: 15 ms at 16 lanes,
    // 9.7 at 32, 6.9 at 64, 6.1 at 128). Narrower for short rows, which would leave lanes idle.
    // Scans carry one running sum per lane in registers: at most 64 lanes (8 vectors of f64 sums; CumSum over
    // the middle axis of [64, 1024, 64] alternated with ONNX Runtime: 1.07 ms at 64 lanes, 1.43 at 32).
    int widest = lk.kernel.has_scans() ? 64 : 128;
    s.vector_width = 16;
    while (s.vector_width < widest && s.vector_width < lk.inner) s.vector_width *= 2;
  }
  if (lk.kernel.has_scans()) s.unroll = 1;  // (row scans step one vector at a time: each waits for the last)
  std::vector<bool> uniform = lk.kernel.row_uniform();
  for (size_t i = 0; i < lk.kernel.exprs.size(); ++i)
    if (!uniform[i] && lk.kernel.exprs[i].op == Op::erf) s.unroll = 1;
  int64_t out_bytes = 0;
  for (const Store& st : lk.kernel.stores) {
    const Operand& o = lk.kernel.operands[size_t(st.operand)];
    if (!o.per_row) out_bytes += lk.rows * lk.reduced * lk.inner * int64_t(dtype_size(o.dtype));
  }
  s.streaming_stores = lk.kernel.output_pass_costly_exprs() == 0 && out_bytes >= kStreamingBytes;
  return s;
}

std::unique_ptr<PreparedKernel> prepare_generated_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                         const KernelOptions& options,
                                                         const std::shared_ptr<KernelCodeSource>& code,
                                                         std::string* why) {
  std::string ignored;
  if (!why) why = &ignored;
  if (n.op() != OpKind::FusedKernel) return nullptr;
  if (!options.codegen) {
    *why = "code generation is off (KernelOptions::codegen)";
    return nullptr;
  }
  const Graph& body = *AttrReader(n).g("body");
  if (body_disabled(body, options)) {
    *why = "code generation is off for an op of the body (CUVIL_NO_CODEGEN or KernelOptions::no_codegen_ops)";
    return nullptr;
  }
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present) {
      *why = str_cat("input ", i, " is omitted");
      return nullptr;
    }
    shapes.push_back(inputs[i].shape);
  }
  std::optional<LoweredKernel> lk = lower_body(body, shapes, why);
  if (!lk) {
    if (why->empty()) *why = "the generator does not handle this body at these shapes";
    return nullptr;
  }
  Schedule s = choose_schedule(*lk);
  GeneratedFn fn = code ? code->find(lk->kernel, s) : nullptr;
  std::shared_ptr<KernelCodeSource> keep = code;
  if (!fn)
    if (KernelCodeSource* compiler = process_compiler()) {
      fn = compiler->find(lk->kernel, s);
      keep = nullptr;  // the process's compiler lives as long as the process
    }
  if (!fn) {
    *why = "no machine code: the build has no LLVM and no artifact holds this kernel";
    return nullptr;
  }
  return std::make_unique<GeneratedKernel>(std::move(*lk), s, fn, std::move(keep));
}

}  // namespace cuvil::codegen
