// libFuzzer target over whole models, the mutation kind a hostile probe used (byte flips, truncations and
// splices of real models): whatever loads is optimized (-O1) and run on inputs made from its declared types, on
// the fast kernels and on the reference kernels. Every outcome must be results or a cuvil::Error: never a crash,
// a hang or a sanitizer report. Loops are bounded by the run's iteration limit and deadline, so a mutated trip
// count is an error rather than a timeout; inputs are small (symbolic dims 2, integers 1) and models whose
// declared inputs are large are skipped, so that memory stays within the fuzzer's limit.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "frontend/onnx/onnx_importer.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"

namespace {

using namespace cuvil;

constexpr int64_t kMaxInputElements = 1 << 16;

// A small tensor of the input's declared type, or false when it has none Cuvil can make.
bool make_input(const Value& v, Tensor* out) {
  const Shape& s = v.shape();
  if (!s.rank_known() || s.rank() > 6) return false;
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (const Dim& d : s.dims()) {
    int64_t k = d.is_const() ? d.value() : 2;
    if (k < 0 || k > kMaxInputElements) return false;
    n *= std::max<int64_t>(k, 1);
    if (n > kMaxInputElements) return false;
    dims.push_back(k);
  }
  Tensor t = Tensor::zeros(v.dtype(), dims);
  // Ones: valid as axes, indices, counts and shapes alike, and 1.0 for float data.
  visit_dtype(v.dtype(), [&]<class T>() {
    T* p = static_cast<T*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(1);
  });
  *out = t;
  return true;
}

void run_on(const std::shared_ptr<const Graph>& g, const std::vector<Tensor>& inputs, bool fast) {
  ExecutorOptions options;
  options.kernels.fast = fast;
  options.threads = 1;
  options.control.max_loop_iterations = 1000;
  options.control.timeout = std::chrono::seconds(2);
  try {
    Executor(g, options).run(inputs);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<Graph> g;
  try {
    g = import_onnx_bytes(data, size);  // no base dir: external data is refused, nothing is read from disk
  } catch (const Error&) {
    return 0;
  }
  std::vector<Tensor> inputs;
  for (Value* v : g->inputs()) {
    Tensor t;
    if (!make_input(*v, &t)) return 0;
    inputs.push_back(t);
  }
  run_on(g, inputs, /*fast=*/false);
  try {
    PassContext ctx;
    ctx.verify_each = true;
    optimize(*g, 1, ctx);
  } catch (const Error&) {
    return 0;
  }
  run_on(g, inputs, /*fast=*/true);
  return 0;
}
