// The `cuvil` command: inspect, run and benchmark models without Python.
//
//   cuvil compile MODEL -o OUT.cuv [--dim SYMBOL=N|LO..HI ...] [--precision fp32|bf16|int8 [--calibration DIR]]
//                 [-O0|-O1] [--skip-pass=NAME ...]
//   cuvil compile MODEL.onnx -o OUT.cuv --precision auto --data DIR --budget B [...]   (python/cuvil/auto_compile_cli.py)
//   cuvil inspect MODEL [--ir [-O0|-O1] | --kernels [--stages]]
//   cuvil run MODEL --input NAME=FILE.npy ... --output-dir DIR [-O0|-O1]   (-O1, the default, runs the graph passes)
//   cuvil bench MODEL [--input NAME=FILE.npy ...] [--dim SYMBOL=N ...] [--threads N] [--iters N] [--warmup N] [--json]
//               [--versus "FLAGS"]
//   cuvil profile MODEL [--input ...] [--dim ...] [--threads N] [--iters N]   (per node: time, share, kernel)
//                 [--html FILE] [--json FILE] [--trace FILE]   (the report: src/report/profile_report.h)
//   cuvil profile --diff A.json B.json                          (two --json reports side by side)
//   cuvil profile REPORT.json --perf-data perf.data [--json F] [--html F]  (perf samples of that run, per node)
//   cuvil roofs [--threads N] [--remeasure]                     (this machine's FMA rate and bandwidths, cached)
//
// --threads N (default: all cores) sets the threads of oneDNN and Cuvil's loops; --ref runs the reference kernels;
// --no-winograd keeps 3x3 convolutions on direct (non-Winograd) kernels; --no-cpu-gemm runs products with a constant
// B on oneDNN instead of Cuvil's GEMM. --no-codegen runs fused element-wise
// groups op by op instead of as generated kernels (CUVIL_NO_CODEGEN=Op1,Op2 does it for groups holding those ops).
// --skip-pass=NAME leaves one pass out of the pipeline (repeatable). --precision fp32|bf16 (default fp32) lets
// convolutions and matrix products run in bf16 where this machine runs that faster; profile then shows each
// node's precision and, where it kept f32, why. --precision int8 runs calibrated convolutions and products u8 x s8:
// a QDQ model as quantized; any other calibrated by MinMax on --calibration DIR's .npy samples or on its inputs.
// Without --precision a QDQ model's own quantized layers run int8 (their reason "int8: QDQ in the model");
// --precision fp32 given computes its QDQ graph exactly in f32.
// bench --versus "FLAGS" (kernel flags, --skip-pass=NAME and -O0/-O1, e.g. "--no-cpu-gemm") builds a second
// executor with those flags and times the two alternately in one process, so that drift in machine load hits both
// alike; it prints both medians and their ratio.
//
// MODEL is an .onnx file, Cuvil IR text (.cvir) or a compiled artifact (.cuv, from `cuvil compile`; run, bench,
// profile and inspect take it as it is, without passes). Any error prints one line and exits non-zero.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "artifact/artifact.h"
#include "artifact/kernel_library.h"
#include "artifact/prepacked.h"
#include "codegen/llvm/aot.h"
#include "frontend/load_model.h"
#include "passes/pipeline.h"
#include "codegen/generated_kernel.h"
#include "codegen/llvm/jit.h"
#include "ir/graph_stats.h"
#include "ir/text_format.h"
#include "kernels/qdq_precision.h"
#include "runtime/calibration.h"
#include "runtime/executor.h"
#include "runtime/weight_recipes.h"
#include "runtime/weights.h"
#include "report/html_report.h"
#include "report/perf_fold.h"
#include "report/profile_report.h"
#include "report/roofs.h"
#include "ir/npy.h"
#include "serving/serve.h"
#include "support/file_io.h"
#include "support/sha256.h"

#include <unistd.h>

using namespace cuvil;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage:\n"
    "  cuvil compile MODEL -o OUT.cuv [--dim SYMBOL=N|LO..HI ...] [--precision fp32|bf16|int8 [--calibration DIR]]\n"
    "                [-O0|-O1] [--skip-pass=NAME ...]\n"
    "  cuvil compile MODEL.onnx -o OUT.cuv --precision auto --data DIR --budget B [--metric rel_l2|cosine|top1|max_abs]\n"
    "              [--calibration DIR] [--calibration-method M] [--threads N]   (runs in the Python front end)\n"
    "  cuvil inspect MODEL [--ir [-O0|-O1] | --kernels [--stages]]\n"
    "  cuvil run MODEL --input NAME=FILE.npy ... --output-dir DIR [-O0|-O1]\n"
    "  cuvil bench MODEL [--input NAME=FILE.npy ...] [--dim SYMBOL=N ...] [--threads N] [--iters N]\n"
    "              [--warmup N] [--json] [-O0|-O1] [--ref] [--no-winograd] [--no-codegen] [--no-cpu-gemm]\n"
    "              [--precision fp32|bf16|int8 [--calibration DIR]]\n"
    "              [--skip-pass=NAME ...] [--versus \"FLAGS\"]\n"
    "  cuvil profile MODEL [--input NAME=FILE.npy ...] [--dim SYMBOL=N ...] [--threads N] [--iters N] [-O0|-O1] [--ref]\n"
    "                [--html FILE] [--json FILE] [--trace FILE]\n"
    "  cuvil profile --diff A.json B.json\n"
    "  cuvil profile REPORT.json --perf-data perf.data [--json FILE] [--html FILE]\n"
    "      (REPORT.json from a `cuvil profile MODEL --json` run recorded with\n"
    "       CUVIL_PERF_MAP=1 perf record -k CLOCK_MONOTONIC -e cpu-clock -o perf.data -- cuvil profile ...)\n"
    "  cuvil roofs [--threads N] [--remeasure]\n"
    "  cuvil cache ls|verify|prune|explain ...                 (the compiled-model cache: cuvil cache --help)\n"
    "  cuvil serve --model-repository DIR [--http-port N] [--metrics-port N] ...  (cuvil serve --help)\n"
    "  cuvil --version\n"
    "MODEL is an ONNX file (.onnx), Cuvil IR text (.cvir) or a compiled artifact (.cuv; not for compile).\n"
    "An ONNX model's sequence inputs need --sequence NAME=N (its elements are then the inputs NAME_0 .. NAME_<N-1>);\n"
    "--absent NAME leaves an optional input out (each command that reads MODEL takes both).\n";

