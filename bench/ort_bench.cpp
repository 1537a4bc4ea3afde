// Side-by-side latency of ONNX Runtime and Cuvil on ONNX models (not a test: nothing asserts on time).
//
//   cuvil_bench_models --ort PATH/libonnxruntime.so.1 [--iters N] [--warmup N] [--threads N] [--json]
//                      [--gbps] MODEL.onnx...
//
// ONNX Runtime is loaded with dlopen() and called through its C API function table (API version 13; the table is
// append-only, so these positions hold in later releases). No ORT header is used: the few types and signatures
// needed are declared below. Per model: an ORT session (intra-op threads --threads, default 2; graph optimization
// level all) with outputs bound to buffers this program owns, and a Cuvil Executor (-O1, the same thread count). Inputs
// are random (symbolic dims -> 1; integers in [0, 4)); Cuvil's outputs are checked against ORT's (relative L2),
// then the two are timed alternately in blocks of 5 runs (ORT, Cuvil, ORT, ...) after the warm-up runs so that drift in machine load
// hits both alike. Prints median and min ms of each and the ratio cuvil/ort (> 1: Cuvil is slower). Cuvil writes
// into output buffers the program owns too (Executor::run_into). With --gbps (for memory-bound single-op models) it
// first measures the machine's copy bandwidth (a STREAM-like copy of 256 MB on the same threads) and adds each
// runtime's GB/s, counting the bytes of the inputs and outputs once, and Cuvil's share of the copy bandwidth.
//
// Objects ORT hands out (sessions, values, statuses) are not released: the table positions of the Release*
// functions are not part of the documented set we rely on, and the process is short-lived.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "frontend/load_model.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"

namespace {

// ---- the slice of the ONNX Runtime C API we use (opaque handles, function-pointer signatures)

struct OrtStatus;
struct OrtEnv;
struct OrtSession;
struct OrtSessionOptions;
struct OrtRunOptions;
struct OrtValue;
struct OrtMemoryInfo;
struct OrtTensorTypeAndShapeInfo;
struct OrtAllocator {  // the public layout of ORT's allocator interface (first members)
  uint32_t version;
  void* (*Alloc)(OrtAllocator*, size_t);
  void (*Free)(OrtAllocator*, void*);
};
struct OrtApi;  // an array of function pointers, indexed below
struct OrtApiBase {
  const OrtApi* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};

constexpr int kOrtLoggingLevelError = 3;
constexpr int kOrtEnableAll = 99;
constexpr int kOrtArenaAllocator = 1;
constexpr int kOrtMemTypeDefault = 0;

namespace fn {
using GetErrorMessage = const char* (*)(const OrtStatus*);
using CreateEnv = OrtStatus* (*)(int level, const char* logid, OrtEnv** out);
using CreateSession = OrtStatus* (*)(const OrtEnv*, const char* path, const OrtSessionOptions*, OrtSession** out);
using Run = OrtStatus* (*)(OrtSession*, const OrtRunOptions*, const char* const* input_names,
                           const OrtValue* const* inputs, size_t num_inputs, const char* const* output_names,
                           size_t num_outputs, OrtValue** outputs);
using CreateSessionOptions = OrtStatus* (*)(OrtSessionOptions** out);
using SetGraphOptimizationLevel = OrtStatus* (*)(OrtSessionOptions*, int level);
using SetIntraOpNumThreads = OrtStatus* (*)(OrtSessionOptions*, int n);
using SessionGetCount = OrtStatus* (*)(const OrtSession*, size_t* out);
using SessionGetName = OrtStatus* (*)(const OrtSession*, size_t index, OrtAllocator*, char** out);
using CreateTensorWithData = OrtStatus* (*)(const OrtMemoryInfo*, void* data, size_t nbytes, const int64_t* shape,
                                            size_t rank, int elem_type, OrtValue** out);
using GetTensorMutableData = OrtStatus* (*)(OrtValue*, void** out);
using GetTensorElementType = OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, int* out);
using GetDimensionsCount = OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, size_t* out);
using GetDimensions = OrtStatus* (*)(const OrtTensorTypeAndShapeInfo*, int64_t* dims, size_t n);
using GetTensorTypeAndShape = OrtStatus* (*)(const OrtValue*, OrtTensorTypeAndShapeInfo** out);
using CreateCpuMemoryInfo = OrtStatus* (*)(int allocator_type, int mem_type, OrtMemoryInfo** out);
using GetAllocatorWithDefaultOptions = OrtStatus* (*)(OrtAllocator** out);
}  // namespace fn

