#include "report/profile_report.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "ir/graph_stats.h"
#include "report/roofs.h"

namespace cuvil::report {

namespace {

using json = nlohmann::json;

// Operands up to this size per thread count as L2-resident for the roof (the L2 of current x86 cores is 0.5-2 MB).
constexpr double kL2BytesPerThread = 512 * 1024;

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double at = q * double(v.size() - 1);
  size_t lo = size_t(at), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

// "f32[1, 3, 224, 224]" at this run's symbol values ("f32[n, 3]" where a dim depends on data).
std::string type_at(const Value& v, const SymbolBindings& b) {
  std::string s = std::string(dtype_name(v.dtype())) + "[";
  if (!v.shape().rank_known()) return s + "?]";
  const auto& dims = v.shape().dims();
  for (size_t d = 0; d < dims.size(); ++d) {
    auto e = dims[d].eval(b);
    s += (d ? ", " : "") + (e ? std::to_string(*e) : dims[d].str());
  }
  return s + "]";
}

// Bytes the node reads and writes (each input and output once), or -1 when a size depends on data.
double node_bytes(const Node& n, const SymbolBindings& b) {
  double bytes = 0;
  for (const std::vector<Value*>* vs : {&n.inputs(), &n.outputs()})
    for (const Value* v : *vs) {
      if (!v) continue;
      if (!v->shape().rank_known()) return -1;
      auto e = v->shape().numel().eval(b);
      if (!e) return -1;
      bytes += double(*e) * double(dtype_size(v->dtype()));
    }
  return bytes;
}

json location_of(const Node& n) {
  const Location& l = n.loc();
  json j = {{"file", l.file}, {"line", l.line}, {"name", l.name}};
  j["stack"] = l.stack.empty() ? "" : l.chain();
  j["text"] = l.file.empty() && !l.name.empty() ? "ONNX node '" + l.name + "'" : l.str();
  return j;
}

// The IR nodes of a FusedKernel's body, each with its source.
json body_of(const Node& n, const SymbolBindings& b) {
  json body = json::array();
  if (n.op() != OpKind::FusedKernel || !n.has_attr("body")) return body;
  for (const auto& m : n.attr("body").g()->nodes()) {
    json out = json::array();
    for (const Value* v : m->outputs())
      if (v) out.push_back(type_at(*v, b));
    body.push_back({{"op", std::string(m->op_name())},
                    {"value", m->num_outputs() && m->output(0) ? m->output(0)->name() : ""},
                    {"outputs", out},
                    {"location", location_of(*m)}});
  }
  return body;
}

json machine_info(int threads) {
  return {{"cpu", cpu_name()}, {"cores", int(std::thread::hardware_concurrency())}, {"threads", threads}};
}

// When each profiled run and each of its top-level kernels ran, on the monotonic clock, so that samples taken
// outside Cuvil (perf record -k CLOCK_MONOTONIC) can be attributed to kernels by time (perf_fold.h).
json timeline(const std::vector<std::vector<NodeTime>>& runs, const std::vector<int64_t>& start_ns,
              const std::vector<int64_t>& parent, const std::vector<double>& wall_ms) {
  json out = json::array();
  const std::vector<NodeTime>& first = runs[0];
  for (size_t i = 0; i < runs.size(); ++i) {
    json ks = json::array();
    for (size_t k = 0; k < runs[i].size() && k < first.size(); ++k)
      if (parent[k] < 0 && runs[i][k].node == first[k].node)
        ks.push_back({int64_t(k), runs[i][k].start_ms, runs[i][k].ms});
    out.push_back({{"start_ns", start_ns[i]}, {"wall_ms", wall_ms[i]}, {"kernels", ks}});
  }
  return {{"clock", "CLOCK_MONOTONIC"}, {"pid", int64_t(::getpid())}, {"runs", out}};
}

}  // namespace

std::string profile_json(Executor& ex, const std::vector<Tensor>& inputs, const ProfileOptions& options) {
  using Clock = std::chrono::steady_clock;
  int iters = std::max(options.iters, 1);
  for (int i = 0; i < std::max(options.warmup, 1); ++i) ex.run(inputs);
  // Unprofiled and profiled runs alternate, so drift in the machine's load hits both alike.
  std::vector<double> latency, profiled_wall;
  std::vector<std::vector<NodeTime>> runs;
  std::vector<int64_t> run_start_ns;  // steady_clock, which is CLOCK_MONOTONIC: perf's clock with -k CLOCK_MONOTONIC
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    ex.run(inputs);
    latency.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    t0 = Clock::now();
    run_start_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count());
    runs.push_back(ex.profile(inputs));
    profiled_wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const Graph& g = ex.graph();
  SymbolBindings b = bind_inputs(g, inputs);
  const std::vector<NodeTime>& first = runs[0];

  // Which rows ran inside another (a fused body op by op, a loop's body): their time is in their parent's.
  std::vector<int64_t> parent(first.size(), -1);
  // A row's `nested` rows are all those just before it (grandchildren too), which their own parents, listed
  // before it, have claimed first.
  for (size_t k = 0; k < first.size(); ++k)
    for (size_t j = k - std::min(first[k].nested, k); j < k; ++j)
      if (parent[j] < 0) parent[j] = int64_t(k);