// Names from a model (values, nodes) and paths, with control characters escaped before they reach a terminal.
// cuvil::Error messages are already escaped (support/error.h); this covers what is printed otherwise.
std::string printable(const std::string& s) { return escape_for_message(s); }

struct UsageError : Error {
  using Error::Error;
};

struct Args {
  std::string command, model;
  std::map<std::string, std::string> inputs;  // name -> .npy path
  std::map<std::string, int64_t> dims;        // symbol -> value, for random inputs
  std::map<std::string, std::string> dim_specs;  // symbol -> "N" or "LO..HI" as given (compile: the ranges)
  std::string output;                            // compile: -o
  std::string output_dir;
  int threads = 0, iters = 10, warmup = 2;  // threads 0: all cores
  bool json = false, ir = false, kernels = false, stages = false, reference = false, winograd = true, codegen = true, cpu_gemm = true;
  int opt_level = 1;  // -O0 / -O1: the graph pass pipeline run before run and bench
  bool opt_level_given = false;  // inspect --ir prints the graph as loaded unless a level is asked for
  std::string versus;            // bench: flags of a second configuration timed against this one
  std::set<std::string> skip_passes;  // --skip-pass=NAME: passes left out of the pipeline
  Precision precision = Precision::fp32;  // --precision
  bool precision_given = false;           // else an artifact's own (its manifest's config)
  std::string calibration;                // --calibration DIR: int8 calibration samples (.npy)
  std::string html, json_out, trace;  // profile: where to write the HTML report, its JSON, the Chrome trace
  std::vector<std::string> diff;      // profile --diff A B
  std::string perf_data;              // profile REPORT --perf-data FILE
  bool remeasure = false;             // roofs: measure even when cached
  OnnxImportOptions onnx;             // --sequence NAME=N, --absent NAME: an ONNX model's sequence/optional inputs
};

