// Runs the ONNX backend node test suite against Cuvil's reference backend.
//
// Each case directory holds model.onnx and test_data_set_N/{input,output}_K.pb. A case passes when every output
// matches within the suite's tolerances (rtol 1e-3, atol 1e-7, bf16 outputs rtol 2^-6; exact for integers and
// booleans; NaN == NaN).
// A case may be skipped only when its model uses an op outside Cuvil's op table; the reason is printed.
//
//   cuvil_onnx_conformance DIR [--filter SUBSTRING] [--verbose] [--min-pass-rate 0.85] [--optimize]
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "frontend/onnx/converter.h"
#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/static_sequences.h"
#include "passes/pipeline.h"
#include "ir/low_precision.h"
#include "ir/op_schema.h"
#include "runtime/executor.h"

namespace fs = std::filesystem;
using namespace cuvil;

namespace {

// --optimize: run the -O1 pass pipeline (with the verifier after every pass) after import.
bool g_optimize = false;
// --special-values: NaN, +Inf and -Inf written into every floating-point input, and the outputs of the fast
// kernels compared with the reference kernels' on those inputs (instead of the data set's outputs): every fast
// path must propagate special values as the reference does, and fail where it fails.
bool g_special_values = false;

// Overwrites three elements of a floating-point tensor (first, middle, last) with NaN, +Inf and -Inf.
Tensor with_special_values(const Tensor& t) {
  if (!is_float(t.dtype()) || t.numel() == 0) return t;
  Tensor r = t.clone();
  const float special[] = {std::nanf(""), INFINITY, -INFINITY};
  const int64_t at[] = {0, r.numel() / 2, r.numel() - 1};
  visit_dtype(r.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>)
      for (int k = 0; k < 3; ++k) static_cast<T*>(r.raw())[at[k]] = T(special[k]);
  });
  return r;
}

// Ops outside the op table, by the reason they are out of scope.
std::string out_of_scope_reason(const std::string& op) {
  auto starts = [&](const char* p) { return op.rfind(p, 0) == 0; };
  if (op == "Gradient") return "training op";  // (the optimizer steps are converted: convert_training.cpp)
  if (starts("Random") || op == "Bernoulli" || op == "Multinomial") return "random op";
  if (op == "DFT" || op == "STFT" || op == "MelWeightMatrix" || op.find("Window") != std::string::npos)
    return "signal op";
  if (op == "NonMaxSuppression" || op == "RoiAlign" || op == "GridSample" || op == "MaxRoiPool")
    return "detection op";
  return "not in the op table";
}

void collect_ops(const onnx::GraphProto& g, std::set<std::string>& ops) {
  for (const auto& n : g.node()) {
    // Ops of other domains as the converter table keys them, "domain:Name".
    bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    ops.insert(default_domain ? n.op_type() : n.domain() + ":" + n.op_type());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_ops(a.g(), ops);
      for (const auto& sg : a.graphs()) collect_ops(sg, ops);
    }
  }
}

// Graph inputs and outputs Cuvil cannot bind: maps, sparse tensors. (Sequences and optionals
// are bound at import, below.)
bool has_unbindable_io(const onnx::GraphProto& g) {
  auto bad = [](const onnx::TypeProto* t) {
    if (t->has_optional_type()) t = &t->optional_type().elem_type();
    if (t->has_sequence_type()) t = &t->sequence_type().elem_type();
    return !t->has_tensor_type();
  };
  for (const auto& v : g.input())
    if (bad(&v.type())) return true;
  for (const auto& v : g.output())
    if (bad(&v.type())) return true;
  return false;
}

// One value of a data set, as the model's declared type reads it: a tensor, a sequence of tensors, or an
// optional (absent, or holding one of those).
struct DataValue {
  OnnxIoSlot::Kind kind = OnnxIoSlot::Kind::Tensor;
  std::vector<Tensor> tensors;
};

