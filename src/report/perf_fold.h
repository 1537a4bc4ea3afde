// Folds Linux perf samples into a profile report: `perf record -k CLOCK_MONOTONIC` stamps each sample with the
// clock the report's timeline (profile_report.h) is written in, so a sample of the profiled process taken while a
// kernel ran belongs to that kernel's IR node, whatever code it landed in (Cuvil's generated kernels, announced
// to perf by support/perf_map.h, oneDNN's JIT code, libraries, the kernel). Per kernel the report then gets its
// sample count, its share of the samples in the profiled runs, and the symbols they landed on; samples in a run
// but between kernels are the run's unattributed time, seen from outside.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuvil::report {

struct PerfSample {
  int64_t pid = 0, tid = 0;
  int64_t time_ns = 0;  // on the clock perf recorded with
  std::string symbol;   // "[unknown]" where perf had no name
  std::string dso;      // the file the code came from, "" where perf printed none
};

// Parses `perf script -F pid,tid,time,ip,sym,dso --ns` output. Lines of another form are skipped.
std::vector<PerfSample> parse_perf_script(std::string_view text);

// Runs `perf script` on `perf_data` (perf must be on PATH) and parses it. Throws cuvil::Error naming the cause.
std::vector<PerfSample> read_perf_data(const std::string& perf_data);

// The report with "perf" added: per kernel {"samples", "share", "symbols": [[name, count], ...]} (the top five),
// and at the top {"samples", "in_runs", "in_kernels", "between_kernels", "other_processes", "outside_runs",
// "clock"}. Throws cuvil::Error if the report has no timeline or no sample falls in a profiled run (perf was not
// recording this process, or not with -k CLOCK_MONOTONIC).
std::string fold_perf_samples(const std::string& report_json, const std::vector<PerfSample>& samples);

// A text table of a folded report: kernels by samples, beside their measured share of the time.
std::string perf_table(const std::string& folded_json);

}  // namespace cuvil::report