int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo) {
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  if (used != v.size() || n < lo) throw UsageError(flag + " expects an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  return n;
}

std::pair<std::string, std::string> split_assignment(const std::string& flag, const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    throw UsageError(flag + " expects NAME=VALUE, got '" + v + "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

// The flags that choose kernels and passes (what bench --versus may change): applies `s` and returns true if
// it is one.
bool apply_kernel_flag(Args& a, const std::string& s) {
  if (s == "--ref") a.reference = true;
  else if (s == "--no-winograd") a.winograd = false;
  else if (s == "--no-cpu-gemm") a.cpu_gemm = false;
  else if (s == "--no-codegen") a.codegen = false;
  else if (s == "-O0" || s == "--O0") a.opt_level = 0, a.opt_level_given = true;
  else if (s == "-O1" || s == "--O1") a.opt_level = 1, a.opt_level_given = true;
  else if (s.rfind("--precision=", 0) == 0) {
    try {
      a.precision = parse_precision(s.substr(12));
      a.precision_given = true;
    } catch (const Error& e) {
      throw UsageError(std::string("--precision: ") + e.what());
    }
  } else if (s.rfind("--skip-pass=", 0) == 0) {
    std::string name = s.substr(12);
    std::vector<std::string> known = pass_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw UsageError("--skip-pass: no pass named '" + name + "'");
    a.skip_passes.insert(name);
  } else return false;
  return true;
}

// The pass pipeline of a.opt_level, without the passes a.skip_passes names.
bool is_artifact_path(const std::string& p) { return p.size() > 4 && p.compare(p.size() - 4, 4, ".cuv") == 0; }

// An artifact's kernels, for the executors of this command (null: none, or not an artifact).
std::shared_ptr<codegen::KernelCodeSource> g_artifact_code;
// An artifact's precision (a bf16 / int8 / auto model saved from Python), used unless --precision is given.
std::string g_artifact_precision;

// A model of any format: an artifact's graph comes optimized (optimize_model leaves it as it is).
std::shared_ptr<Graph> load_any(const std::string& path, const OnnxImportOptions& onnx) {
  if (!is_artifact_path(path)) return load_model(path, onnx);
  artifact::Loaded l = artifact::load_file(path);
  g_artifact_code = l.kernel_code;
  std::string config;  // (the manifest's JSON without blanks)
  for (char c : l.manifest.config_json)
    if (c != ' ' && c != '\n') config += c;
  for (const char* p : {"bf16", "int8"})
    if (config.find(std::string("\"precision\":\"") + p + "\"") != std::string::npos) g_artifact_precision = p;
  return l.graph;
}

void optimize_model(Graph& g, const Args& a) {
  if (!is_artifact_path(a.model)) {
    PassContext ctx;
    ctx.skip = a.skip_passes;
    optimize(g, a.opt_level, ctx);
  }
  // A QDQ model's own int8 layers run int8 by default; --precision fp32 given computes its QDQ graph in f32.
  if (a.precision_given && a.precision == Precision::fp32) keep_model_int8_in_f32(g);
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(s + " needs a value");
      return argv[++i];
    };
    if (s == "--input") {
      auto [n, p] = split_assignment(s, value());
      if (!a.inputs.emplace(n, p).second) throw UsageError("input '" + n + "' given twice");
    } else if (s == "--dim") {
      auto [n, v] = split_assignment(s, value());
      a.dim_specs[n] = v;
    } else if (s == "--sequence") {
      auto [n, v] = split_assignment(s, value());
      a.onnx.sequence_lengths[n] = parse_int(s, v, 0);
    } else if (s == "--absent") {
      a.onnx.absent_optionals.insert(value());
    } else if (s == "--output-dir") a.output_dir = value();
    else if (s == "-o") a.output = value();
    else if (s == "--threads") a.threads = int(parse_int(s, value(), 1));
    else if (s == "--precision") apply_kernel_flag(a, "--precision=" + value());
    else if (s == "--calibration") a.calibration = value();
    else if (apply_kernel_flag(a, s)) continue;
    else if (s == "--versus") a.versus = value();
    else if (s == "--iters") a.iters = int(parse_int(s, value(), 1));
    else if (s == "--warmup") a.warmup = int(parse_int(s, value(), 0));
    else if (s == "--json" && (i + 1 >= argc || argv[i + 1][0] == '-')) a.json = true;
    else if (s == "--json") a.json_out = value();
    else if (s == "--html") a.html = value();
    else if (s == "--trace") a.trace = value();
    else if (s == "--diff") {
      a.diff.push_back(value());
      a.diff.push_back(value());
    } else if (s == "--perf-data") a.perf_data = value();
    else if (s == "--remeasure") a.remeasure = true;
    else if (s == "--ir") a.ir = true;
    else if (s == "--kernels") a.kernels = true;
    else if (s == "--stages") a.stages = true;
    else if (s.size() > 1 && s[0] == '-') throw UsageError("unknown option " + s);
    else pos.push_back(s);
  }
  bool no_model = (pos.size() == 1 && pos[0] == "roofs") || (pos.size() == 1 && pos[0] == "profile" && !a.diff.empty());
  if (pos.size() != 2 && !no_model) throw UsageError("expected a command and a model");
  a.command = pos[0];
  if (pos.size() == 2) a.model = pos[1];
  if (!a.diff.empty() && pos.size() == 2) throw UsageError("profile --diff takes two reports, not a model");
  // compile takes ranges (recorded in the artifact); the other commands a size for random inputs.
  for (auto& [n, v] : a.dim_specs)
    if (a.command != "compile") a.dims[n] = parse_int("--dim", v, 0);
  return a;
}

std::string json_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
      continue;
    }
    r += c;
  }
  return r;
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", double(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

// inspect --kernels: each generated kernel of the -O1 graph (top level, static input shapes) as the lowering makes
// it: the kernel IR, the iteration dims, the schedule and the assembly LLVM emits for this CPU. --stages: each
// stage of the lowering (codegen/lower.h) as it decides, instead of the assembly.
int print_kernels(Graph& g, bool stages) {
  optimize(g, 1);
  int index = 0;
  for (auto& n : g.nodes()) {
    if (n->op() != OpKind::FusedKernel) continue;
    const Graph& body = *AttrReader(*n).g("body");
    std::cout << "== kernel " << index++ << " (node '" << n->output(0)->name() << "')\n";
    std::vector<std::vector<int64_t>> shapes;
    for (const Value* v : n->inputs()) {
      if (!v->shape().is_static()) break;
      shapes.push_back(v->shape().static_dims());
    }
    if (shapes.size() != n->num_inputs()) {
      std::cout << "input shapes are not static: lowered when a call brings them\n";
      continue;
    }
    std::string why;
    codegen::StageObserver observe;
    if (stages)
      observe = [](const char* stage, const std::string& text) {
        std::cout << "-- stage " << stage << ":\n" << text << (text.empty() || text.back() != '\n' ? "\n" : "");
      };
    auto lk = codegen::lower_body(body, shapes, &why, observe);
    if (!lk) {
      std::cout << "runs op by op: " << why << "\n";
      continue;
    }
    codegen::Schedule sched = codegen::choose_schedule(*lk);
    std::cout << lk->ops << " over [";
    for (size_t d = 0; d < lk->dims.size(); ++d) std::cout << (d ? ", " : "") << lk->dims[d];
    std::cout << "], schedule " << sched.str() << "\n";
    if (stages) continue;
    std::cout << lk->kernel.str() << codegen::kernel_assembly(lk->kernel, sched) << "\n";
  }
  if (index == 0) std::cout << "no generated kernels\n";
  return 0;
}