  Roofs roofs;
  if (options.roofs) roofs = machine_roofs(ex.options().threads);
  json kernels = json::array();
  double kernel_sum = 0;
  for (size_t k = 0; k < first.size(); ++k) {
    const Node& n = *first[k].node;
    std::vector<double> t;
    for (const auto& r : runs)
      if (k < r.size() && r[k].node == &n) t.push_back(r[k].ms);
    double med = quantile(t, 0.5), p90 = quantile(t, 0.9);
    if (parent[k] < 0) kernel_sum += med;
    json ins = json::array(), outs = json::array();
    for (const Value* v : n.inputs()) ins.push_back(v ? type_at(*v, b) : "-");
    for (const Value* v : n.outputs()) outs.push_back(v ? type_at(*v, b) : "-");
    auto f = node_flops(n).eval(b);
    double flops = f ? double(*f) : -1, bytes = node_bytes(n, b);
    json row = {{"id", k},
                {"op", std::string(n.op_name())},
                {"label", node_label(n)},
                {"value", n.num_outputs() && n.output(0) ? n.output(0)->name() : ""},
                {"impl", first[k].impl},
                {"fallback", first[k].fallback},
                {"median_ms", med},
                {"p90_ms", p90},
                {"start_ms", first[k].start_ms},
                {"first_ms", first[k].ms},
                {"parent", parent[k]},
                {"inputs", ins},
                {"outputs", outs},
                {"flops", flops},
                {"flops_exact", flops_exact(n)},
                {"bytes", bytes},
                {"location", location_of(n)},
                {"body", body_of(n, b)}};
    double sec = med / 1e3;
    row["gflops_s"] = flops >= 0 && sec > 0 ? flops / sec / 1e9 : -1.0;
    row["gbytes_s"] = bytes >= 0 && sec > 0 ? bytes / sec / 1e9 : -1.0;
    row["intensity"] = flops >= 0 && bytes > 0 ? flops / bytes : -1.0;
    double roof_pct = -1;
    if (options.roofs && sec > 0 && bytes > 0) {
      // Convolutions and products against the roof at their intensity; the rest (their FLOPs an estimate) against
      // the bandwidth roof. A kernel whose operands fit in the threads' L2 (kL2BytesPerThread each) is measured
      // against the L2 bandwidth: against DRAM's it would show far above 100 %.
      Roofs r = roofs;
      if (bytes <= kL2BytesPerThread * std::max(roofs.threads, 1)) r.dram_gbps = roofs.cache_gbps;
      if (flops_exact(n) && flops > 0) roof_pct = 100 * (flops / sec / 1e9) / attainable_gflops(r, flops / bytes);
      else roof_pct = 100 * (bytes / sec / 1e9) / r.dram_gbps;
    }
    row["roof_pct"] = roof_pct;
    kernels.push_back(std::move(row));
  }
  for (auto& row : kernels)
    row["share"] = row["parent"].get<int64_t>() < 0 && kernel_sum > 0 ? row["median_ms"].get<double>() / kernel_sum
                                                                        : -1.0;
  double lat = quantile(latency, 0.5);
  // The time no kernel accounts for is measured inside each profiled run: its wall time minus the times of the
  // kernels it ran (the gaps between kernels, input checks, allocation, returning the outputs; the profiler's own
  // bookkeeping between kernels counts too, so this errs high). Latency minus the sum of the kernels' medians is
  // reported beside it, but a sum of medians is no median of sums: each kernel's noise is skewed, so that
  // difference grows with the machine's load although no run spent more time between kernels.
  std::vector<double> in_run_kernels, in_run_gap;
  for (size_t i = 0; i < runs.size(); ++i) {
    double sum = 0;
    for (size_t k = 0; k < runs[i].size() && k < first.size(); ++k)
      if (parent[k] < 0 && runs[i][k].node == first[k].node) sum += runs[i][k].ms;
    in_run_kernels.push_back(sum);
    in_run_gap.push_back(profiled_wall[i] - sum);
  }
  json doc = {{"format", "cuvil-profile"},
              {"version", 1},
              {"model", options.model},
              {"graph", g.name()},
              {"precision", options.precision},
              {"iters", iters},
              {"machine", machine_info(ex.options().threads > 0 ? ex.options().threads
                                                                 : int(std::thread::hardware_concurrency()))},
              {"latency_ms", {{"median", lat}, {"p90", quantile(latency, 0.9)}, {"min", quantile(latency, 0)}}},
              {"profiled_run_ms", quantile(profiled_wall, 0.5)},
              {"kernel_sum_ms", kernel_sum},
              {"kernels_per_run_ms", quantile(in_run_kernels, 0.5)},
              {"unattributed_ms", quantile(in_run_gap, 0.5)},
              {"latency_minus_kernels_ms", lat - kernel_sum},
              {"kernels", kernels}};
  doc["timeline"] = timeline(runs, run_start_ns, parent, profiled_wall);
  if (options.roofs)
    doc["roofs"] = {{"cpu", roofs.cpu},          {"threads", roofs.threads},     {"fma_gflops", roofs.fma_gflops},
                    {"dram_gbps", roofs.dram_gbps}, {"cache_gbps", roofs.cache_gbps}, {"isa", roofs.isa}};
  return doc.dump(1, ' ', false, json::error_handler_t::replace);  // (names need not be UTF-8)
}

