// libFuzzer target: the C API's buffer handling. The input's first bytes choose tensor descriptions (dtype, rank,
// dims, buffer sizes, null pointers) passed with a fixed small artifact, as run inputs and outputs and as staged
// weights; every call must answer with a status,
// never read or write outside the buffers it was given (ASan checks).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "cuvil/cuvil.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace {

cuvil_session* session() {
  static cuvil_session* s = [] {
    auto g = cuvil::parse_graph(
        "graph @main(%x: f32[n, 3], %k: i64[2]) {\n"
        "  %w: f32[3] = constant [0.5, 1.0, -2.0]\n"
        "  %y: f32[n, 3] = Mul(%x, %w)\n"
        "  %z: i64[2] = Add(%k, %k)\n"
        "  return %y, %z\n}\n");
    cuvil::infer_shapes(*g);
    cuvil::verify(*g);
    cuvil::artifact::SaveInput in;
    in.graph = g;
    std::string bytes = cuvil::artifact::serialize(in);
    return cuvil_session_create_from_memory(bytes.data(), bytes.size(), nullptr, nullptr);
  }();
  return s;
}

struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (!n) return 0;
    --n;
    return *p++;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cuvil_session* s = session();
  if (!s) __builtin_trap();
  Reader r{data, size};
  std::vector<cuvil_tensor> ts(4);
  std::vector<std::vector<int64_t>> dims(4);
  std::vector<std::vector<uint8_t>> bufs(4);
  for (size_t i = 0; i < ts.size(); ++i) {
    cuvil_tensor t = CUVIL_TENSOR_INIT;
    t.dtype = cuvil_dtype(r.byte() % 15);  // two values past the last dtype
    t.rank = int32_t(r.byte() % 5) - 1;
    for (int32_t k = 0; k < t.rank; ++k) dims[i].push_back(int64_t(r.byte() % 6) - 1);
    t.dims = dims[i].empty() ? nullptr : dims[i].data();
    bufs[i].resize(r.byte() % 64);
    t.bytes = bufs[i].size() + (r.byte() % 4 == 0 ? 8 : 0);  // sometimes claims more than it has
    if (t.bytes > bufs[i].size()) bufs[i].resize(t.bytes);   // (the claim stays true: ASan would flag a lie)
    t.data = r.byte() % 8 == 0 ? nullptr : bufs[i].data();
    if (r.byte() % 16 == 0) t.struct_size = 8;
    ts[i] = t;
  }
  size_t n_in = r.byte() % 4, n_out = r.byte() % 4;
  cuvil_status* st = nullptr;
  cuvil_code c = cuvil_session_run(s, ts.data(), n_in, ts.data() + 2, n_out, &st);
  if ((c == CUVIL_OK) != (st == nullptr)) __builtin_trap();
  cuvil_status_free(st);
  st = nullptr;
  int64_t out[8];
  int32_t rank = cuvil_session_output_shape(s, ts.data(), n_in, r.byte() % 3, out, 8, &st);
  if ((rank < 0) != (st != nullptr)) __builtin_trap();
  cuvil_status_free(st);
  st = nullptr;
  // Weights staged from the same descriptions (names known, unknown or null; any flags), committed when they fit.
  const char* const choices[] = {"w", "x", "nope", nullptr};
  const char* names[2] = {choices[r.byte() % 4], choices[r.byte() % 4]};
  cuvil_weights* w = nullptr;
  c = cuvil_weights_stage(s, names, ts.data(), r.byte() % 3, r.byte() % 3, &w, &st);
  if ((c == CUVIL_OK) != (st == nullptr) || (c == CUVIL_OK) != (w != nullptr)) __builtin_trap();
  cuvil_status_free(st);
  st = nullptr;
  if (w) {
    c = cuvil_weights_commit(s, w, nullptr, &st);
    if ((c == CUVIL_OK) != (st == nullptr)) __builtin_trap();
    cuvil_status_free(st);
    cuvil_weights_free(w);
  }
  return 0;
}