int cmd_inspect(const Args& a) {
  if (is_artifact_path(a.model)) {
    artifact::Loaded l = artifact::load_file(a.model);
    if (a.ir) {
      PrintOptions o;
      o.elide_large_constants = true;
      std::cout << print_graph(*l.graph, o);
      return 0;
    }
    std::cout << "model: " << printable(a.model) << "\n" << artifact::describe(l);
    return 0;
  }
  auto g = load_model(a.model, a.onnx);
  if (a.kernels) return print_kernels(*g, a.stages);
  if (a.ir) {
    if (a.opt_level_given || !a.skip_passes.empty()) optimize_model(*g, a);
    PrintOptions o;
    o.elide_large_constants = true;
    std::cout << print_graph(*g, o);
    return 0;
  }
  GraphStats s = graph_stats(*g);
  // What -O1 makes of it: node count and the layout reorders (NCHW <-> NHWC transposes) that remain.
  auto opt = load_model(a.model, a.onnx);
  optimize(*opt, 1);
  int64_t reorders = 0;
  for (auto& n : opt->nodes()) {
    if (n->op() != OpKind::Transpose || !n->has_attr("perm")) continue;
    const auto& p = n->attrs().at("perm").ints();
    reorders += p == std::vector<int64_t>{0, 2, 3, 1} || p == std::vector<int64_t>{0, 3, 1, 2};
  }
  std::cout << "model: " << a.model << "\n";
  std::cout << "inputs:\n";
  for (Value* v : g->inputs()) std::cout << "  " << printable(v->name()) << ": " << v->type().str() << "\n";
  std::cout << "outputs:\n";
  for (Value* v : g->outputs()) std::cout << "  " << printable(v->name()) << ": " << v->type().str() << "\n";
  std::cout << "nodes: " << s.nodes << "\n";
  std::cout << "ops:\n";
  std::vector<std::pair<std::string, int64_t>> ops(s.op_counts.begin(), s.op_counts.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& x, auto& y) { return x.second > y.second; });
  for (auto& [op, n] : ops) std::cout << "  " << op << ": " << n << "\n";
  std::cout << "parameters: " << s.parameters << " (" << human_bytes(s.parameter_bytes) << ")\n";
  std::cout << "flops: " << s.flops.str();
  if (s.flops.is_const()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.3f GFLOP)", double(s.flops.value()) / 1e9);
    std::cout << buf;
  }
  std::cout << "\n";
  std::cout << "after -O1: " << opt->nodes().size() << " nodes, " << reorders << " layout reorders\n";
  // A QDQ model's own int8 layers (docs/decisions/0004-qdq-models-run-int8.md)
  if (int qdq = count_model_int8(*opt))
    std::cout << "QDQ layers: " << qdq << " (" << kQdqReason << ", at the default precision; --precision fp32 "
              << "computes them in f32)\n";
  return 0;
}

// --precision int8 on a model without int8 hints (not a QDQ model): MinMax calibration on the samples of
// --calibration DIR (for a one-input model each .npy file is a sample; otherwise each subdirectory, holding
// NAME.npy per input), else on the inputs of this command.
void calibrate_if_needed(const std::shared_ptr<Graph>& g, const Args& a, const ExecutorOptions& o,
                         const std::vector<Tensor>& ins) {
  if (a.precision != Precision::int8 || has_quant_hints(*g)) return;
  std::vector<std::vector<Tensor>> samples;
  if (a.calibration.empty()) {
    samples.push_back(ins);
  } else {
    if (!fs::is_directory(a.calibration)) fail("--calibration: '", a.calibration, "' is not a directory");
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(a.calibration)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const fs::path& p : entries) {
      if (g->inputs().size() == 1 && p.extension() == ".npy") {
        samples.push_back({read_npy_file(p.string())});
      } else if (g->inputs().size() > 1 && fs::is_directory(p)) {
        std::vector<Tensor> sample;
        for (Value* v : g->inputs()) sample.push_back(read_npy_file((p / (v->name() + ".npy")).string()));
        samples.push_back(std::move(sample));
      }
    }
    if (samples.empty()) fail("--calibration: no samples in '", a.calibration, "'");
  }
  calibrate_minmax(g, o, samples);
}

// The executor options the flags ask for (an artifact's own precision unless --precision is given).
ExecutorOptions executor_options(const Args& a) {
  ExecutorOptions o;
  o.threads = a.threads;
  o.kernels.fast = !a.reference;
  o.kernels.winograd = a.winograd;
  o.kernels.cpu_gemm = a.cpu_gemm;
  o.kernels.codegen = a.codegen;
  o.kernel_code = g_artifact_code;
  o.kernels.precision = a.precision;
  if (!a.precision_given && !g_artifact_precision.empty()) o.kernels.precision = parse_precision(g_artifact_precision);
  return o;
}

std::unique_ptr<Executor> make_executor(std::shared_ptr<Graph> g, const Args& a,
                                        const std::vector<Tensor>& ins = {}) {
  ExecutorOptions o = executor_options(a);
  calibrate_if_needed(g, a, o, ins);
  return std::make_unique<Executor>(std::move(g), o);
}

