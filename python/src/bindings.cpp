// The cuvil._C extension: the only translation unit that includes pybind11.
//
// It exposes three things to the Python package: a GraphBuilder (frontends build Cuvil IR node by node and read
// each node's inferred types at once), Model (an inferred, verified graph plus a pool of executors) and the
// error types. Tensors cross the boundary as NumPy arrays without copies: inputs through the buffer protocol,
// outputs as arrays whose base object keeps the runtime's tensor alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <mutex>
#include <unordered_set>

#include "artifact/artifact.h"
#include "artifact/cache_key.h"
#include "artifact/kernel_library.h"
#include "artifact/prepacked.h"
#include "codegen/llvm/aot.h"
#include "codegen/llvm/host_cpu.h"
#include "codegen/llvm/jit.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/graph_stats.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "kernels/onednn/onednn_kernels.h"
#include "passes/pipeline.h"
#include "runtime/calibration.h"
#include "runtime/executor.h"
#include "runtime/run_error.h"
#include "runtime/versioned_model.h"
#include "runtime/weight_recipes.h"
#include "runtime/weights.h"
#include "report/html_report.h"
#include "report/profile_report.h"
#include "report/roofs.h"
#include "support/check_failed.h"

namespace py = pybind11;
using namespace cuvil;

namespace {

// ---- dtypes between NumPy and Cuvil. NumPy has no bf16: it travels as uint16 bits, and the Python layer
// reinterprets (torch's bfloat16 <-> int16 views).

DType dtype_from_numpy(const py::dtype& d) {
  char kind = d.kind();
  size_t size = size_t(d.itemsize());
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'b') return DType::boolean;
  if (kind == 'i') {
    if (size == 1) return DType::i8;
    if (size == 2) return DType::i16;
    if (size == 4) return DType::i32;
    if (size == 8) return DType::i64;
  }
  if (kind == 'u') {
    if (size == 1) return DType::u8;
    if (size == 2) return DType::u16;
    if (size == 4) return DType::u32;
    if (size == 8) return DType::u64;
  }
  throw InputError("unsupported array dtype '" + py::repr(py::handle(d)).cast<std::string>() + "'");
}

// Built-in descriptors by type number (no name to parse: this is on every call's output path).
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::f16: return py::dtype(23);  // NPY_HALF
    case DType::boolean: return py::dtype::of<bool>();
    case DType::i8: return py::dtype::of<int8_t>();
    case DType::i16: return py::dtype::of<int16_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::u16:
    case DType::bf16: return py::dtype::of<uint16_t>();
    case DType::u32: return py::dtype::of<uint32_t>();
    case DType::u64: return py::dtype::of<uint64_t>();
    default: break;
  }
  if (is_low_precision(t)) return py::dtype::of<uint8_t>();  // the codes, one per byte (ir/low_precision.h)
  throw InternalError("internal error: no NumPy dtype");
}

// Strings cross as NumPy arrays of str (kind 'U'), of bytes ('S') or of objects holding either; results come
// back as object arrays of str, as ONNX Runtime returns them (text that is not UTF-8 with surrogate escapes).
bool holds_strings(const py::array& a) {
  char k = a.dtype().kind();
  return k == 'U' || k == 'S' || k == 'O';
}

Tensor strings_from_numpy(const py::array& a) {
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  std::vector<std::string> text;
  for (py::handle item : py::list(a.attr("ravel")().attr("tolist")())) {
    if (py::isinstance<py::str>(item) || py::isinstance<py::bytes>(item)) text.push_back(item.cast<std::string>());
    else throw InputError("a string array holds a " + std::string(py::str(item.get_type().attr("__name__"))) +
                          " (only str and bytes are strings)");
  }
  return Tensor::strings(std::move(text), std::move(shape));
}

py::array strings_to_numpy(const Tensor& t) {
  py::list items;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const std::string& s = t.str(i);
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), py::ssize_t(s.size()), "surrogateescape");
    if (!o) throw py::error_already_set();
    items.append(py::reinterpret_steal<py::object>(o));
  }
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::object np = py::module_::import("numpy");
  return np.attr("array")(items, py::arg("dtype") = "object").attr("reshape")(shape);
}

DType parse_dtype(const std::string& s) {
  auto d = dtype_from_name(s);
  CUVIL_CHECK(d, "unknown dtype '", s, "'");
  return *d;
}

// A possibly strided view of an array for Executor::run_strided (the Python layer copies arrays whose strides
// are not whole elements or whose data is misaligned). `as_dtype` reinterprets the bits (bf16 as uint16).
// A string array becomes a Tensor of its own, kept alive in `strings` while the view is used.
StridedInput strided_view(const py::array& a, std::optional<DType> as_dtype = std::nullopt,
                          std::vector<Tensor>* strings = nullptr) {
  StridedInput in;
  if (holds_strings(a)) {
    if (!strings) throw InternalError("internal error: no place for a string input");
    strings->push_back(strings_from_numpy(a));
    in.dtype = DType::str;
    in.shape = strings->back().shape();
    in.data = strings->back().raw();
    return in;
  }
  in.dtype = dtype_from_numpy(a.dtype());
  if (as_dtype) {
    CUVIL_CHECK(*as_dtype != DType::str, "cannot view ", dtype_name(in.dtype), " data as strings");
    CUVIL_CHECK(dtype_size(*as_dtype) == dtype_size(in.dtype), "cannot view ", dtype_name(in.dtype), " data as ",
                dtype_name(*as_dtype));
    in.dtype = *as_dtype;
  }
  in.shape.assign(a.shape(), a.shape() + a.ndim());
  in.data = a.data();
  if (!(a.flags() & py::array::c_style)) {
    auto item = py::ssize_t(a.itemsize());
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
      if (a.strides(d) % item != 0) throw InternalError("internal error: array strides are not whole elements");
      in.strides.push_back(int64_t(a.strides(d) / item));
    }
  }
  return in;
}

// A view of a C-contiguous array as a Tensor (constants; profiled inputs, made contiguous first).
Tensor tensor_view(const py::array& a, std::optional<DType> as_dtype = std::nullopt) {
  if (holds_strings(a)) return strings_from_numpy(a);
  if (!(a.flags() & py::array::c_style)) throw InternalError("internal error: array is not C-contiguous");
  StridedInput in = strided_view(a, as_dtype);
  static uint8_t empty_anchor[kTensorAlignment];
  return Tensor::view(in.dtype, in.shape, const_cast<void*>(in.data ? in.data : empty_anchor));
}

py::array to_numpy(const Tensor& t) {
  if (t.dtype() == DType::str) return strings_to_numpy(t);
  // The capsule owns a copy of the Tensor handle, which shares (and so keeps alive) the storage.
  auto* keep = new Tensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  return py::array(numpy_dtype(t.dtype()), shape, {}, const_cast<void*>(t.raw()), base);
}

