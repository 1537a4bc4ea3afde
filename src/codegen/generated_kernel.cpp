#include "codegen/generated_kernel.h"

#include "codegen/jit.h"
#include "codegen/lower.h"
#include "kernels/cpu/cpu_util.h"

namespace cuvil::codegen {

namespace {

class GeneratedKernel final : public PreparedKernel {
 public:
  GeneratedKernel(LoweredKernel lk, Schedule s, GeneratedFn fn) : lk_(std::move(lk)), s_(s), fn_(fn) {
    rows_mode_ = lk_.kernel.has_row_reductions();
    // Work per item for the thread split: transcendental math costs several times a load and a store.
    int64_t heavy = 0;
    for (const Expr& e : lk_.kernel.exprs)
      heavy += e.op == Op::exp || e.op == Op::log || e.op == Op::tanh || e.op == Op::erf || e.op == Op::div;
    cost_ = 1 + heavy;
    char buf[24];
    std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(lk_.kernel.hash() >> 32));
    name_ = "jit:" + lk_.ops + ":" + buf;
  }

  void run(KernelContext& ctx) override {
    std::vector<void*> ptrs;
    ptrs.reserve(ctx.num_inputs() + ctx.num_outputs());
    for (size_t i = 0; i < ctx.num_inputs(); ++i) ptrs.push_back(const_cast<void*>(ctx.input(i).raw()));
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ptrs.push_back(ctx.output(i).raw());
    const int64_t* dims = lk_.dims.data();
    const int64_t* strides = lk_.strides.data();
    void* const* p = ptrs.data();
    GeneratedFn fn = fn_;
    if (rows_mode_) {
      cpu::parallel_ranges(lk_.rows, lk_.inner * cost_ * 2, 1, [&](int64_t b, int64_t e) { fn(dims, strides, p, b, e); });
    } else {
      int64_t total = lk_.rows * lk_.inner;
      cpu::parallel_ranges(total, cost_, int64_t(s_.vector_width) * s_.unroll,
                           [&](int64_t b, int64_t e) { fn(dims, strides, p, b, e); });
    }
  }
  std::string impl_name() const override { return name_; }

 private:
  LoweredKernel lk_;
  Schedule s_;
  GeneratedFn fn_;
  bool rows_mode_ = false;
  int64_t cost_ = 1;
  std::string name_;
};

bool body_disabled(const Graph& body, const KernelOptions& options) {
  for (const auto& n : body.nodes())
    if (options.no_codegen_ops.count(n->op())) return true;
  return false;
}

}  // namespace

std::unique_ptr<PreparedKernel> prepare_generated_kernel(const Node& n, const std::vector<PrepareInput>& inputs,
                                                         const KernelOptions& options) {
  if (!options.codegen || n.op() != OpKind::FusedKernel) return nullptr;
  const Graph& body = *AttrReader(n).g("body");
  if (body_disabled(body, options)) return nullptr;
  std::vector<std::vector<int64_t>> shapes;
  for (const PrepareInput& in : inputs) {
    if (!in.present) return nullptr;
    shapes.push_back(in.shape);
  }
  std::string why;
  std::optional<LoweredKernel> lk = lower_body(body, shapes, &why);
  if (!lk) return nullptr;
  Schedule s;
  GeneratedFn fn = jit_kernel(lk->kernel, s);
  return std::make_unique<GeneratedKernel>(std::move(*lk), s, fn);
}

}  // namespace cuvil::codegen