std::vector<Tensor> load_inputs(const Graph& g, const Args& a, bool allow_random) {
  for (auto& [name, path] : a.inputs) {
    bool known = false;
    for (Value* v : g.inputs()) known |= v->name() == name;
    if (!known) {
      std::string list;
      for (Value* v : g.inputs()) list += (list.empty() ? "" : ", ") + v->name();
      fail("the model has no input '", name, "' (its inputs: ", list, ")");
    }
  }
  std::mt19937_64 rng(0);
  std::vector<Tensor> ins;
  SymbolBindings dims(a.dims.begin(), a.dims.end());
  for (Value* v : g.inputs()) {
    auto it = a.inputs.find(v->name());
    if (it != a.inputs.end()) {
      ins.push_back(read_npy_file(it->second));
      continue;
    }
    CUVIL_CHECK(allow_random, "missing input '", v->name(), "' (pass --input ", v->name(), "=FILE.npy)");
    CUVIL_CHECK(v->shape().rank_known(), "input '", v->name(), "' has unknown rank: pass it with --input");
    std::vector<int64_t> shape;
    for (auto& d : v->shape().dims()) {
      std::set<std::string> syms;
      d.collect_symbols(syms);
      for (auto& s : syms) dims.emplace(s, 1);  // unbound symbols default to 1 (override with --dim)
      shape.push_back(*d.eval(dims));
    }
    Tensor t = Tensor::zeros(v->dtype(), shape);
    std::uniform_real_distribution<double> u(-1, 1);
    visit_dtype(v->dtype(), [&]<class T>() {
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (is_float_v<T>) p[i] = T(compute_t<T>(u(rng)));
        else if constexpr (std::is_same_v<T, bool>) p[i] = rng() & 1;
        else p[i] = T(rng() % 8);
      }
    });
    ins.push_back(t);
  }
  return ins;
}

std::string file_safe(const std::string& name) {
  std::string r;
  for (char c : name) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (r.empty() || r == "." || r == "..") r = "output" + r;
  return r;
}

int cmd_run(const Args& a) {
  if (a.output_dir.empty()) throw UsageError("run needs --output-dir DIR");
  auto g = load_any(a.model, a.onnx);
  optimize_model(*g, a);
  std::vector<Tensor> ins = load_inputs(*g, a, /*allow_random=*/false);
  auto exec = make_executor(g, a, ins);
  auto outs = exec->run(ins);
  fs::create_directories(a.output_dir);
  std::set<std::string> used;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string base = file_safe(g->outputs()[i]->name()), name = base;
    for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
    used.insert(name);
    std::string path = (fs::path(a.output_dir) / (name + ".npy")).string();
    write_npy_file(path, outs[i]);
    std::cout << printable(g->outputs()[i]->name()) << ": " << outs[i].type_str() << " -> " << printable(path) << "\n";
  }
  return 0;
}