// Positions (0-based) in the API-13 function table.
enum ApiIndex : size_t {
  kGetErrorMessage = 2,
  kCreateEnv = 3,
  kCreateSession = 7,
  kRun = 9,
  kCreateSessionOptions = 10,
  kSetSessionGraphOptimizationLevel = 23,
  kSetIntraOpNumThreads = 24,
  kSessionGetInputCount = 30,
  kSessionGetOutputCount = 31,
  kSessionGetInputName = 36,
  kSessionGetOutputName = 37,
  kCreateTensorWithDataAsOrtValue = 49,
  kGetTensorMutableData = 51,
  kGetTensorElementType = 60,
  kGetDimensionsCount = 61,
  kGetDimensions = 62,
  kGetTensorTypeAndShape = 65,
  kCreateCpuMemoryInfo = 69,
  kGetAllocatorWithDefaultOptions = 78,
};

struct OrtError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Ort {
 public:
  explicit Ort(const std::string& lib_path) {
    lib_ = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) throw OrtError(std::string("cannot load ") + lib_path + ": " + dlerror());
    auto get_base = reinterpret_cast<const OrtApiBase* (*)()>(dlsym(lib_, "OrtGetApiBase"));
    if (!get_base) throw OrtError(lib_path + " has no OrtGetApiBase");
    const OrtApiBase* base = get_base();
    version_ = base->GetVersionString ? base->GetVersionString() : "?";
    table_ = reinterpret_cast<void* const*>(base->GetApi(13));
    if (!table_) throw OrtError("ONNX Runtime " + version_ + " does not provide C API version 13");
    call<fn::CreateEnv>(kCreateEnv, kOrtLoggingLevelError, "cuvil_bench", &env_);
    call<fn::CreateCpuMemoryInfo>(kCreateCpuMemoryInfo, kOrtArenaAllocator, kOrtMemTypeDefault, &cpu_);
    call<fn::GetAllocatorWithDefaultOptions>(kGetAllocatorWithDefaultOptions, &alloc_);
  }

  // Calls table entry `index` (a function returning OrtStatus*) and throws OrtError with ORT's message on failure.
  template <class F, class... Args>
  void call(size_t index, Args... args) const {
    OrtStatus* st = reinterpret_cast<F>(table_[index])(args...);
    if (st) {
      auto msg = reinterpret_cast<fn::GetErrorMessage>(table_[kGetErrorMessage])(st);
      throw OrtError(std::string("ONNX Runtime: ") + (msg ? msg : "(no message)"));
    }
  }

  const std::string& version() const { return version_; }
  OrtEnv* env() const { return env_; }
  OrtMemoryInfo* cpu() const { return cpu_; }
  OrtAllocator* allocator() const { return alloc_; }

 private:
  void* lib_ = nullptr;  // never closed: ORT's threads and statics outlive any point where that would be safe
  void* const* table_ = nullptr;
  std::string version_;
  OrtEnv* env_ = nullptr;
  OrtMemoryInfo* cpu_ = nullptr;
  OrtAllocator* alloc_ = nullptr;
};

// ---- one model through ORT: session, inputs wrapped over Cuvil tensors, outputs bound to buffers we own

class OrtModel {
 public:
  OrtModel(const Ort& ort, const std::string& path, int threads) : ort_(ort) {
    OrtSessionOptions* opts = nullptr;
    ort.call<fn::CreateSessionOptions>(kCreateSessionOptions, &opts);
    ort.call<fn::SetGraphOptimizationLevel>(kSetSessionGraphOptimizationLevel, opts, kOrtEnableAll);
    ort.call<fn::SetIntraOpNumThreads>(kSetIntraOpNumThreads, opts, threads);
    ort.call<fn::CreateSession>(kCreateSession, ort.env(), path.c_str(), opts, &session_);
    in_names_ = names(kSessionGetInputCount, kSessionGetInputName);
    out_names_ = names(kSessionGetOutputCount, kSessionGetOutputName);
  }

  const std::vector<std::string>& input_names() const { return in_names_; }
  const std::vector<std::string>& output_names() const { return out_names_; }

