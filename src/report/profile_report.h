// A profile as data: one run of the model's kernels measured `iters` times, per kernel the median and p90 time,
// what ran (implementation, fallback reason), shapes, FLOPs, bytes, rates and the share of the roof at its
// arithmetic intensity, a fused kernel's IR nodes with their source locations; beside it the end-to-end latency
// of unprofiled runs, so the time no kernel accounts for is shown, and the machine's roofs. It is a versioned JSON
// document ("cuvil-profile", version 1) from which the HTML report (html_report.h), the Chrome trace and
// `cuvil profile --diff` are made, in C++ for the CLI and through the bindings for Python.
#pragma once

#include <string>
#include <vector>

#include "runtime/executor.h"

namespace cuvil::report {

struct ProfileOptions {
  int iters = 10;            // profiled runs, and as many unprofiled ones for the end-to-end latency
  int warmup = 2;            // runs before either (plans, kernels, caches)
  std::string model;         // how the report names the model (a path, a class name)
  std::string precision = "fp32";
  bool roofs = true;         // measure (or read the cached) roofs of this machine (roofs.h)
};

// Runs `ex` on `inputs` as ProfileOptions says and returns the report's JSON text.
std::string profile_json(Executor& ex, const std::vector<Tensor>& inputs, const ProfileOptions& options);

// Chrome trace JSON (the "traceEvents" array format; opens in Perfetto and chrome://tracing) of the report's
// first profiled run.
std::string chrome_trace_json(const std::string& report_json);

// `cuvil profile --diff A B`: the two reports' end-to-end latencies and per-kernel medians side by side (kernels
// matched by op and output value), slowest change first. Throws cuvil::Error on a document that is not a report.
std::string diff_reports(const std::string& a_json, const std::string& b_json);

}  // namespace cuvil::report