py::object dims_to_py(const Shape& s) {
  if (!s.rank_known()) return py::none();
  py::list l;
  for (const Dim& d : s.dims()) {
    if (d.is_const()) l.append(d.value());
    else l.append(d.str());
  }
  return l;
}

Shape dims_from_py(const py::object& o) {
  if (o.is_none()) return Shape::unknown_rank();
  std::vector<Dim> dims;
  for (auto item : o) {
    if (py::isinstance<py::int_>(item)) dims.push_back(Dim(item.cast<int64_t>()));
    else dims.push_back(Dim::parse(item.cast<std::string>()));
  }
  return Shape(dims);
}

// ---- graph building

struct PyValue {
  std::shared_ptr<Graph> root;  // keeps the graph alive
  Value* v;
  std::string name() const { return v->name(); }
  std::string dtype() const { return std::string(dtype_name(v->dtype())); }
  py::object shape() const { return dims_to_py(v->shape()); }
  bool is_constant() const { return v->is_constant(); }
  py::object constant() const { return v->is_constant() ? py::object(to_numpy(v->constant())) : py::none(); }
};

class GraphBuilder {
 public:
  // Names are unique across the whole graph and its regions (`taken` is shared by every builder of one tree):
  // a region's value never shadows one outside it, which passes that rename values and the text format rely on.
  GraphBuilder(std::shared_ptr<Graph> root, std::shared_ptr<Graph> graph,
               std::shared_ptr<IncrementalShapeInference> inference,
               std::shared_ptr<std::unordered_set<std::string>> taken)
      : root_(std::move(root)), graph_(std::move(graph)), inference_(std::move(inference)), taken_(std::move(taken)) {}

  static GraphBuilder create(const std::string& name) {
    auto g = std::make_shared<Graph>(name);
    return GraphBuilder(g, g, std::make_shared<IncrementalShapeInference>(),
                        std::make_shared<std::unordered_set<std::string>>());
  }

  PyValue add_input(const std::string& name, const std::string& dtype, const py::object& dims) {
    return {root_, graph_->add_input(fresh_name(name), TensorType{parse_dtype(dtype), dims_from_py(dims)})};
  }

  PyValue add_constant(const std::string& hint, const py::array& array, const std::string& dtype) {
    py::array c = py::array::ensure(array, py::array::c_style);
    std::optional<DType> as;
    if (!dtype.empty()) as = parse_dtype(dtype);
    Value* v = graph_->add_constant(fresh_name(hint), tensor_view(c, as).clone());
    inference_->add_constant(v);
    return {root_, v};
  }

  std::vector<PyValue> add_node(const std::string& op, const std::vector<std::optional<PyValue>>& inputs,
                                size_t num_outputs, const py::dict& attrs, const std::string& file, int line,
                                const std::string& name, const std::vector<std::string>& output_names,
                                const std::string& stack) {
    auto kind = op_from_name(op);
    CUVIL_ASSERT(kind, "no op '", op, "' in the op table");
    std::vector<Value*> ins;
    for (auto& i : inputs) ins.push_back(i ? i->v : nullptr);
    std::vector<std::string> names;
    for (size_t k = 0; k < num_outputs; ++k)
      names.push_back(fresh_name(k < output_names.size() && !output_names[k].empty() ? output_names[k] : "t"));
    Location loc{name, file, line, stack};
    Node* n = graph_->add_node(*kind, ins, names, convert_attrs(*kind, attrs), loc);
    inference_->infer_node(*n);
    std::vector<PyValue> out;
    for (Value* v : n->outputs()) out.push_back({root_, v});
    return out;
  }

  GraphBuilder new_region(const std::string& name) {
    auto r = std::make_shared<Graph>(name);
    r->set_parent(graph_.get());
    return GraphBuilder(root_, r, inference_, taken_);
  }

  void set_outputs(const std::vector<PyValue>& outs) {
    std::vector<Value*> v;
    for (auto& o : outs) v.push_back(o.v);
    graph_->set_outputs(v);
  }

  std::shared_ptr<Graph> graph() const { return graph_; }
  std::shared_ptr<Graph> root() const { return root_; }

 private:
  // A name no value of this tree has (reserved at once).
  std::string fresh_name(const std::string& hint) {
    std::string n = graph_->unique_name(hint);
    for (int suffix = 1; taken_->count(n); ++suffix) n = graph_->unique_name(hint + "_" + std::to_string(suffix));
    taken_->insert(n);
    return n;
  }

  AttrMap convert_attrs(OpKind op, const py::dict& attrs) {
    AttrMap m;
    const OpSchema& s = op_schema(op);
    for (auto [k, v] : attrs) {
      std::string key = k.cast<std::string>();
      const AttrSpec* spec = s.find_attr(key);
      CUVIL_ASSERT(spec, "op ", op_name(op), " has no attribute '", key, "'");
      switch (spec->kind) {
        case AttrKind::Int: m[key] = Attribute(v.cast<int64_t>()); break;
        case AttrKind::Float: m[key] = Attribute(v.cast<double>()); break;
        case AttrKind::String: m[key] = Attribute(v.cast<std::string>()); break;
        case AttrKind::Ints: m[key] = Attribute(v.cast<std::vector<int64_t>>()); break;
        case AttrKind::Floats: m[key] = Attribute(v.cast<std::vector<double>>()); break;
        case AttrKind::Strings: m[key] = Attribute(v.cast<std::vector<std::string>>()); break;
        case AttrKind::Tensor: {
          py::array a = py::array::ensure(v, py::array::c_style);
          m[key] = Attribute(tensor_view(a).clone());
          break;
        }
        case AttrKind::Graph: m[key] = Attribute(v.cast<GraphBuilder&>().graph()); break;
        case AttrKind::Graphs: {
          std::vector<GraphPtr> gs;
          for (auto item : v) gs.push_back(item.cast<GraphBuilder&>().graph());
          m[key] = Attribute(gs);
          break;
        }
      }
    }
    return m;
  }

  std::shared_ptr<Graph> root_;
  std::shared_ptr<Graph> graph_;
  std::shared_ptr<IncrementalShapeInference> inference_;
  std::shared_ptr<std::unordered_set<std::string>> taken_;
};

// ---- run control

// The interpreter's main thread: the only one on which Python runs signal handlers.
unsigned long main_thread_ident = 0;

// RunControl::poll for a run started from Python's main thread: with the GIL taken for a moment, runs the Python
// signal handlers of signals that arrived meanwhile (Ctrl-C's raises KeyboardInterrupt), and stops the run with
// the exception one raised; it leaves run() and reaches the caller as that exception.
void check_python_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// How often a run on the main thread looks for signals: Ctrl-C interrupts within about this (plus the node or
// loop iteration in progress).
constexpr auto kSignalPollInterval = std::chrono::milliseconds(20);

