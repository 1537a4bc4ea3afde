// The machine's roofs for a roofline: the peak fp32 FMA rate and the memory bandwidths, measured here (not taken
// from a datasheet) once per CPU and cached, so a profile can say how close each kernel comes to what this
// machine can do at its arithmetic intensity.
#pragma once

#include <string>

namespace cuvil::report {

struct Roofs {
  std::string cpu;           // the CPU's model name (/proc/cpuinfo)
  int threads = 0;           // threads the rates were measured with
  double fma_gflops = 0;     // fp32 FMA peak, all threads: 2 FLOPs per lane per FMA
  double dram_gbps = 0;      // read bandwidth of a buffer far larger than the caches
  double cache_gbps = 0;     // read bandwidth of a per-thread buffer that fits in L2
  std::string isa;           // the vector ISA the FMA loop ran ("avx512f", "avx2+fma", "scalar")
  double measured_s = 0;     // how long measuring took
  std::string to_json() const;
  static Roofs from_json(const std::string& text);  // throws cuvil::Error on malformed text
};

// The CPU's model name (/proc/cpuinfo's "model name").
std::string cpu_name();

// Measures the roofs now with `threads` threads (0: all cores); about a second.
Roofs measure_roofs(int threads = 0);

// The roofs of this CPU at `threads`: read from the cache ($CUVIL_CACHE_DIR or ~/.cache/cuvil, roofs-<cpu>.json),
// else measured and stored there. `remeasure` measures even when cached.
Roofs machine_roofs(int threads = 0, bool remeasure = false);

// The attainable rate (GFLOP/s) at arithmetic intensity `flops_per_byte` under these roofs (DRAM roof).
double attainable_gflops(const Roofs& r, double flops_per_byte);

}  // namespace cuvil::report