double timed_run(Executor& exec, const std::vector<Tensor>& ins) {
  auto t0 = std::chrono::steady_clock::now();
  exec.run(ins);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::pair<double, double> median_min(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  return {n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2, ms.front()};
}

// bench --versus: the same inputs through a second executor built with the flags in a.versus; the two run
// alternately, one call each in turn.
int bench_versus(const Args& a, Executor& exec, const std::vector<Tensor>& ins) {
  Args b = a;
  std::istringstream flags(a.versus);
  for (std::string f; flags >> f;) {
    if (f == "--precision" && flags >> f) f = "--precision=" + f;
    if (!apply_kernel_flag(b, f))
      throw UsageError("--versus takes kernel flags, --skip-pass=NAME and -O0/-O1, not '" + f + "'");
  }
  auto g = load_any(b.model, b.onnx);
  optimize_model(*g, b);
  auto other = make_executor(g, b, ins);
  for (int i = 0; i < a.warmup; ++i) exec.run(ins), other->run(ins);
  std::vector<double> ms_a, ms_b;
  for (int i = 0; i < a.iters; ++i) {
    ms_a.push_back(timed_run(exec, ins));
    ms_b.push_back(timed_run(*other, ins));
  }
  auto [med_a, min_a] = median_min(ms_a);
  auto [med_b, min_b] = median_min(ms_b);
  if (a.json) {
    std::printf("{\"model\": \"%s\", \"versus\": \"%s\", \"median_ms\": %.9g, \"min_ms\": %.9g, "
                "\"versus_median_ms\": %.9g, \"versus_min_ms\": %.9g, \"ratio\": %.9g, \"iters\": %d}\n",
                json_escape(a.model).c_str(), json_escape(a.versus).c_str(), med_a, min_a, med_b, min_b,
                med_b / med_a, a.iters);
  } else {
    std::printf("%s: median %.3f ms (min %.3f); with %s: median %.3f ms (min %.3f); ratio %.3f, alternated over %d "
                "iterations, %d thread(s)\n",
                a.model.c_str(), med_a, min_a, a.versus.c_str(), med_b, min_b, med_b / med_a, a.iters,
                exec.options().threads);
  }
  return 0;
}

int cmd_bench(const Args& a) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t0) { return std::chrono::duration<double, std::milli>(clock::now() - t0).count(); };
  // Compile time: load + optimize, then prepare (plan, oneDNN primitives, weight packing) for these shapes.
  auto t0 = clock::now();
  auto g = load_any(a.model, a.onnx);
  optimize_model(*g, a);
  double load_ms = since(t0);
  std::vector<Tensor> ins = load_inputs(*g, a, /*allow_random=*/true);
  auto exec = make_executor(g, a, ins);
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : ins) shapes.push_back(t.shape());
  t0 = clock::now();
  exec->prepare(shapes);
  double prepare_ms = since(t0);
  if (!a.versus.empty()) return bench_versus(a, *exec, ins);
  for (int i = 0; i < a.warmup; ++i) exec->run(ins);
  std::vector<double> ms;
  for (int i = 0; i < a.iters; ++i) ms.push_back(timed_run(*exec, ins));
  auto [median, mn] = median_min(ms);
  int threads_used = exec->options().threads;
  const char* backend = a.reference ? "ref" : "fast";
  codegen::JitStats js = codegen::jit_stats();
  if (a.json) {
    std::printf("{\"model\": \"%s\", \"backend\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"iters\": %d, "
                "\"warmup\": %d, \"threads\": %d, \"arena_bytes\": %lld, \"load_optimize_ms\": %.1f, "
                "\"prepare_ms\": %.1f, \"kernels_compiled\": %lld, \"kernels_from_disk\": %lld, "
                "\"codegen_ms\": %.1f}\n",
                json_escape(a.model).c_str(), backend, median, mn, a.iters, a.warmup, threads_used,
                static_cast<long long>(exec->stats().arena_bytes), load_ms, prepare_ms,
                static_cast<long long>(js.compiled), static_cast<long long>(js.disk_hits), js.compile_ms + js.load_ms);
  } else {
    std::printf("%s: median %.3f ms, min %.3f ms over %d iterations (%d warm-up), %d thread(s), backend %s, "
                "arena %s; compile %.0f ms (load + optimize %.0f, prepare %.0f)\n",
                a.model.c_str(), median, mn, a.iters, a.warmup, threads_used, backend,
                human_bytes(exec->stats().arena_bytes).c_str(), load_ms + prepare_ms, load_ms, prepare_ms);
    if (js.compiled + js.disk_hits > 0)
      std::printf("generated kernels: %lld compiled, %lld from the disk cache, %.0f ms (code generation %.0f, "
                  "loading %.0f)\n",
                  static_cast<long long>(js.compiled), static_cast<long long>(js.disk_hits),
                  js.compile_ms + js.load_ms, js.compile_ms, js.load_ms);
  }
  return 0;
}

// Per node: median time over --iters profiled runs, share of the total, the kernel that ran; then totals per op.
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write '" + path + "'");
}

// profile --html/--json/--trace: the report (src/report) of --iters profiled and unprofiled runs.
void write_reports(Executor& exec, const std::vector<Tensor>& ins, const Args& a) {
  report::ProfileOptions po;
  po.iters = a.iters;
  po.warmup = a.warmup;
  po.model = a.model;
  std::string doc = report::profile_json(exec, ins, po);
  if (!a.json_out.empty()) write_text(a.json_out, doc);
  if (!a.html.empty()) write_text(a.html, report::profile_html(doc));
  if (!a.trace.empty()) write_text(a.trace, report::chrome_trace_json(doc));
}

int cmd_roofs(const Args& a) {
  report::Roofs r = report::machine_roofs(a.threads, a.remeasure);
  std::printf("%s, %d thread(s): fp32 FMA %.1f GFLOP/s (%s), DRAM read %.1f GB/s, L2 read %.1f GB/s\n", r.cpu.c_str(),
              r.threads, r.fma_gflops, r.isa.c_str(), r.dram_gbps, r.cache_gbps);
  if (a.json) std::printf("%s\n", r.to_json().c_str());
  return 0;
}