// The files holding this module's code, the compiler's and the runtime's, each as "path size mtime" (a rebuild
// changes them; the model cache keys on them).
std::string library_identities() {
  std::string out;
  for (const void* fn : {reinterpret_cast<const void*>(&library_identities),
                         reinterpret_cast<const void*>(&codegen::llvm_version),
                         reinterpret_cast<const void*>(&artifact::bytes_hash)}) {
    Dl_info info{};
    struct stat st {};
    if (!::dladdr(fn, &info) || !info.dli_fname) continue;
    out += info.dli_fname;
    if (::stat(info.dli_fname, &st) == 0)
      out += " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec);
    out += "\n";
  }
  return out;
}

// ---- compiled models

class Model {
 public:
  // Infers, verifies and optimizes at `opt_level` (0: none; 1: folding and cleanups, the default). An ONNX
  // model's `onnx_path`: update_weights imports that file again, replaces initializers in the graph before the
  // passes and runs them again (BatchNorm folding, ...); nothing of the unoptimized graph is kept meanwhile.
  // `keep_source` (a PyTorch module's graph, whose constants are its state_dict entries by name: cuvil/weights.py):
  // the graph before the passes is kept (constants shared, not copied), and update_weights replaces constants
  // there and runs the passes again, as for an ONNX model, without capturing the module again.
  Model(std::shared_ptr<Graph> g, int opt_level, const std::string& onnx_path = "", bool keep_source = false)
      : opt_level_(opt_level) {
    infer_shapes(*g);
    verify(*g);
    if (!onnx_path.empty()) {
      set_onnx_source(onnx_path);
      source_weights_ = list_weights(*g);
    }
    if (keep_source) source_ = clone_graph(*g);
    optimize(*g, opt_level);
    versions_ = std::make_unique<VersionedModel>(std::move(g), executor_options());
  }
  // The ONNX file this model was compiled from (a compiled-model cache hit loads an artifact): update_weights
  // then takes its initializers' names, imports it again and runs the passes, as for a model loaded from it.
  void set_onnx_source(const std::string& path) {
    std::error_code ec;  // (absolute: the process may change its directory before an update)
    std::filesystem::path abs = std::filesystem::absolute(path, ec);
    std::lock_guard<std::mutex> one_swap(swap_mu_);
    onnx_path_ = ec ? path : abs.string();
    onnx_stamp_ = file_stamp(onnx_path_);
    source_weights_.clear();  // (listed at the first update)
    applied_.clear();
  }
  // A loaded artifact's graph (already optimized, inferred and verified) and its kernels' code (may be null).
  Model(artifact::Loaded a) : code_(std::move(a.kernel_code)), mapped_(a.graph), recipes_(std::move(a.recipes)) {
    versions_ = std::make_unique<VersionedModel>(std::move(a.graph), executor_options());
  }