DataValue read_data_value(const fs::path& file, const onnx::TypeProto& type) {
  std::ifstream f(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto sequence = [&](const onnx::SequenceProto& sp) {
    DataValue v{OnnxIoSlot::Kind::Sequence, {}};
    CUVIL_CHECK(sp.elem_type() == onnx::SequenceProto::TENSOR || sp.tensor_values_size() == 0, file.string(),
                ": only sequences of tensors are supported");
    for (const auto& t : sp.tensor_values()) v.tensors.push_back(onnx_tensor_to_cuvil(&t, ""));
    return v;
  };
  if (type.has_sequence_type()) {
    onnx::SequenceProto sp;
    CUVIL_CHECK(sp.ParseFromString(bytes), file.string(), ": not a SequenceProto");
    return sequence(sp);
  }
  if (type.has_optional_type()) {
    onnx::OptionalProto op;
    CUVIL_CHECK(op.ParseFromString(bytes), file.string(), ": not an OptionalProto");
    if (op.has_sequence_value()) return sequence(op.sequence_value());
    if (op.has_tensor_value()) return {OnnxIoSlot::Kind::Tensor, {onnx_tensor_to_cuvil(&op.tensor_value(), "")}};
    return {OnnxIoSlot::Kind::None, {}};
  }
  return {OnnxIoSlot::Kind::Tensor, {read_onnx_tensor_file(file.string())}};
}

// The graph's inputs that are not initializers (the data set's input_K.pb files, in order).
std::vector<const onnx::ValueInfoProto*> runtime_inputs(const onnx::GraphProto& g) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<const onnx::ValueInfoProto*> r;
  for (const auto& v : g.input())
    if (!inits.count(v.name())) r.push_back(&v);
  return r;
}

// Element types outside Cuvil's dtypes (float8e8m0, float6, string, complex): the first one a
// case's graph, its node attributes ('to', 'output_dtype', tensor values) or its subgraphs use, or "".
std::string unsupported_element_type(const onnx::GraphProto& g) {
  auto bad = [](int id) { return id != onnx::TensorProto::UNDEFINED && !dtype_from_onnx_id(id); };
  auto name = [](int id) {
    return onnx::TensorProto_DataType_IsValid(id) ? onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(id))
                                                  : "type " + std::to_string(id);
  };
  for (const auto* list : {&g.input(), &g.output()})
    for (const auto& v : *list)
      if (v.type().has_tensor_type() && bad(v.type().tensor_type().elem_type()))
        return name(v.type().tensor_type().elem_type());
  for (const auto& t : g.initializer())
    if (bad(t.data_type())) return name(t.data_type());
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if ((a.name() == "to" || a.name() == "output_dtype" || a.name() == "output_datatype") && a.has_i() &&
          bad(int(a.i())))
        return name(int(a.i()));
      if (a.has_t() && bad(a.t().data_type())) return name(a.t().data_type());
      if (a.has_g())
        if (std::string r = unsupported_element_type(a.g()); !r.empty()) return r;
      for (const auto& sg : a.graphs())
        if (std::string r = unsupported_element_type(sg); !r.empty()) return r;
    }
  return "";
}

// NumPy has no bfloat16, so onnx 1.12's generator stores bf16 test data as uint16 bit patterns: read them as
// the bf16 values they are when the model says bf16.
Tensor as_dtype_bits(Tensor t, DType want) {
  if (want == DType::bf16 && t.dtype() == DType::u16) {
    Tensor r = Tensor::zeros(DType::bf16, t.shape());
    if (t.nbytes()) std::memcpy(r.raw(), t.raw(), t.nbytes());
    return r;
  }
  return t;
}

// Empty string when equal within tolerance, else a description of the first mismatch. bf16 outputs compare with
// rtol at least 2^-6, two bf16 units in the last place, as onnx's own runner does (onnx 1.23,
// backend/test/runner assert_similar_outputs): its bf16 cases' expected values come from numpy rounding every
// intermediate (a Softmax's exp, each partial sum) to bf16.
std::string compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.dtype() == DType::bf16) rtol = std::max(rtol, 1.0 / 64);
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + " != expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + " != expected " + shape_str(want.shape());
  if (got.dtype() == DType::str) {
    for (int64_t i = 0; i < got.numel(); ++i)
      if (got.str(i) != want.str(i)) return "element " + std::to_string(i) + ": got \"" + got.str(i) + "\", expected \"" + want.str(i) + "\"";
    return "";
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    bool ok;
    if (is_float(got.dtype()) || (is_low_precision(got.dtype()) && is_low_precision_float(got.dtype()))) {
      if (std::isnan(w)) ok = std::isnan(g);
      else if (std::isinf(w)) ok = g == w;
      else ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    } else {
      ok = got.get_i64(i) == want.get_i64(i) && g == w;
    }
    if (!ok) {
      std::ostringstream os;
      os << "element " << i << ": got " << g << ", expected " << w;
      return os.str();
    }
  }
  return "";
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    auto num = [](const fs::path& p) {
      std::string s = p.stem().string();
      return std::stoi(s.substr(s.find('_') + 1));
    };
    return num(a) < num(b);
  });
  return files;
}

enum class Result { Pass, Fail, Skip };