namespace {

json parse_report(const std::string& text, const char* which) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "cuvil-profile")
    fail(which, " is not a cuvil profile report (JSON with \"format\": \"cuvil-profile\")");
  if (j.value("version", 0) != 1)
    fail(which, " is a cuvil profile report of version ", j.value("version", 0), "; this cuvil reads version 1");
  return j;
}

}  // namespace

std::string chrome_trace_json(const std::string& report_json) {
  json r = parse_report(report_json, "the report");
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "cuvil " + r.value("model", "")}}}});
  for (const auto& k : r["kernels"]) {
    json args = {{"impl", k["impl"]},           {"value", k["value"]},      {"inputs", k["inputs"]},
                 {"outputs", k["outputs"]},     {"source", k["location"]["text"]}};
    if (!k["location"]["stack"].get<std::string>().empty()) args["call_chain"] = k["location"]["stack"];
    if (!k["fallback"].get<std::string>().empty()) args["fallback"] = k["fallback"];
    // Nested kernels (a fused body run op by op) on a second track, under their parent. The first profiled run,
    // each kernel's own time in it (the median of every run beside its start drew kernels over their successors),
    // or the median where a report has no first_ms.
    double dur_ms = k.contains("first_ms") ? k["first_ms"].get<double>() : k["median_ms"].get<double>();
    events.push_back({{"name", k["label"]},
                      {"cat", k["op"]},
                      {"ph", "X"},
                      {"ts", k["start_ms"].get<double>() * 1e3},
                      {"dur", dur_ms * 1e3},
                      {"pid", 1},
                      {"tid", k["parent"].get<int64_t>() < 0 ? 1 : 2},
                      {"args", args}});
  }
  return json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string diff_reports(const std::string& a_json, const std::string& b_json) {
  json a = parse_report(a_json, "the first file"), b = parse_report(b_json, "the second file");
  auto key = [](const json& k) { return k["label"].get<std::string>() + " -> %" + k["value"].get<std::string>(); };
  std::map<std::string, std::pair<double, double>> rows;  // key -> (a ms, b ms); -1 where absent
  for (const auto& k : a["kernels"])
    if (k["parent"].get<int64_t>() < 0) rows[key(k)].first += k["median_ms"].get<double>(), rows[key(k)].second = -1;
  for (const auto& k : b["kernels"]) {
    if (k["parent"].get<int64_t>() >= 0) continue;
    auto it = rows.find(key(k));
    if (it == rows.end()) rows[key(k)] = {-1, k["median_ms"].get<double>()};
    else it->second.second = std::max(it->second.second, 0.0) + k["median_ms"].get<double>();
  }
  std::vector<std::pair<std::string, std::pair<double, double>>> sorted(rows.begin(), rows.end());
  auto change = [](const std::pair<double, double>& p) { return std::max(p.first, 0.0) - std::max(p.second, 0.0); };
  std::sort(sorted.begin(), sorted.end(),
            [&](const auto& x, const auto& y) { return std::abs(change(x.second)) > std::abs(change(y.second)); });
  std::string out;
  char buf[512];
  auto line = [&](const char* what, double x, double y) {
    std::snprintf(buf, sizeof buf, "%-44s %10.3f %10.3f %+9.1f%%\n", what, x, y, x > 0 ? 100 * (y / x - 1) : 0.0);
    out += buf;
  };
  std::snprintf(buf, sizeof buf, "%-44s %10s %10s %10s\n", "", "A ms", "B ms", "B vs A");
  out += buf;
  line("end-to-end latency (median)", a["latency_ms"]["median"].get<double>(), b["latency_ms"]["median"].get<double>());
  line("sum of kernels", a["kernel_sum_ms"].get<double>(), b["kernel_sum_ms"].get<double>());
  line("unattributed", a["unattributed_ms"].get<double>(), b["unattributed_ms"].get<double>());
  out += "per kernel (largest change first):\n";
  for (const auto& [k, p] : sorted) {
    std::string name = escape_for_message(k).substr(0, 44);
    if (p.first < 0) std::snprintf(buf, sizeof buf, "%-44s %10s %10.3f   only in B\n", name.c_str(), "-", p.second);
    else if (p.second < 0) std::snprintf(buf, sizeof buf, "%-44s %10.3f %10s   only in A\n", name.c_str(), p.first, "-");
    else std::snprintf(buf, sizeof buf, "%-44s %10.3f %10.3f %+9.1f%%\n", name.c_str(), p.first, p.second,
                       p.first > 0 ? 100 * (p.second / p.first - 1) : 0.0);
    out += buf;
  }
  return out;
}

}  // namespace cuvil::report
