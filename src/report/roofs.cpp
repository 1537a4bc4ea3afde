#include "report/roofs.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

#include "support/error.h"

namespace cuvil::report {

namespace {

using Clock = std::chrono::steady_clock;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string m = line.substr(line.find(':') + 1);
      m.erase(0, m.find_first_not_of(' '));
      return m;
    }
  return "unknown CPU";
}

// Independent FMA chains per thread: enough to cover the FMA latency (4 cycles) times two ports.
constexpr int kChains = 12;
constexpr int64_t kFmaIters = int64_t(1) << 22;

// FLOPs done by one thread's loop (the accumulators are returned so nothing is optimized away).
[[gnu::target("avx512f")]] double fma_avx512(int64_t iters, float* sink) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float v[16];
  _mm512_store_ps(v, s);
  *sink = v[0] + v[15];
  return double(iters) * kChains * 16 * 2;
}

[[gnu::target("avx2,fma")]] double fma_avx2(int64_t iters, float* sink) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(float(c) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  *sink = v[0] + v[7];
  return double(iters) * kChains * 8 * 2;
}

double fma_scalar(int64_t iters, float* sink) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = float(c);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * 0.999999f + 1e-7f;
  *sink = acc[0] + acc[kChains - 1];
  return double(iters) * kChains * 2;
}

// Sums `n` floats with wide loads (read bandwidth); returns the sum so the loads stay.
[[gnu::target("avx2")]] float read_sum(const float* p, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float v[8];
  _mm256_store_ps(v, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float r = 0;
  for (float x : v) r += x;
  for (; i < n; ++i) r += p[i];
  return r;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// Best of `reps` timed repetitions of `body` (seconds), all threads in one parallel region per repetition.
template <class Body>
double best_seconds(int threads, int reps, Body body) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    body(omp_get_thread_num());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// Read bandwidth (GB/s) of `bytes_per_thread` per thread, each thread reading its own buffer `sweeps` times.
double read_gbps(int threads, int64_t bytes_per_thread, int sweeps) {
  int64_t n = bytes_per_thread / int64_t(sizeof(float));
  std::vector<std::unique_ptr<float, FreeDeleter>> bufs(static_cast<size_t>(threads));
  std::vector<float> sinks(size_t(threads) * 16);
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num();  // (first touch by the thread that reads it: its NUMA node)
    float* p = static_cast<float*>(std::aligned_alloc(64, size_t(n) * sizeof(float)));
    for (int64_t i = 0; i < n; ++i) p[i] = float(i & 7);
    bufs[size_t(t)].reset(p);
  }
  double s = best_seconds(threads, 5, [&](int t) {
    float acc = 0;
    for (int k = 0; k < sweeps; ++k) {
      acc += read_sum(bufs[size_t(t)].get(), n);
      asm volatile("" ::: "memory");  // (read_sum is pure: without a barrier the sweeps fold into one)
    }
    sinks[size_t(t) * 16] = acc;
  });
  return double(bytes_per_thread) * threads * sweeps / s / 1e9;
}

std::string cache_path(const std::string& cpu, int threads) {
  std::string dir;
  if (const char* d = std::getenv("CUVIL_CACHE_DIR")) dir = std::string(d) == "off" ? "" : d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/cuvil";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/cuvil";
  if (dir.empty()) return "";
  std::string key;
  for (char c : cpu) key += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return dir + "/roofs-" + key + "-t" + std::to_string(threads) + ".json";
}

}  // namespace

std::string cpu_name() { return cpu_model_name(); }

std::string Roofs::to_json() const {
  nlohmann::json j = {{"format", "cuvil-roofs"},   {"version", 1},           {"cpu", cpu},
                      {"threads", threads},        {"fma_gflops", fma_gflops}, {"dram_gbps", dram_gbps},
                      {"cache_gbps", cache_gbps},  {"isa", isa},             {"measured_s", measured_s}};
  return j.dump(2);
}

Roofs Roofs::from_json(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "cuvil-roofs" || j.value("version", 0) != 1)
    fail("not a cuvil-roofs file (version 1)");
  Roofs r;
  r.cpu = j.value("cpu", "");
  r.threads = j.value("threads", 0);
  r.fma_gflops = j.value("fma_gflops", 0.0);
  r.dram_gbps = j.value("dram_gbps", 0.0);
  r.cache_gbps = j.value("cache_gbps", 0.0);
  r.isa = j.value("isa", "");
  r.measured_s = j.value("measured_s", 0.0);
  if (!(r.fma_gflops > 0 && r.dram_gbps > 0)) fail("cuvil-roofs file without positive rates");
  return r;
}

Roofs measure_roofs(int threads) {
  auto start = Clock::now();
  Roofs r;
  r.cpu = cpu_model_name();
  r.threads = threads > 0 ? threads : std::max(1, int(std::thread::hardware_concurrency()));
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2") &&
                                                           __builtin_cpu_supports("fma");
  r.isa = avx512 ? "avx512f" : avx2 ? "avx2+fma" : "scalar";
  std::vector<float> sinks(size_t(r.threads) * 16);
  std::vector<double> flops(size_t(r.threads));
  int64_t iters = avx512 || avx2 ? kFmaIters : kFmaIters / 8;
  double s = best_seconds(r.threads, 5, [&](int t) {
    float* sink = &sinks[size_t(t) * 16];
    flops[size_t(t)] = avx512 ? fma_avx512(iters, sink) : avx2 ? fma_avx2(iters, sink) : fma_scalar(iters, sink);
  });
  double total = 0;
  for (double f : flops) total += f;
  r.fma_gflops = total / s / 1e9;
  if (avx2 || avx512) {
    r.dram_gbps = read_gbps(r.threads, (int64_t(256) << 20) / r.threads, 2);  // 256 MB in all: past any L3
    r.cache_gbps = read_gbps(r.threads, int64_t(128) << 10, 8000);  // 128 KB per thread, in L2: 1 GB read each
  } else {
    r.dram_gbps = r.cache_gbps = 1;  // (no vector loads to measure with: a placeholder roof)
  }
  r.measured_s = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

Roofs machine_roofs(int threads, bool remeasure) {
  int t = threads > 0 ? threads : std::max(1, int(std::thread::hardware_concurrency()));
  std::string path = cache_path(cpu_model_name(), t);
  if (!remeasure && !path.empty()) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      try {
        return Roofs::from_json(ss.str());
      } catch (const Error&) {
        // a damaged cache entry: measured again and rewritten below
      }
    }
  }
  Roofs r = measure_roofs(t);
  if (!path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    std::ofstream out(tmp);
    out << r.to_json() << "\n";
    out.close();
    if (out) std::filesystem::rename(tmp, path, ec);  // (atomic: a concurrent reader sees old or new)
    else std::filesystem::remove(tmp, ec);
  }
  return r;
}

double attainable_gflops(const Roofs& r, double flops_per_byte) {
  return std::min(r.fma_gflops, r.dram_gbps * flops_per_byte);
}

}  // namespace cuvil::report