// Dropout in training mode with a ratio > 0 draws a random mask: it is a random op, out of scope like Bernoulli.
// Its ratio and training_mode come from the data set, so the check reads them.
bool uses_random_dropout(const onnx::GraphProto& g, const fs::path& dir) {
  for (const auto& n : g.node()) {
    if (n.op_type() != "Dropout" || n.input_size() < 3 || n.input(2).empty()) continue;
    auto input_index = [&](const std::string& name) {
      for (int i = 0; i < g.input_size(); ++i)
        if (g.input(i).name() == name) return i;
      return -1;
    };
    int ri = input_index(n.input(1)), ti = input_index(n.input(2));
    for (auto& ds : fs::directory_iterator(dir)) {
      if (!ds.is_directory()) continue;
      auto file = [&](int i) { return (ds.path() / ("input_" + std::to_string(i) + ".pb")).string(); };
      if (ti < 0 || !fs::exists(file(ti))) continue;
      bool training = read_onnx_tensor_file(file(ti)).get_i64(0) != 0;
      double ratio = ri >= 0 && fs::exists(file(ri)) ? read_onnx_tensor_file(file(ri)).get_f64(0) : 0.5;
      if (training && ratio > 0) return true;
    }
  }
  return false;
}

// A case whose model and expected outputs disagree in the generator itself, or "". onnx 1.12's
// test_adam_multiple computes its outputs with epsilon 1e-2 but leaves the attribute off the node (so the model
// says 1e-6); onnx later added the attribute, and Cuvil passes the corrected case of onnx 1.23's suite.
std::string invalid_generated_case(const fs::path& dir, const onnx::GraphProto& g) {
  if (dir.filename() != "test_adam_multiple") return "";
  for (const auto& n : g.node()) {
    if (n.op_type() != "Adam") continue;
    bool has_epsilon = std::any_of(n.attribute().begin(), n.attribute().end(),
                                   [](const onnx::AttributeProto& a) { return a.name() == "epsilon"; });
    if (!has_epsilon)
      return "invalid test data: the Adam node has no epsilon (1e-6 then) but its outputs were computed with 1e-2";
  }
  return "";
}