  // `inputs` in the order of input_names(); their memory must outlive this object. Runs once with ORT-allocated
  // outputs to learn their shapes, then allocates our own output tensors and binds them for run().
  void bind(const std::vector<cuvil::Tensor>& inputs) {
    in_values_.clear();
    for (const auto& t : inputs) in_values_.push_back(wrap(t));
    std::vector<OrtValue*> tmp(out_names_.size(), nullptr);
    run_into(tmp.data());
    outputs_.clear();
    out_values_.clear();
    for (OrtValue* v : tmp) {
      OrtTensorTypeAndShapeInfo* info = nullptr;
      ort_.call<fn::GetTensorTypeAndShape>(kGetTensorTypeAndShape, v, &info);
      int elem = 0;
      size_t rank = 0;
      ort_.call<fn::GetTensorElementType>(kGetTensorElementType, info, &elem);
      ort_.call<fn::GetDimensionsCount>(kGetDimensionsCount, info, &rank);
      std::vector<int64_t> dims(rank);
      ort_.call<fn::GetDimensions>(kGetDimensions, info, dims.data(), rank);
      auto dt = cuvil::dtype_from_onnx_id(elem);
      if (!dt) throw OrtError("ORT output of unsupported element type " + std::to_string(elem));
      cuvil::Tensor t = cuvil::Tensor::zeros(*dt, dims);
      void* src = nullptr;
      ort_.call<fn::GetTensorMutableData>(kGetTensorMutableData, v, &src);
      if (t.nbytes()) std::memcpy(t.raw(), src, t.nbytes());
      outputs_.push_back(t);
      out_values_.push_back(wrap(t));
    }
  }

  // Writes into the bound output tensors.
  void run() { run_into(out_values_.data()); }
  const std::vector<cuvil::Tensor>& outputs() const { return outputs_; }

 private:
  std::vector<std::string> names(size_t count_index, size_t name_index) {
    size_t n = 0;
    ort_.call<fn::SessionGetCount>(count_index, session_, &n);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      char* s = nullptr;
      ort_.call<fn::SessionGetName>(name_index, session_, i, ort_.allocator(), &s);
      out.emplace_back(s);
      ort_.allocator()->Free(ort_.allocator(), s);
    }
    return out;
  }

  OrtValue* wrap(const cuvil::Tensor& t) {
    OrtValue* v = nullptr;
    ort_.call<fn::CreateTensorWithData>(kCreateTensorWithDataAsOrtValue, ort_.cpu(), const_cast<void*>(t.raw()),
                                        t.nbytes(), t.shape().data(), t.rank(), cuvil::dtype_onnx_id(t.dtype()),
                                        &v);
    return v;
  }

  void run_into(OrtValue** outs) {
    std::vector<const char*> in_names, out_names;
    for (const auto& s : in_names_) in_names.push_back(s.c_str());
    for (const auto& s : out_names_) out_names.push_back(s.c_str());
    ort_.call<fn::Run>(kRun, session_, nullptr, in_names.data(), in_values_.data(), in_values_.size(),
                       out_names.data(), out_names.size(), outs);
  }

  const Ort& ort_;
  OrtSession* session_ = nullptr;
  std::vector<std::string> in_names_, out_names_;
  std::vector<const OrtValue*> in_values_;
  std::vector<OrtValue*> out_values_;
  std::vector<cuvil::Tensor> outputs_;
};

// ---- helpers

cuvil::Tensor random_input(const cuvil::Value& v, std::mt19937& rng) {
  if (!v.shape().rank_known()) throw std::runtime_error("input '" + v.name() + "' has unknown rank");
  std::vector<int64_t> dims;
  for (const auto& d : v.shape().dims()) dims.push_back(d.is_const() ? d.value() : 1);  // symbolic -> 1
  cuvil::Tensor t = cuvil::Tensor::zeros(v.dtype(), dims);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> small(0, 3);
  cuvil::visit_dtype(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = small(rng) & 1;
      else if constexpr (cuvil::is_float_v<T>) p[i] = T(normal(rng));
      else p[i] = T(small(rng));
    }
  });
  return t;
}

// ||a - b|| / ||b|| over all elements (0 when both are zero; inf on a shape mismatch).
double rel_l2(const cuvil::Tensor& a, const cuvil::Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get_f64(i), y = b.get_f64(i);
    num += (x - y) * (x - y);
    den += y * y;
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return std::sqrt(num / den);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Summary {
  double median = 0, min = 0;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v.front()};
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out;
}

// The pause before each block (CUVIL_BENCH_SETTLE_MS, default 50).
int settle_ms() {
  const char* e = std::getenv("CUVIL_BENCH_SETTLE_MS");
  return e ? std::atoi(e) : 50;
}

std::string model_name(const std::string& path) {
  std::string n = path.substr(path.find_last_of('/') + 1);
  if (n.size() > 5 && n.ends_with(".onnx")) n.resize(n.size() - 5);
  return n;
}