int cmd_profile(const Args& a) {
  if (!a.diff.empty()) {
    std::fputs(report::diff_reports(read_text(a.diff[0]), read_text(a.diff[1])).c_str(), stdout);
    return 0;
  }
  if (!a.perf_data.empty()) {  // the model argument is the report of the recorded run
    std::string folded = report::fold_perf_samples(read_text(a.model), report::read_perf_data(a.perf_data));
    if (!a.json_out.empty()) write_text(a.json_out, folded);
    if (!a.html.empty()) write_text(a.html, report::profile_html(folded));
    std::fputs(report::perf_table(folded).c_str(), stdout);
    return 0;
  }
  auto g = load_any(a.model, a.onnx);
  optimize_model(*g, a);
  std::vector<Tensor> ins = load_inputs(*g, a, /*allow_random=*/true);
  auto exec = make_executor(g, a, ins);
  for (int i = 0; i < std::max(a.warmup, 1); ++i) exec->run(ins);
  std::vector<std::vector<NodeTime>> runs;
  for (int i = 0; i < a.iters; ++i) runs.push_back(exec->profile(ins));
  struct Row {
    const Node* node;
    std::string impl;
    double ms;
    std::string fallback;
  };
  std::vector<Row> rows;
  double total = 0;
  size_t covered = 0;  // rows still to come that ran inside a later one (counted there)
  std::vector<bool> top(runs[0].size(), true);
  for (size_t k = runs[0].size(); k-- > 0;) {
    if (covered > 0) top[k] = false, --covered;
    covered = std::max(covered, runs[0][k].nested);  // (a nested row's own rows are inside its parent's span)
  }
  for (size_t k = 0; k < runs[0].size(); ++k) {
    std::vector<double> t;
    for (auto& r : runs)
      if (k < r.size() && r[k].node == runs[0][k].node) t.push_back(r[k].ms);
    std::sort(t.begin(), t.end());
    rows.push_back({runs[0][k].node, runs[0][k].impl, t[t.size() / 2], runs[0][k].fallback});
    if (top[k]) total += rows.back().ms;
  }
  // Achieved rate: GFLOP/s for convolutions and matrix products, GB/s (inputs + outputs) for the rest; sizes
  // from the IR evaluated at this run's symbol values (blank where a size depends on data).
  SymbolBindings b = bind_inputs(*g, ins);
  auto rate = [&](const Node& n, double ms) -> std::string {
    char buf[32];
    if (flops_exact(n)) {
      auto f = node_flops(n).eval(b);
      if (!f || ms <= 0) return "";
      std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", double(*f) / (ms * 1e6));
      return buf;
    }
    double bytes = 0;
    for (const std::vector<Value*>* vs : {&n.inputs(), &n.outputs()})
      for (const Value* v : *vs) {
        if (!v || !v->shape().rank_known()) continue;
        auto e = v->shape().numel().eval(b);
        if (!e) return "";
        bytes += double(*e) * double(dtype_size(v->dtype()));
      }
    if (ms <= 0) return "";
    std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes / (ms * 1e6));
    return buf;
  };
  std::printf("%s: %zu kernels, %.3f ms (sum of per-node medians over %d runs), %d thread(s)\n", a.model.c_str(),
              rows.size(), total, a.iters, exec->options().threads);
  std::printf("%10s %7s %14s  %-18s %-36s %s\n", "ms", "share", "rate", "op", "kernel", "node");
  for (auto& r : rows)
    std::printf("%10.3f %6.1f%% %14s  %-18s %-36s %s\n", r.ms, 100 * r.ms / std::max(total, 1e-12),
                rate(*r.node, r.ms).c_str(), node_label(*r.node).c_str(), r.impl.c_str(),
                printable(r.node->describe()).c_str());
  std::map<std::string, std::pair<double, int>> per_op;
  for (auto& r : rows) {
    auto& e = per_op[node_label(*r.node)];
    e.first += r.ms;
    e.second += 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(per_op.begin(), per_op.end());
  std::sort(ops.begin(), ops.end(), [](auto& x, auto& y) { return x.second.first > y.second.first; });
  std::printf("per op:\n");
  for (auto& [op, e] : ops)
    std::printf("%10.3f %6.1f%%  %-18s x%d\n", e.first, 100 * e.first / std::max(total, 1e-12), op.c_str(), e.second);
  // Why kernels took a slower path (kernel selection's reason), once per distinct reason and op.
  std::map<std::pair<std::string, std::string>, int> fallbacks;
  for (auto& r : rows)
    if (!r.fallback.empty()) ++fallbacks[{node_label(*r.node), r.fallback}];
  if (!fallbacks.empty()) std::printf("fallbacks (slower kernels, and why):\n");
  for (auto& [key, n] : fallbacks)
    std::printf("  %-18s x%-3d %s\n", key.first.c_str(), n, printable(key.second).c_str());
  if (!a.html.empty() || !a.json_out.empty() || !a.trace.empty()) write_reports(*exec, ins, a);
  return 0;
}

// The SHA-256 of the model file, read in blocks (the artifact's model fingerprint).
std::string file_fingerprint(const std::string& path) {
  RegularFile f = RegularFile::open(path, "model");
  Sha256 h;
  std::string buf(size_t(1) << 20, '\0');
  for (uint64_t at = 0; at < f.size();) {
    size_t n = size_t(std::min<uint64_t>(buf.size(), f.size() - at));
    f.read_at(at, buf.data(), n);
    h.update(buf.data(), n);
    at += n;
  }
  return "sha256:" + to_hex(h.finish());
}