Result run_case(const fs::path& dir, bool verbose, std::string& why) {
  onnx::ModelProto m;
  {
    std::ifstream f(dir / "model.onnx", std::ios::binary);
    if (!m.ParseFromIstream(&f)) {
      why = "cannot parse model.onnx";
      return Result::Fail;
    }
  }
  std::set<std::string> ops;
  collect_ops(m.graph(), ops);
  for (const auto& op : ops) {
    // In scope: ops of the table, and ONNX ops the importer lowers to them (Constant, Upsample, Scatter, ...).
    // Cuvil's own fused ops share no names with ONNX's but Attention, which ONNX defined in opset 23.
    if (op == "Constant" || onnx_converters().count(op) || is_sequence_op(op) ||
        (op_from_name(op) && op_family(*op_from_name(op)) != "fused"))
      continue;
    why = op + ": " + out_of_scope_reason(op);
    return Result::Skip;
  }
  if (why = invalid_generated_case(dir, m.graph()); !why.empty()) return Result::Skip;
  if (uses_random_dropout(m.graph(), dir)) {
    why = "Dropout: random op (training mode with ratio > 0 draws a random mask)";
    return Result::Skip;
  }
  if (std::string t = unsupported_element_type(m.graph()); !t.empty()) {
    why = "element type " + t + " (outside Cuvil's dtypes)";
    return Result::Skip;
  }
  if (has_unbindable_io(m.graph())) {
    why = "map or sparse values as graph inputs or outputs";
    return Result::Skip;
  }
  // Sequence and optional values are resolved at import (static_sequences.h): sequence inputs are bound to the
  // lengths the first data set gives (each element one tensor input), optional inputs to its presence, and
  // sequence outputs come back as their elements (`layout` says how many).
  std::vector<const onnx::ValueInfoProto*> onnx_inputs = runtime_inputs(m.graph());
  auto read_data_set = [&](const fs::path& ds) {
    std::vector<DataValue> values;
    for (auto& p : sorted_files(ds, "input_")) {
      size_t k = values.size();
      if (k < onnx_inputs.size()) values.push_back(read_data_value(p, onnx_inputs[k]->type()));
      else values.push_back({OnnxIoSlot::Kind::Tensor, {read_onnx_tensor_file(p.string())}});
    }
    return values;
  };
  OnnxImportOptions import_options;
  OnnxIoLayout layout;
  import_options.layout = &layout;
  std::string bound_by;  // the data set the bindings come from
  for (auto& ds : fs::directory_iterator(dir)) {
    if (!ds.is_directory() || ds.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    if (!bound_by.empty() && ds.path().filename().string() > bound_by) continue;
    bound_by = ds.path().filename().string();
    import_options.sequence_lengths.clear();
    import_options.absent_optionals.clear();
    std::vector<DataValue> values = read_data_set(ds.path());
    for (size_t k = 0; k < values.size() && k < onnx_inputs.size(); ++k) {
      if (values[k].kind == OnnxIoSlot::Kind::Sequence)
        import_options.sequence_lengths[onnx_inputs[k]->name()] = int64_t(values[k].tensors.size());
      if (values[k].kind == OnnxIoSlot::Kind::None) import_options.absent_optionals.insert(onnx_inputs[k]->name());
    }
  }
  try {
    std::shared_ptr<Graph> graph;
    try {
      graph = import_onnx_file((dir / "model.onnx").string(), import_options);
    } catch (const StaticSequenceError& e) {
      // (without the file's path, which every message of the importer starts with)
      std::string msg = e.what(), path = (dir / "model.onnx").string() + ": ";
      if (msg.rfind(path, 0) == 0) msg = msg.substr(path.size());
      why = "sequence or optional value not resolvable when the graph is built: " + msg;
      return Result::Skip;
    }
    std::unique_ptr<Executor> reference;
    if (g_special_values) {
      ExecutorOptions ref_options;
      ref_options.kernels.fast = false;
      reference = std::make_unique<Executor>(import_onnx_file((dir / "model.onnx").string(), import_options),
                                             ref_options);
    }
    if (g_optimize) {
      PassContext ctx;
      ctx.verify_each = true;
      optimize(*graph, 1, ctx);
    }
    Executor exec(graph);
    for (auto& ds : fs::directory_iterator(dir)) {
      if (!ds.is_directory() || ds.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      std::vector<Tensor> inputs;
      std::vector<DataValue> values = read_data_set(ds.path());
      for (size_t k = 0; k < values.size(); ++k) {
        std::string name = k < onnx_inputs.size() ? onnx_inputs[k]->name() : "";
        bool bound_absent = import_options.absent_optionals.count(name) != 0;
        auto len = import_options.sequence_lengths.find(name);
        if ((values[k].kind == OnnxIoSlot::Kind::None) != bound_absent ||
            (len != import_options.sequence_lengths.end() && int64_t(values[k].tensors.size()) != len->second)) {
          why = ds.path().filename().string() + ": input '" + name + "' has another length or presence than in " +
                bound_by + " (the model is imported once)";
          return Result::Fail;
        }
        for (Tensor& t : values[k].tensors) {
          size_t at = inputs.size();
          inputs.push_back(at < graph->inputs().size() ? as_dtype_bits(t, graph->inputs()[at]->dtype()) : t);
        }
      }
      // A data set that contradicts the model's own declared static input shape cannot run on any runtime that
      // validates inputs (onnx 1.12 ships four such castlike bf16 cases); it is reported, not counted as a pass.
      for (size_t k = 0; k < inputs.size() && k < graph->inputs().size(); ++k) {
        const Shape& decl = graph->inputs()[k]->shape();
        if (!decl.is_static() || decl.static_dims() == inputs[k].shape()) continue;
        why = "invalid test data: input '" + graph->inputs()[k]->name() + "' is declared " + decl.str() +
              " but the data set holds " + shape_str(inputs[k].shape());
        return Result::Skip;
      }
      // Optional graph inputs may be omitted in the data set; the model's own inputs decide the count.
      if (inputs.size() != graph->inputs().size()) {
        why = "data set has " + std::to_string(inputs.size()) + " inputs, graph " +
              std::to_string(graph->inputs().size());
        return Result::Fail;
      }
      if (g_special_values) {
        for (Tensor& t : inputs) t = with_special_values(t);
        std::vector<Tensor> want;
        std::string ref_error;
        try {
          want = reference->run(inputs);
        } catch (const Error& e) {
          ref_error = e.what();
        }
        std::vector<Tensor> got;
        try {
          got = exec.run(inputs);
        } catch (const Error& e) {
          if (!ref_error.empty()) continue;  // both refuse these inputs
          why = ds.path().filename().string() + ": the fast kernels raised '" + e.what() +
                "' where the reference ran";
          return Result::Fail;
        }
        if (!ref_error.empty()) {
          why = ds.path().filename().string() + ": the reference raised '" + ref_error + "' where the fast kernels ran";
          return Result::Fail;
        }
        for (size_t k = 0; k < got.size(); ++k) {
          std::string diff = compare(got[k], want[k], 1e-3, 1e-7);
          if (!diff.empty()) {
            why = ds.path().filename().string() + " output " + std::to_string(k) + " ('" +
                  graph->outputs()[k]->name() + "') with NaN/Inf inputs, against the reference: " + diff;
            return Result::Fail;
          }
        }
        continue;
      }
      auto outputs = exec.run(inputs);
      auto expected = sorted_files(ds.path(), "output_");
      if (expected.size() != layout.outputs.size() || int(expected.size()) != m.graph().output_size()) {
        why = "produced " + std::to_string(layout.outputs.size()) + " outputs, expected " +
              std::to_string(expected.size());
        return Result::Fail;
      }
      size_t at = 0;  // the first Graph output of ONNX output k
      for (size_t k = 0; k < expected.size(); ++k) {
        const OnnxIoSlot& slot = layout.outputs[k];
        DataValue want = read_data_value(expected[k], m.graph().output(int(k)).type());
        std::string name = m.graph().output(int(k)).name();
        if (want.kind == OnnxIoSlot::Kind::None ? slot.kind != OnnxIoSlot::Kind::None
                                                 : want.tensors.size() != slot.count) {
          why = ds.path().filename().string() + " output " + std::to_string(k) + " ('" + name + "'): " +
                (slot.kind == OnnxIoSlot::Kind::None ? std::string("empty") : std::to_string(slot.count) +
                 " element(s)") + ", expected " +
                (want.kind == OnnxIoSlot::Kind::None ? std::string("empty") : std::to_string(want.tensors.size()) +
                 " element(s)");
          return Result::Fail;
        }
        for (size_t e = 0; e < want.tensors.size(); ++e, ++at) {
          std::string diff = compare(outputs[at], as_dtype_bits(want.tensors[e], outputs[at].dtype()), 1e-3, 1e-7);
          if (!diff.empty()) {
            why = ds.path().filename().string() + " output " + std::to_string(k) + " ('" + name + "')" +
                  (slot.kind == OnnxIoSlot::Kind::Tensor ? "" : " element " + std::to_string(e)) + ": " + diff;
            return Result::Fail;
          }
        }
      }
    }
  } catch (const std::exception& e) {
    why = e.what();
    return Result::Fail;
  }
  (void)verbose;
  return Result::Pass;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: cuvil_onnx_conformance NODE_TEST_DIR [--filter S] [--verbose] [--min-pass-rate R] [--optimize] "
                 "[--special-values] [--total N]\n";
    return 2;
  }
  fs::path root = argv[1];
  std::string filter;
  bool verbose = false;
  double min_rate = 0;
  int64_t total_cases = 0;  // the suite size the pass rate is measured against (default: cases found)
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--optimize") g_optimize = true;
    else if (a == "--special-values") g_special_values = true;
    else if (a == "--verbose") verbose = true;
    else if (a == "--min-pass-rate" && i + 1 < argc) min_rate = std::stod(argv[++i]);
    else if (a == "--total" && i + 1 < argc) total_cases = std::stoll(argv[++i]);
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  std::vector<fs::path> cases;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, std::vector<std::string>> skip_reasons;
  for (auto& c : cases) {
    std::string why;
    Result r = run_case(c, verbose, why);
    std::string name = c.filename().string();
    if (r == Result::Pass) {
      ++passed;
      if (verbose) std::cout << "PASS " << name << "\n";
    } else if (r == Result::Fail) {
      ++failed;
      std::cout << "FAIL " << name << ": " << why << "\n";
    } else {
      ++skipped;
      skip_reasons[why].push_back(name);
    }
  }
  if (!skip_reasons.empty()) {
    std::cout << "skipped (ops outside the op table, random ops, invalid test data, sequences not resolvable at "
                 "import):\n";
    for (auto& [why, names] : skip_reasons) {
      std::cout << "  " << why << ": " << names.size() << " case(s):";
      for (auto& n : names) std::cout << " " << n;
      std::cout << "\n";
    }
  }
  if (total_cases == 0) total_cases = int64_t(cases.size());
  double rate = total_cases ? double(passed) / double(total_cases) : 0;
  std::cout << "conformance: " << passed << " of " << total_cases << " cases pass (" << int(rate * 1000) / 10.0
            << "%)\n";
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (failed > 0) return 1;
  if (rate < min_rate) {
    std::cout << "pass rate " << rate << " is below the required " << min_rate << "\n";
    return 1;
  }
  return 0;
}