struct Options {
  std::string ort_path;
  int iters = 10, warmup = 2, threads = 2;
  bool json = false, gbps = false;
  std::vector<std::string> models;
};

struct Result {
  std::string name, error;
  double max_rel_l2 = 0;
  Summary ort, cuvil;
  int iters = 0;
  int64_t io_bytes = 0;  // bytes of the inputs and outputs
};

// STREAM-like copy bandwidth in GB/s (bytes read + bytes written per second), median of 10 on `threads` threads.
double copy_bandwidth(int threads) {
  const size_t n = size_t(64) << 20;  // 64 Mi floats: 256 MB per array, far beyond the caches
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  std::vector<double> t;
  for (int rep = 0; rep < 11; ++rep) {
    double t0 = now_ms();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < int64_t(n); ++i) b[size_t(i)] = a[size_t(i)];
    if (rep > 0) t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * double(n) * sizeof(float) / (t[t.size() / 2] * 1e6);
}

Result bench_one(const Ort& ort, const std::string& path, const Options& o) {
  Result r;
  r.name = model_name(path);
  auto graph = cuvil::load_model(path);
  cuvil::optimize(*graph, 1);
  cuvil::ExecutorOptions eo;
  eo.threads = o.threads;
  cuvil::Executor exec(graph, eo);
  std::mt19937 rng(1234);
  std::vector<cuvil::Tensor> inputs;  // Cuvil's graph-input order
  for (const cuvil::Value* v : graph->inputs()) inputs.push_back(random_input(*v, rng));

  OrtModel om(ort, path, o.threads);
  std::vector<cuvil::Tensor> ort_inputs;  // ORT's input order, matched by name
  for (const auto& name : om.input_names()) {
    size_t i = 0;
    while (i < graph->inputs().size() && graph->inputs()[i]->name() != name) ++i;
    if (i == graph->inputs().size()) throw std::runtime_error("ORT input '" + name + "' is not a Cuvil input");
    ort_inputs.push_back(inputs[i]);
  }
  if (ort_inputs.size() != inputs.size()) throw std::runtime_error("ORT and Cuvil disagree on the input count");
  om.bind(ort_inputs);

  // Correctness: every Cuvil output against ORT's output of the same name (or position).
  std::vector<cuvil::Tensor> cv = exec.run(inputs);
  for (const auto& t : inputs) r.io_bytes += int64_t(t.nbytes());
  for (const auto& t : cv) r.io_bytes += int64_t(t.nbytes());
  // Timed runs write into these (ORT's outputs are bound to buffers too).
  std::vector<cuvil::Tensor> out_bufs;
  for (const auto& t : cv) out_bufs.push_back(t.clone());
  const auto& outs = graph->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    auto it = std::find(om.output_names().begin(), om.output_names().end(), outs[i]->name());
    size_t j = it != om.output_names().end() ? size_t(it - om.output_names().begin()) : i;
    if (j >= om.outputs().size()) throw std::runtime_error("no ORT output for '" + outs[i]->name() + "'");
    r.max_rel_l2 = std::max(r.max_rel_l2, rel_l2(cv[i], om.outputs()[j]));
  }

  for (int i = 0; i < o.warmup; ++i) {
    om.run();
    exec.run_into(inputs, out_bufs);
  }
  // Both runtimes keep worker threads spinning for a while after a run; on a 2-core machine a run that starts
  // while the other's workers still spin loses its cores. So the two alternate in short blocks: a pause, one
  // untimed run to wake this runtime's workers, then up to 5 timed runs, and the same for the other.
  auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms())); };
  std::vector<double> t_ort, t_cuvil;
  const int block = 5;
  for (int done = 0; done < o.iters;) {
    int n = std::min(block, o.iters - done);
    settle();
    om.run();
    for (int i = 0; i < n; ++i) {
      double t0 = now_ms();
      om.run();
      t_ort.push_back(now_ms() - t0);
    }
    settle();
    exec.run_into(inputs, out_bufs);
    for (int i = 0; i < n; ++i) {
      double t0 = now_ms();
      exec.run_into(inputs, out_bufs);
      t_cuvil.push_back(now_ms() - t0);
    }
    done += n;
  }
  r.iters = o.iters;
  r.ort = summarize(t_ort);
  r.cuvil = summarize(t_cuvil);
  return r;
}