  // Hot weight swap (runtime/versioned_model.h): the named constants replaced (all checked first: names,
  // dtypes, shapes; with `strict` every floating-point weight given), for an ONNX model in the graph before the
  // passes, which then run again; executors prepared for the shapes served — all on this thread, with the GIL
  // released and no run waiting — then published at once. Returns the new weights version.
  uint64_t update_weights(const std::vector<std::pair<std::string, py::array>>& weights, bool strict) {
    // The data is copied (the caller may change its arrays afterwards), with the GIL; the rest runs without it.
    std::vector<std::pair<std::string, Tensor>> ts;
    for (const auto& [name, a] : weights)
      ts.emplace_back(name, tensor_view(py::array::ensure(a, py::array::c_style)).clone());
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> one_swap(swap_mu_);
    std::vector<WeightInfo> known = weight_list();
    for (auto& [name, t] : ts)  // bf16 weights travel as uint16 bits
      for (const WeightInfo& w : known)
        if (w.name == name && w.type.dtype == DType::bf16 && t.dtype() == DType::u16) {
          Tensor b = Tensor::zeros(DType::bf16, t.shape());
          std::memcpy(b.raw(), t.raw(), t.nbytes());
          t = b;
        }
    if (onnx_path_.empty() && recipes_ && !source_) {  // an artifact's folded weights, by their original names
      auto next = std::make_shared<WeightRecipes>();
      auto derived = translate_updates(*graph(), *recipes_, ts, strict, next.get());
      uint64_t id = versions_->swap(with_weights(*graph(), derived, false));
      recipes_ = std::move(next);
      return id;
    }
    if (onnx_path_.empty() && !source_) return versions_->swap(with_weights(*graph(), ts, strict));
    // The ONNX graph as imported (or the kept graph before the passes), with every update so far and then these.
    std::shared_ptr<const Graph> src = source_ ? source_ : import_source();
    check_weights(*src, ts, strict);
    if (source_) {  // the kept graph becomes the updated one (before the passes): the old weights go with it
      std::shared_ptr<Graph> g = with_weights(*src, ts, false);
      std::shared_ptr<const Graph> next = clone_graph(*g);
      src.reset();
      optimize(*g, opt_level_);
      uint64_t id = versions_->swap(std::move(g));
      source_ = std::move(next);
      return id;
    }
    std::vector<std::pair<std::string, Tensor>> merged;
    for (const auto& [name, t] : applied_) {
      bool replaced = false;
      for (const auto& u : ts) replaced |= u.first == name;
      if (!replaced) merged.emplace_back(name, t);
    }
    merged.insert(merged.end(), ts.begin(), ts.end());
    std::shared_ptr<Graph> g = with_weights(*src, merged, false);
    src.reset();
    optimize(*g, opt_level_);
    uint64_t id = versions_->swap(std::move(g));
    applied_ = std::move(merged);
    return id;
  }
  // Publishes `other`'s graph (the same model recompiled with other weights: cuvil.compile'd torch modules) as
  // this model's next weights version. Returns its id.
  // Its graph before the passes comes along (null when it kept none): later updates replace constants there.
  uint64_t adopt(Model& other) {
    std::shared_ptr<const Graph> g = other.graph();
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> one_swap(swap_mu_);
    std::shared_ptr<const Graph> source;
    {
      std::lock_guard<std::mutex> theirs(other.swap_mu_);
      source = other.source_;
    }
    uint64_t id = versions_->swap(std::move(g));
    source_ = std::move(source);
    recipes_.reset();  // (a loaded artifact's folds read the weights it was saved with)
    return id;
  }
  uint64_t weights_version() const { return versions_->current_id(); }
  // (name, type, required by a strict update) of each weight update_weights takes.
  std::vector<std::tuple<std::string, std::string, bool>> weights() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> one_swap(swap_mu_);
    std::vector<std::tuple<std::string, std::string, bool>> r;
    for (const WeightInfo& w : weight_list()) r.emplace_back(w.name, w.type.str(), w.required);
    return r;
  }

  // Writes the compiled graph as a .cuv artifact; dim_ranges: (symbol, lo, hi), -1 for no bound.
  void save(const std::string& path, const std::string& config_json, const std::string& extra_json,
            const std::string& fingerprint, const std::vector<std::tuple<std::string, int64_t, int64_t>>& dims) {
    artifact::SaveInput in;
    in.graph = graph();
    in.config_json = config_json;
    in.extra_json = extra_json;
    in.model_fingerprint = fingerprint;
    for (const auto& [sym, lo, hi] : dims) in.dim_ranges.push_back({sym, lo, hi});
    in.tuned_for = codegen::jit_host_description();
    ExecutorOptions options;
    {
      std::lock_guard<std::mutex> lock(mu_);
      options = executor_options();
    }
    py::gil_scoped_release nogil;
    {
      // The folds the passes made, so that the artifact updates by original names: kept from a loaded artifact,
      // found from the ONNX file (with the updates so far) for an ONNX model.
      std::lock_guard<std::mutex> one_swap(swap_mu_);
      if (recipes_ && !source_) {
        in.recipes = recipes_;
      } else if (!onnx_path_.empty()) {
        try {
          std::shared_ptr<Graph> src = with_weights(*import_source(), applied_, false);
          auto r = std::make_shared<WeightRecipes>(derive_fold_recipes(*src, *in.graph));
          if (!r->folds.empty()) in.recipes = r;
        } catch (const Error&) {  // (the file changed since the load: the artifact updates by its own names)
        }
      } else if (source_) {  // a PyTorch module's folds, by its state_dict names
        auto r = std::make_shared<WeightRecipes>(derive_fold_recipes(*source_, *in.graph));
        if (!r->folds.empty()) in.recipes = r;
      }
    }
    codegen::add_compiled_kernels(in.graph, in);  // the generated kernels as machine code
    artifact::add_prepacked_weights(in, options);  // the weights in the kernels' layouts
    artifact::save(path, in);
  }

  // The model cache's graph and weights hashes (artifact/cache_key.h).
  std::pair<std::string, std::string> cache_key() const {
    artifact::GraphKey k = artifact::graph_key(*graph());
    return {k.graph, k.weights};
  }

  std::vector<std::string> input_names() const { return names(graph()->inputs()); }

  // Threads of oneDNN and Cuvil's loops for every later call (0: all cores). Drops the pooled executors.
  void set_threads(int t) {
    if (t < 0) throw Error("threads must be >= 0, got " + std::to_string(t));
    std::lock_guard<std::mutex> lock(mu_);
    threads_ = t;
    versions_->set_options(executor_options());
  }
  // The lowest precision convolutions and matrix products may use ("fp32", "bf16"; kernels/precision.h) for
  // every later call. Drops the pooled executors.
  void set_precision(const std::string& p) {
    Precision parsed = parse_precision(p);
    std::lock_guard<std::mutex> lock(mu_);
    precision_ = parsed;
    versions_->set_options(executor_options());
  }
  std::string precision() const { return std::string(precision_name(precision_)); }
  // Plans and prepares kernels (oneDNN primitives, packed weights) for inputs of these shapes, at compile time, so
  // the first call only runs. The prepared executor joins the pool.
  void prepare(const std::vector<std::vector<int64_t>>& shapes) {
    py::gil_scoped_release nogil;
    versions_->prepare(shapes);  // (also the shapes every later weights version is prepared for)
  }

  // prepare() for the declared input shapes when all are static; returns whether it did.
  bool prepare_static() {
    std::vector<std::vector<int64_t>> shapes;
    std::shared_ptr<const Graph> g = graph();
    for (Value* v : g->inputs()) {
      if (!v->shape().is_static()) return false;
      shapes.push_back(v->shape().static_dims());
    }
    prepare(shapes);
    return true;
  }

  std::vector<std::string> output_names() const { return names(graph()->outputs()); }
  std::vector<std::string> input_types() const { return types(graph()->inputs()); }
  std::vector<std::string> output_types() const { return types(graph()->outputs()); }
  std::string ir(bool elide) const {
    PrintOptions o;
    o.elide_large_constants = elide;
    return print_graph(*graph(), o);
  }

  // Limits of every later call (0: none): wall-clock time per call, iterations per execution of a Loop/Scan node.
  void set_limits(double timeout_s, int64_t max_loop_iterations) {
    if (!(timeout_s >= 0) || timeout_s > 1e9) throw Error("timeout must be a number of seconds >= 0");
    if (max_loop_iterations < 0) throw Error("max_loop_iterations must be >= 0");
    std::lock_guard<std::mutex> lock(mu_);
    timeout_ = std::chrono::nanoseconds(int64_t(timeout_s * 1e9));
    max_loop_iterations_ = max_loop_iterations;
  }
  // Stops the calls running now (RunCancelled); calls that start later run normally.
  void cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    for (CancelToken* t : running_) t->cancel();
  }

  // `bf16_inputs[i]`: input i's array holds bf16 bits as uint16.
  // Inputs may be strided views: the executor copies a non-contiguous one once, into its plan's buffer.
  // `cancel`, when given, stops this call alone (run_async's cancellation); cancel() reaches it too.
  std::vector<py::array> run(const std::vector<py::array>& inputs, std::shared_ptr<CancelToken> cancel) {
    return run_versioned(inputs, std::move(cancel)).first;
  }
  // run(), and the weights version that produced the outputs (the one current when the call started).
  std::pair<std::vector<py::array>, uint64_t> run_versioned(const std::vector<py::array>& inputs,
                                                             std::shared_ptr<CancelToken> cancel) {
    std::shared_ptr<const Graph> g = graph();
    std::vector<StridedInput> ins;
    std::vector<Tensor> strings;
    strings.reserve(inputs.size());  // (the views point into it)
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(strided_view(inputs[i], bf16_bits(*g, i, inputs[i]), &strings));
    std::vector<Tensor> outs;
    uint64_t version = 0;
    bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
    {
      py::gil_scoped_release nogil;
      Lease lease(*this, on_main_thread, std::move(cancel));
      outs = lease.exec->run_strided(ins);
      version = lease.l.version_id();
      InputShapes shapes;
      for (const StridedInput& in : ins) shapes.push_back(in.shape);
      lease.l.note_shapes(std::move(shapes));
    }
    std::vector<py::array> result;
    for (auto& t : outs) result.push_back(to_numpy(t));
    return {std::move(result), version};
  }

  // Per node, in execution order: (op, location, ms, kernel, fallback reason, nested entries before it, call chain).
  using ProfileRow = std::tuple<std::string, std::string, double, std::string, std::string, size_t, std::string>;
  std::vector<ProfileRow> profile(const std::vector<py::array>& inputs) {
    std::vector<Tensor> ins = views(inputs);
    std::vector<NodeTime> times;
    bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
    {
      py::gil_scoped_release nogil;
      Lease lease(*this, on_main_thread);
      times = lease.exec->profile(ins);
    }
    std::vector<ProfileRow> r;
    for (auto& t : times)
      r.emplace_back(node_label(*t.node), t.node->loc().str(), t.ms, t.impl, t.fallback, t.nested,
                     t.node->loc().stack.empty() ? "" : t.node->loc().chain());
    return r;
  }

  // Per node of one profiled run: (op, location, kernel, precision, reason why not the precision asked, name of
  // its first output).
  std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>> precision_report(
      const std::vector<py::array>& inputs) {
    std::vector<Tensor> ins = views(inputs);
    std::vector<NodeTime> times;
    {
      py::gil_scoped_release nogil;
      Lease lease(*this);
      times = lease.exec->profile(ins);
    }
    std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>> r;
    for (auto& t : times)
      r.emplace_back(node_label(*t.node), t.node->loc().str(), t.impl.substr(0, t.impl.find(" [")),
                     std::string(precision_name(t.precision.precision)), t.precision.reason,
                     t.node->num_outputs() && t.node->output(0) ? t.node->output(0)->name() : std::string());
    return r;
  }

  // ---- int8 calibration (python/cuvil/quantization.py; runtime/calibration.h). A setup step: the hints are
  // written into the current weights version's graph, so no run may be in flight meanwhile.

  // The nodes int8 may quantize, as (index, op, location, input name, output name, has hints).
  std::vector<std::tuple<int64_t, std::string, std::string, std::string, std::string, bool>> quant_targets() const {
    std::vector<std::tuple<int64_t, std::string, std::string, std::string, std::string, bool>> r;
    std::shared_ptr<const Graph> g = versions_->current()->graph();
    const auto& nodes = g->nodes();
    for (Node* n : cuvil::quant_targets(*g)) {
      int64_t i = std::find_if(nodes.begin(), nodes.end(), [&](const auto& p) { return p.get() == n; }) - nodes.begin();
      bool hinted = n->has_attr("quant_x_scale") && n->attr("quant_x_scale").f() != 0;
      r.emplace_back(i, node_label(*n), n->loc().str(), n->input(0)->name(), n->output(0)->name(), hinted);
    }
    return r;
  }
  // The convolutions adding a residual whose grid calibration sets too, as (index, the residual's name).
  std::vector<std::tuple<int64_t, std::string>> quant_sum_targets() const {
    std::vector<std::tuple<int64_t, std::string>> r;
    std::shared_ptr<const Graph> g = versions_->current()->graph();
    const auto& nodes = g->nodes();
    for (Node* n : cuvil::quant_sum_targets(*g)) {
      int64_t i = std::find_if(nodes.begin(), nodes.end(), [&](const auto& p) { return p.get() == n; }) - nodes.begin();
      r.emplace_back(i, n->input(3)->name());
    }
    return r;
  }
  void set_quant_sum_hint(int64_t index, double scale, int64_t zero_point) {
    std::lock_guard<std::mutex> lock(mu_);
    auto g = std::const_pointer_cast<Graph>(versions_->current()->graph());
    if (index < 0 || size_t(index) >= g->nodes().size()) throw Error("no node " + std::to_string(index));
    cuvil::set_quant_sum_hint(*g->nodes()[size_t(index)], scale, zero_point);
    versions_->set_options(executor_options());
  }
  // Sets (x_scale > 0), asks for dynamic quantization (-1) or clears (0) node `index`'s int8 grid. Drops the
  // pooled executors.
  void set_quant_hint(int64_t index, double x_scale, int64_t zero_point) {
    std::lock_guard<std::mutex> lock(mu_);
    auto g = std::const_pointer_cast<Graph>(versions_->current()->graph());
    if (index < 0 || size_t(index) >= g->nodes().size()) throw Error("no node " + std::to_string(index));
    cuvil::set_quant_hint(*g->nodes()[size_t(index)], x_scale, zero_point);
    versions_->set_options(executor_options());
  }
  // precision="fp32" asked explicitly: a QDQ model's own int8 layers computed in f32 (runtime/calibration.h);
  // returns how many. Drops the pooled executors.
  int keep_model_int8_in_f32() {
    std::lock_guard<std::mutex> lock(mu_);
    auto g = std::const_pointer_cast<Graph>(versions_->current()->graph());
    int n = cuvil::keep_model_int8_in_f32(*g);
    versions_->set_options(executor_options());
    return n;
  }
  int count_model_int8() const { return cuvil::count_model_int8(*versions_->current()->graph()); }
  // Node `index`'s own precision ("fp32", "bf16", "" = the model's) and the reason for it: raises that node above
  // the model's precision (cuvil.quantize's fallback, precision="auto"). Drops the pooled executors.
  void set_node_precision(int64_t index, const std::string& precision, const std::string& reason) {
    if (!precision.empty()) parse_precision(precision);
    std::lock_guard<std::mutex> lock(mu_);
    auto g = std::const_pointer_cast<Graph>(versions_->current()->graph());
    if (index < 0 || size_t(index) >= g->nodes().size()) throw Error("no node " + std::to_string(index));
    Node& n = *g->nodes()[size_t(index)];
    n.attrs()["precision"] = Attribute(precision);
    n.attrs()["precision_reason"] = Attribute(reason);
    versions_->set_options(executor_options());
  }
  // Runs once at `precision` with the values named `names` (top-level node outputs or graph inputs) exposed, and
  // returns them (run_with_values).
  std::vector<py::array> run_values(const std::vector<py::array>& inputs, const std::vector<std::string>& names,
                                    const std::string& precision) {
    auto g = std::const_pointer_cast<Graph>(versions_->current()->graph());
    std::vector<Tensor> ins = views(inputs);
    std::unordered_map<std::string, Value*> by_name;
    for (Value* v : g->inputs()) by_name[v->name()] = v;
    for (const auto& n : g->nodes())
      for (Value* v : n->outputs())
        if (v) by_name[v->name()] = v;
    std::vector<Value*> values;
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it == by_name.end()) throw Error("no value named '" + name + "'");
      values.push_back(it->second);
    }
    ExecutorOptions o;
    {
      std::lock_guard<std::mutex> lock(mu_);
      o = executor_options();
    }
    o.kernels.precision = parse_precision(precision);
    std::vector<Tensor> outs;
    {
      py::gil_scoped_release nogil;
      outs = run_with_values(g, o, ins, values);
    }
    std::vector<py::array> r;
    for (auto& t : outs) r.push_back(to_numpy(t));
    return r;
  }

  // The profile report's JSON (report/profile_report.h): `iters` profiled and unprofiled runs after `warmup`.
  std::string profile_report(const std::vector<py::array>& inputs, int iters, int warmup, const std::string& name) {
    std::vector<Tensor> ins = views(inputs);
    bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
    report::ProfileOptions o;
    o.iters = iters;
    o.warmup = warmup;
    o.model = name;
    py::gil_scoped_release nogil;
    Lease lease(*this, on_main_thread);
    return report::profile_json(*lease.exec, ins, o);
  }

  int64_t executors_created() const { return versions_->current()->executors_created(); }

  // RunStats counters summed over the pooled executors (those not running a call at this moment).
  std::map<std::string, int64_t> stats() {
    std::map<std::string, int64_t> r{{"plans_built", 0},      {"plans_cached", 0},     {"plan_evictions", 0},
                                     {"kernel_evictions", 0}, {"kernels_prepared", 0}, {"staged_inputs", 0}};
    for (const RunStats& s : versions_->current()->pooled_stats()) {
      r["plans_built"] += s.plans_built;
      r["plans_cached"] += s.plans_cached;
      r["plan_evictions"] += s.plan_evictions;
      r["kernel_evictions"] += s.kernel_evictions;
      r["kernels_prepared"] += s.kernels_prepared;
      r["staged_inputs"] += s.staged_inputs;
    }
    return r;
  }

 private:
  // Executors are not thread-safe; concurrent callers each lease their own from the current weights version's
  // pool (runtime/versioned_model.h). A lease for a call also sets the executor's run control: the model's
  // limits, a fresh cancellation token that cancel() reaches while the call runs, and on Python's main thread the
  // signal poll.
  struct Lease {
    Model& m;
    VersionedModel::Lease l;
    Executor* exec;
    std::shared_ptr<CancelToken> token;
    explicit Lease(Model& model) : m(model), l(model.versions_->lease()), exec(&l.executor()) {}
    Lease(Model& model, bool poll_signals, std::shared_ptr<CancelToken> given = nullptr)
        : m(model), l(model.versions_->lease()), exec(&l.executor()),
          token(given ? std::move(given) : std::make_shared<CancelToken>()) {
      std::lock_guard<std::mutex> lock(m.mu_);
      RunControl c;
      c.cancel = token;
      c.timeout = m.timeout_;
      c.max_loop_iterations = m.max_loop_iterations_;
      if (poll_signals) {
        c.poll = check_python_signals;
        c.poll_interval = kSignalPollInterval;
      }
      exec->set_control(std::move(c));
      m.running_.insert(token.get());
    }
    ~Lease() {
      if (!token) return;
      std::lock_guard<std::mutex> lock(m.mu_);
      m.running_.erase(token.get());
    }
  };

  // The weights update_weights takes (under swap_mu_).
  std::vector<WeightInfo> weight_list() {
    if (source_) return list_weights(*source_);
    if (onnx_path_.empty()) return recipes_ ? list_weights(*graph(), *recipes_) : list_weights(*graph());
    if (source_weights_.empty()) source_weights_ = list_weights(*import_source());
    return source_weights_;
  }
  // The ONNX file imported again, inferred and verified (under swap_mu_).
  std::shared_ptr<Graph> import_source() {
    CUVIL_CHECK(file_stamp(onnx_path_) == onnx_stamp_, "weights not updated: '", onnx_path_,
                "' changed since the model was loaded (load it again)");
    std::shared_ptr<Graph> g = import_onnx_file(onnx_path_);
    infer_shapes(*g);
    verify(*g);
    return g;
  }
  static std::pair<uintmax_t, int64_t> file_stamp(const std::string& path) {
    std::error_code ec;
    uintmax_t size = std::filesystem::file_size(path, ec);
    auto t = std::filesystem::last_write_time(path, ec);
    if (ec) return {0, -1};
    return {size, int64_t(t.time_since_epoch().count())};
  }
  // The current weights version's graph (inputs and outputs are the same in every version).
  std::shared_ptr<const Graph> graph() const { return versions_->current()->graph(); }
  // For executors created from now on (under mu_, or before the model is shared).
  ExecutorOptions executor_options() const {
    ExecutorOptions o;
    o.threads = threads_;
    o.kernel_code = code_;
    o.kernels.precision = precision_;
    return o;
  }

  // bf16 when graph input i is bf16 and the array holds its bits as uint16; a low-precision type (float8, int4,
  // ...) when the input has it and the array holds its codes as uint8.
  static std::optional<DType> bf16_bits(const Graph& g, size_t i, const py::array& a) {
    if (holds_strings(a)) return std::nullopt;
    if (i < g.inputs().size() && g.inputs()[i]->dtype() == DType::bf16 && dtype_from_numpy(a.dtype()) == DType::u16)
      return DType::bf16;
    if (i < g.inputs().size() && is_low_precision(g.inputs()[i]->dtype()) &&
        dtype_from_numpy(a.dtype()) == DType::u8)
      return g.inputs()[i]->dtype();
    return std::nullopt;
  }
  // Contiguous views (a strided input is copied here, with the GIL held).
  std::vector<Tensor> views(const std::vector<py::array>& inputs) const {
    std::shared_ptr<const Graph> g = graph();
    std::vector<Tensor> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(tensor_view(py::array::ensure(inputs[i], py::array::c_style), bf16_bits(*g, i, inputs[i])));
    return ins;
  }
  static std::vector<std::string> names(const std::vector<Value*>& vs) {
    std::vector<std::string> r;
    for (Value* v : vs) r.push_back(v->name());
    return r;
  }
  static std::vector<std::string> types(const std::vector<Value*>& vs) {
    std::vector<std::string> r;
    for (Value* v : vs) r.push_back(v->type().str());
    return r;
  }

  std::shared_ptr<codegen::KernelCodeSource> code_;  // an artifact's generated kernels; null otherwise
  // A loaded artifact's graph: it keeps the file mapped, whose weights later versions still view (those not
  // replaced). Null for other models.
  std::shared_ptr<const Graph> mapped_;
  int opt_level_ = 1;
  std::mutex swap_mu_;  // one weight update at a time (runs never take it); guards applied_ and recipes_
  // A loaded artifact's folds and the current values of the original weights they read (weight_recipes.h).
  std::shared_ptr<const WeightRecipes> recipes_;
  // A PyTorch module's graph before the passes (keep_source), whose constants updates replace; null otherwise.
  std::shared_ptr<const Graph> source_;
  // An ONNX model's file (and its size and modification time when loaded), the weights its graph had before
  // the passes, and the updates applied so far (one per name, the latest).
  std::string onnx_path_;
  std::pair<uintmax_t, int64_t> onnx_stamp_{0, 0};
  std::vector<WeightInfo> source_weights_;
  std::vector<std::pair<std::string, Tensor>> applied_;
  std::unique_ptr<VersionedModel> versions_;  // the weights versions and their executors
  std::mutex mu_;
  int threads_ = 0;  // for executors created from now on; 0 = all cores
  Precision precision_ = Precision::fp32;  // for executors created from now on
  std::chrono::nanoseconds timeout_{0};  // per call; 0: none
  int64_t max_loop_iterations_ = 0;      // per Loop/Scan execution; 0: none
  std::unordered_set<CancelToken*> running_;  // the tokens of the calls running now
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Cuvil's native core (bindings only; use the `cuvil` package).";
  m.attr("__version__") = CUVIL_VERSION;
  // The hierarchy of python/cuvil/errors.py: Error (a RuntimeError) > InputError (also a ValueError), RunError >
  // RunCancelled, RunLimitExceeded, CheckFailed; InternalError. (CompileError is the Python layer's.)
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<InputError> input_error(m, "InputError", py::make_tuple(error, py::handle(PyExc_ValueError)));
  static py::exception<InternalError> internal_error(m, "InternalError", error.ptr());
  static py::exception<RunError> run_error(m, "RunError", error.ptr());
  static py::exception<RunCancelled> run_cancelled(m, "RunCancelled", run_error.ptr());
  static py::exception<RunLimitExceeded> run_limit_exceeded(m, "RunLimitExceeded", run_error.ptr());
  // A failed run-time check (Assert): the Python layer raises the model's own exception from its attributes.
  static py::exception<CheckFailed> check_failed(m, "CheckFailed", run_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CheckFailed& e) {
      py::object exc = py::reinterpret_borrow<py::object>(check_failed.ptr())(e.what());
      exc.attr("exception_type") = e.exception_type();
      exc.attr("message") = e.message();
      exc.attr("location") = e.location();
      PyErr_SetObject(check_failed.ptr(), exc.ptr());
    } catch (const InputError& e) {
      input_error(e.what());
    } catch (const RunCancelled& e) {
      run_cancelled(e.what());
    } catch (const RunLimitExceeded& e) {
      run_limit_exceeded(e.what());
    } catch (const RunError& e) {
      // node, kernel, fused_kernel, source (the call chain or ONNX node), detail (the kernel's own message)
      py::object exc = py::reinterpret_borrow<py::object>(run_error.ptr())(e.what());
      exc.attr("node") = e.node();
      exc.attr("kernel") = e.kernel();
      exc.attr("fused_kernel") = e.fused();
      exc.attr("source") = e.source();
      exc.attr("detail") = e.detail();
      PyErr_SetObject(run_error.ptr(), exc.ptr());
    } catch (const InternalError& e) {
      internal_error(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });
  main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  py::class_<PyValue>(m, "Value")
      .def_property_readonly("name", &PyValue::name)
      .def_property_readonly("dtype", &PyValue::dtype)
      .def_property_readonly("shape", &PyValue::shape, "dims: ints, symbolic dims as strings; None if rank unknown")
      .def_property_readonly("is_constant", &PyValue::is_constant)
      .def_property_readonly("constant", &PyValue::constant)
      .def("__repr__", [](const PyValue& v) { return "<cuvil.Value %" + v.v->name() + ": " + v.v->type().str() + ">"; });

  py::class_<GraphBuilder>(m, "GraphBuilder")
      .def(py::init(&GraphBuilder::create), py::arg("name") = "main")
      .def("add_input", &GraphBuilder::add_input, py::arg("name"), py::arg("dtype"), py::arg("dims"))
      .def("add_constant", &GraphBuilder::add_constant, py::arg("hint"), py::arg("array"), py::arg("dtype") = "")
      .def("add_node", &GraphBuilder::add_node, py::arg("op"), py::arg("inputs"), py::arg("num_outputs") = 1,
           py::arg("attrs") = py::dict(), py::arg("file") = "", py::arg("line") = 0, py::arg("name") = "",
           py::arg("output_names") = std::vector<std::string>{}, py::arg("stack") = "")
      .def("new_region", &GraphBuilder::new_region, py::arg("name"))
      .def("set_outputs", &GraphBuilder::set_outputs)
      .def("ir", [](const GraphBuilder& b) { return print_graph(*b.graph(), {true}); })
      .def("build", [](const GraphBuilder& b, int opt_level, bool keep_source) {
             return std::make_unique<Model>(b.root(), opt_level, "", keep_source);
           }, py::arg("opt_level") = 1, py::arg("keep_source") = false);

  // One call's cancellation (CompiledModule.run_async): cancel() from any thread stops the call that holds it.
  py::class_<CancelToken, std::shared_ptr<CancelToken>>(m, "CancelToken")
      .def(py::init<>())
      .def("cancel", &CancelToken::cancel)
      .def_property_readonly("cancelled", &CancelToken::cancelled);

  py::class_<Model>(m, "Model")
      .def_property_readonly("input_names", &Model::input_names)
      .def_property_readonly("output_names", &Model::output_names)
      .def_property_readonly("input_types", &Model::input_types)
      .def_property_readonly("output_types", &Model::output_types)
      .def_property_readonly("executors_created", &Model::executors_created)
      .def("ir", &Model::ir, py::arg("elide_large_constants") = true)
      .def("set_threads", &Model::set_threads)
      .def("set_precision", &Model::set_precision)
      .def_property_readonly("precision", &Model::precision)
      .def("precision_report", &Model::precision_report)
      .def("quant_targets", &Model::quant_targets)
      .def("set_quant_hint", &Model::set_quant_hint)
      .def("quant_sum_targets", &Model::quant_sum_targets)
      .def("set_quant_sum_hint", &Model::set_quant_sum_hint)
      .def("set_node_precision", &Model::set_node_precision)
      .def("keep_model_int8_in_f32", &Model::keep_model_int8_in_f32)
      .def("count_model_int8", &Model::count_model_int8)
      .def("run_values", &Model::run_values)
      .def("prepare", &Model::prepare)
      .def("prepare_static", &Model::prepare_static)
      .def("set_limits", &Model::set_limits, py::arg("timeout_s"), py::arg("max_loop_iterations"))
      .def("cancel", &Model::cancel)
      .def("run", &Model::run, py::arg("inputs"), py::arg("cancel") = nullptr)
      .def("run_versioned", &Model::run_versioned, py::arg("inputs"), py::arg("cancel") = nullptr)
      .def("update_weights", &Model::update_weights, py::arg("weights"), py::arg("strict") = true)
      .def("adopt", &Model::adopt, py::arg("other"))
      .def("set_onnx_source", &Model::set_onnx_source, py::arg("path"))
      .def_property_readonly("weights_version", &Model::weights_version)
      .def("weights", &Model::weights)
      .def("profile", &Model::profile)
      .def("profile_report", &Model::profile_report, py::arg("inputs"), py::arg("iters") = 10, py::arg("warmup") = 2,
           py::arg("name") = "")
      .def("stats", &Model::stats)
      .def("cache_key", &Model::cache_key)
      .def("save", &Model::save, py::arg("path"), py::arg("config_json"), py::arg("extra_json"),
           py::arg("fingerprint"), py::arg("dim_ranges"));
  // A .cuv artifact: (model, manifest JSON, the front end's data JSON, dim ranges per input axis).
  m.def("load_artifact", [](const std::string& path) {
    artifact::Loaded a = artifact::load_file(path);
    std::string manifest = a.manifest.json, extra = a.manifest.extra_json;
    // The manifest's dim ranges per input axis: (input, axis, symbol, lo, hi), -1 for no bound.
    std::vector<std::tuple<size_t, size_t, std::string, int64_t, int64_t>> bounds;
    for (const artifact::DimBound& b : artifact::dim_bounds(a.manifest, *a.graph))
      bounds.emplace_back(b.input, b.axis, b.range.symbol, b.range.lo, b.range.hi);
    py::object model = py::cast(std::make_unique<Model>(std::move(a)));
    return py::make_tuple(model, manifest, extra, bounds);
  });
  // Machine code made in this process so far: generated kernels compiled by LLVM or loaded from the disk cache,
  // and oneDNN primitives created.
  m.def("compile_counters", []() {
    codegen::JitStats js = codegen::jit_stats();
    return std::map<std::string, int64_t>{{"generated_kernels_compiled", js.compiled},
                                          {"generated_kernels_loaded", js.disk_hits},
                                          {"onednn_primitives_created", onednn::primitives_created()}};
  });

  m.def(
      "load_onnx",
      [](const std::string& path, int opt_level) {
        return std::make_unique<Model>(import_onnx_file(path), opt_level, /*onnx_path=*/path);
      },
      py::arg("path"), py::arg("opt_level") = 1);
  // The same with ONNX sequence and optional graph inputs bound (python/cuvil/onnx_io.py): returns (model, inputs,
  // outputs), each slot (name, "tensor" | "sequence" | "none", count, optional); model None when a sequence input
  // has no length yet (its count 0), so that the caller binds the lengths of the lists it is given.
  m.def(
      "load_onnx_io",
      [](const std::string& path, int opt_level, const std::map<std::string, int64_t>& sequence_lengths,
         const std::set<std::string>& absent_optionals) {
        OnnxIoLayout layout;
        OnnxImportOptions opts;
        opts.sequence_lengths = sequence_lengths;
        opts.absent_optionals = absent_optionals;
        opts.layout = &layout;
        opts.stop_at_unbound_sequences = true;
        std::shared_ptr<Graph> g = import_onnx_file(path, opts);
        auto slots = [](const std::vector<OnnxIoSlot>& v) {
          py::list l;
          for (const OnnxIoSlot& s : v)
            l.append(py::make_tuple(s.name,
                                    s.kind == OnnxIoSlot::Kind::Tensor     ? "tensor"
                                    : s.kind == OnnxIoSlot::Kind::Sequence ? "sequence"
                                                                           : "none",
                                    s.count, s.optional));
          return l;
        };
        // (update_weights re-imports the source file to name its weights, without these bindings: a bound model
        // names them from its own graph instead)
        const bool bound = !sequence_lengths.empty() || !absent_optionals.empty();
        py::object model =
            g ? py::cast(std::make_unique<Model>(std::move(g), opt_level, /*onnx_path=*/bound ? "" : path))
              : py::none();
        return py::make_tuple(model, slots(layout.inputs), slots(layout.outputs));
      },
      py::arg("path"), py::arg("opt_level") = 1, py::arg("sequence_lengths") = std::map<std::string, int64_t>{},
      py::arg("absent_optionals") = std::set<std::string>{});
  // The profile report's other forms (src/report): the HTML page, the Chrome trace, the diff of two reports.
  // The model cache (python/cuvil/cache/): what this build is, and a fast hash of a buffer (weights).
  m.def("build_info", []() {
    return std::map<std::string, std::string>{{"version", CUVIL_VERSION},
                                              {"git_revision", artifact::git_revision()},
                                              {"llvm_version", codegen::llvm_version()},
                                              {"onednn_version", artifact::onednn_version()},
                                              {"host", codegen::host_cpu_description()},
                                              {"libraries", library_identities()}};
  });
  m.def("bytes_hash", [](py::buffer b) {
    py::buffer_info info = b.request();
    py::ssize_t expect = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] != 1 && info.strides[d] != expect) throw Error("bytes_hash: the buffer must be C-contiguous");
      expect *= info.shape[d];
    }
    size_t n = size_t(info.size) * size_t(info.itemsize);
    py::gil_scoped_release nogil;
    return artifact::bytes_hash(info.ptr, n);
  });
  m.def("report_html", &report::profile_html, py::arg("report_json"));
  m.def("chrome_trace", &report::chrome_trace_json, py::arg("report_json"));
  m.def("diff_reports", &report::diff_reports, py::arg("a_json"), py::arg("b_json"));
  m.def(
      "roofs", [](int threads, bool remeasure) { return report::machine_roofs(threads, remeasure).to_json(); },
      py::arg("threads") = 0, py::arg("remeasure") = false);
  m.def("op_names", []() {
    std::vector<std::string> r;
    for (int i = 0; i < kNumOps; ++i) r.emplace_back(op_name(OpKind(i)));
    return r;
  });
  // The element types (ir/dtype.h's list), for the Python layer's one dtype table: (name, bytes, ONNX id, kind
  // 'f'/'i'/'u'/'b', the NumPy dtype its arrays cross as: bf16 as uint16 bits).
  m.def("dtypes", []() {
    std::vector<py::tuple> r;
    for (DType t : {
#define CUVIL_X(e, ty, s, o) DType::e,
           CUVIL_DTYPES(CUVIL_X)
#undef CUVIL_X
         }) {
      std::string kind = t == DType::boolean ? "b" : is_float(t) ? "f" : is_signed(t) ? "i" : "u";
      r.push_back(py::make_tuple(std::string(dtype_name(t)), dtype_size(t), dtype_onnx_id(t), kind, numpy_dtype(t)));
    }
    return r;
  });
}