// cuvil compile MODEL -o OUT.cuv: the optimized graph, its weights and manifest in one file.
int cmd_compile(const Args& a) {
  if (a.output.empty()) throw UsageError("compile needs -o OUT.cuv");
  if (is_artifact_path(a.model)) throw UsageError("compile takes an .onnx or .cvir model, not an artifact");
  if (!a.calibration.empty() && a.precision != Precision::int8)
    throw UsageError("--calibration is for --precision int8");
  auto t0 = std::chrono::steady_clock::now();
  auto g = load_model(a.model, a.onnx);
  std::shared_ptr<Graph> source;  // (constants shared) the weights before the passes fold them
  try {
    source = clone_graph(*g);
  } catch (const Error&) {  // (a graph the copy cannot verify yet: the artifact updates by its own names)
  }
  optimize_model(*g, a);
  // bf16 / int8: the precision goes into the manifest's config (run, bench and cuvil.load run at it); int8's
  // grids are node attributes of the saved graph, calibrated here on --calibration DIR unless the model is QDQ.
  ExecutorOptions options = executor_options(a);
  if (a.precision == Precision::int8 && !has_quant_hints(*g) && a.calibration.empty())
    throw UsageError("compile --precision int8 needs --calibration DIR (.npy samples) unless the model is QDQ");
  calibrate_if_needed(g, a, options, {});
  artifact::SaveInput in;
  in.graph = g;
  if (source) {  // updates by the original names (runtime/weight_recipes.h)
    auto recipes = std::make_shared<WeightRecipes>(derive_fold_recipes(*source, *g));
    if (!recipes->folds.empty()) in.recipes = recipes;
    source.reset();
  }
  std::string skip;
  for (const std::string& p : a.skip_passes) skip += (skip.empty() ? "\"" : ", \"") + json_escape(p) + "\"";
  in.config_json = "{\"device\": \"cpu\", \"opt_level\": " + std::to_string(a.opt_level) +
                   ", \"precision\": \"" + std::string(precision_name(a.precision)) + "\", \"skip_passes\": [" + skip + "]}";
  for (auto& [sym, spec] : a.dim_specs) {
    artifact::DimRange r{sym};
    size_t dots = spec.find("..");
    if (dots == std::string::npos) r.lo = r.hi = parse_int("--dim", spec, 0);
    else {
      r.lo = dots == 0 ? -1 : parse_int("--dim", spec.substr(0, dots), 0);
      r.hi = dots + 2 == spec.size() ? -1 : parse_int("--dim", spec.substr(dots + 2), 0);
      if (r.lo >= 0 && r.hi >= 0 && r.lo > r.hi) throw UsageError("--dim " + sym + ": empty range " + spec);
    }
    in.dim_ranges.push_back(r);
  }
  in.model_fingerprint = file_fingerprint(a.model);
  in.tuned_for = codegen::jit_host_description();
  codegen::add_compiled_kernels(g, in);  // the generated kernels as machine code
  artifact::add_prepacked_weights(in, options);  // the weights in the kernels' layouts
  artifact::save(a.output, in);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "wrote " << printable(a.output) << " (" << human_bytes(int64_t(std::filesystem::file_size(a.output)))
            << ") in " << std::lround(ms) << " ms\n";
  return 0;
}

// The commands that run in the Python front end, with $CUVIL_PYTHON (else python3) and the cuvil package beside
// this program (a wheel's cuvil/bin/cuvil) or in the source tree (build/bin/cuvil -> python/): `cuvil cache ...`
// (python/cuvil/cache_cli.py: the model cache is keyed by what only the front end knows) and `cuvil compile
// --precision auto` (python/cuvil/auto_compile_cli.py: the search runs the model on samples from Python).
// argv[first..] are passed on.
int python_module_main(const std::string& module, const std::string& what, int first, int argc, char** argv) {
  fs::path exe = fs::read_symlink("/proc/self/exe");
  std::string path;
  for (const fs::path& p : {exe.parent_path().parent_path().parent_path(),                 // site-packages/cuvil/bin
                            exe.parent_path().parent_path().parent_path() / "python"}) {  // <tree>/build/bin
    std::error_code ec;
    if (fs::exists(p / "cuvil" / "cache_cli.py", ec)) path = p.string();
  }
  if (!path.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    std::string pp = path + (old && *old ? ":" + std::string(old) : "");
    ::setenv("PYTHONPATH", pp.c_str(), 1);
  }
  const char* py = std::getenv("CUVIL_PYTHON");
  std::string python = py && *py ? py : "python3";
  std::vector<std::string> args = {python, "-m", module};
  for (int i = first; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  ::execvp(python.c_str(), cargs.data());
  std::cerr << "cuvil: error: cannot run " << printable(python) << " for `" << what << "` (" << std::strerror(errno)
            << "; set CUVIL_PYTHON to the Python that has the cuvil package)\n";
  return 1;
}

// Whether argv is `compile ... --precision auto` (or --precision=auto).
bool is_auto_compile(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "compile") return false;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--precision=auto" || (s == "--precision" && i + 1 < argc && std::string(argv[i + 1]) == "auto"))
      return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "--version" || std::string(argv[1]) == "version")) {
    std::cout << "cuvil " << CUVIL_VERSION << "\n";
    return 0;
  }
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "serve") return serving::serve_main(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "cache") return python_module_main("cuvil.cache_cli", "cuvil cache", 2, argc, argv);
  if (is_auto_compile(argc, argv))
    return python_module_main("cuvil.auto_compile_cli", "cuvil compile --precision auto", 2, argc, argv);
  try {
    Args a = parse_args(argc, argv);
    if (a.command == "compile") return cmd_compile(a);
    if (a.command == "inspect") return cmd_inspect(a);
    if (a.command == "run") return cmd_run(a);
    if (a.command == "bench") return cmd_bench(a);
    if (a.command == "profile") return cmd_profile(a);
    if (a.command == "roofs") return cmd_roofs(a);
    throw UsageError("unknown command '" + a.command + "'");
  } catch (const UsageError& e) {
    std::cerr << "cuvil: " << printable(e.what()) << "\n" << kUsage;
    return 2;
  } catch (const InternalError& e) {
    std::cerr << "cuvil: " << printable(e.what()) << " (a bug in Cuvil: please report it with this message)\n";
    return 70;  // EX_SOFTWARE
  } catch (const std::exception& e) {
    std::cerr << "cuvil: error: " << printable(e.what()) << "\n";
    return 1;
  }
}