void print_row(const Result& r, bool json, const std::string& ort_version, double copy_gbps) {
  if (json) {
    if (!r.error.empty()) {
      std::printf("{\"model\": \"%s\", \"error\": \"%s\"}\n", json_escape(r.name).c_str(),
                  json_escape(r.error).c_str());
    } else {
      std::printf("{\"model\": \"%s\", \"ort_version\": \"%s\", \"iters\": %d, \"rel_l2\": %.3g, "
                  "\"ort_median_ms\": %.4f, \"ort_min_ms\": %.4f, \"cuvil_median_ms\": %.4f, "
                  "\"cuvil_min_ms\": %.4f, \"ratio\": %.3f, \"io_bytes\": %lld, \"copy_gbps\": %.2f}\n",
                  json_escape(r.name).c_str(), json_escape(ort_version).c_str(), r.iters, r.max_rel_l2,
                  r.ort.median, r.ort.min, r.cuvil.median, r.cuvil.min, r.cuvil.median / r.ort.median,
                  static_cast<long long>(r.io_bytes), copy_gbps);
    }
  } else if (!r.error.empty()) {
    std::printf("%-16s ERROR: %s\n", r.name.c_str(), r.error.c_str());
  } else {
    std::printf("%-16s %6d %10.2e %12.3f %10.3f %12.3f %10.3f %9.2fx", r.name.c_str(), r.iters, r.max_rel_l2,
                r.ort.median, r.ort.min, r.cuvil.median, r.cuvil.min, r.cuvil.median / r.ort.median);
    if (copy_gbps > 0) {
      double ort_gbps = double(r.io_bytes) / (r.ort.median * 1e6), cuvil_gbps = double(r.io_bytes) / (r.cuvil.median * 1e6);
      std::printf(" %9.1f %9.1f %8.0f%%", ort_gbps, cuvil_gbps, 100.0 * cuvil_gbps / copy_gbps);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

[[noreturn]] void usage(const char* msg) {
  if (msg) std::fprintf(stderr, "error: %s\n", msg);
  std::fprintf(stderr,
               "usage: cuvil_bench_models --ort PATH/libonnxruntime.so.1 [--iters N] [--warmup N] [--threads N] "
               "[--json] [--gbps] MODEL.onnx...\n");
  std::exit(2);
}

int parse_int(int& i, int argc, char** argv) {
  if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
  try {
    size_t pos = 0;
    int v = std::stoi(argv[++i], &pos);
    if (argv[i][pos] != 0 || v < 0) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    usage((std::string("bad number: ") + argv[i]).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ort") {
      if (i + 1 >= argc) usage("--ort needs a path");
      o.ort_path = argv[++i];
    } else if (a == "--iters") {
      o.iters = parse_int(i, argc, argv);
    } else if (a == "--warmup") {
      o.warmup = parse_int(i, argc, argv);
    } else if (a == "--threads") {
      o.threads = parse_int(i, argc, argv);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--gbps") {
      o.gbps = true;
    } else if (a == "-h" || a == "--help") {
      usage(nullptr);
    } else if (a.starts_with("--")) {
      usage(("unknown option " + a).c_str());
    } else {
      o.models.push_back(a);
    }
  }
  if (o.ort_path.empty()) usage("--ort is required");
  if (o.models.empty()) usage("no models given");
  if (o.iters < 1) usage("--iters must be at least 1");

  std::unique_ptr<Ort> ort;
  try {
    ort = std::make_unique<Ort>(o.ort_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  double copy_gbps = o.gbps ? copy_bandwidth(o.threads) : 0;
  if (!o.json) {
    std::printf("ONNX Runtime %s (C API 13, %d intra-op threads, optimization level all) vs Cuvil (-O1, %d "
                "threads); times in ms, alternated, after %d warm-up run(s)\n",
                ort->version().c_str(), o.threads, o.threads, o.warmup);
    if (o.gbps) std::printf("copy bandwidth (STREAM-like, 256 MB, %d threads): %.1f GB/s\n", o.threads, copy_gbps);
    std::printf("%-16s %6s %10s %12s %10s %12s %10s %10s", "model", "iters", "rel_l2", "ort_median", "ort_min",
                "cuvil_median", "cuvil_min", "cuvil/ort");
    if (o.gbps) std::printf(" %9s %9s %9s", "ort_GB/s", "cuvil_GB/s", "of_copy");
    std::printf("\n");
  }
  int failures = 0;
  for (const auto& path : o.models) {
    Result r;
    try {
      r = bench_one(*ort, path, o);
    } catch (const std::exception& e) {
      r.name = model_name(path);
      r.error = e.what();
      ++failures;
    }
    print_row(r, o.json, ort->version(), copy_gbps);
  }
  return failures ? 1 : 0;
}
