// The C API (include/cuvil/cuvil.h) over the artifact loader and the executor. Every entry point catches every
// exception: nothing C++ crosses the boundary; failures become status objects.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "cuvil/cuvil.h"
#include "runtime/executor.h"
#include "runtime/versioned_model.h"
#include "runtime/weight_recipes.h"
#include "runtime/weights.h"

using namespace cuvil;

struct cuvil_status {
  cuvil_code code;
  std::string message, node, location;
};

struct cuvil_session {
  artifact::Loaded loaded;  // (its graph keeps the file mapped: every weights version views weights there)
  std::unique_ptr<VersionedModel> versions;  // the weights versions, each with its pool of executors
  struct Io {
    std::string name;
    DType dtype;
    std::vector<int64_t> dims;  // -1: symbolic
    std::vector<std::string> dim_names;
  };
  std::vector<Io> inputs, outputs;
  std::vector<artifact::DimBound> bounds;  // the manifest's dim ranges, checked on every run
  std::vector<std::string> weight_names;
  // The artifact's folds and original weights (runtime/weight_recipes.h) as of each weights version that was
  // current or staged: updates by original names fold again from the version they are staged on.
  std::mutex recipes_mu;
  std::map<uint64_t, std::shared_ptr<const WeightRecipes>> recipes;
  std::shared_ptr<const WeightRecipes> recipes_of(uint64_t version) {
    std::lock_guard<std::mutex> lock(recipes_mu);
    auto it = recipes.find(version);
    return it == recipes.end() ? nullptr : it->second;
  }
};

struct cuvil_weights {
  std::shared_ptr<WeightsVersion> version;
  uint64_t base = 0;  // the version it was staged from
  std::shared_ptr<const WeightRecipes> recipes;  // the originals this version holds (null: no recipes)
};

namespace {

constexpr DType kDtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8,  DType::i16,    DType::i32,
                             DType::i64, DType::u8,  DType::u16, DType::u32,  DType::u64, DType::boolean};

// A dtype as the caller wrote it. C lets an enum object hold any int; C++ reading one that is not an enumerator is
// undefined (UBSan's -fsanitize=enum), so the bits are read as the int they are.
int32_t raw_dtype(const cuvil_dtype& c) {
  static_assert(sizeof(cuvil_dtype) == sizeof(int32_t));
  int32_t v;
  std::memcpy(&v, &c, sizeof v);
  return v;
}
bool to_dtype(const cuvil_dtype& c, DType* out) {
  int32_t v = raw_dtype(c);
  if (v < 0 || size_t(v) >= std::size(kDtypes)) return false;
  *out = kDtypes[size_t(v)];
  return true;
}
cuvil_dtype from_dtype(DType t) {
  for (size_t i = 0; i < std::size(kDtypes); ++i)
    if (kDtypes[i] == t) return cuvil_dtype(i);
  return CUVIL_F32;
}

void set_status(cuvil_status** out, cuvil_code code, const std::string& msg, const std::string& node = "",
                const std::string& loc = "") {
  if (!out) return;
  *out = new (std::nothrow) cuvil_status{code, msg, node, loc};
}

// The node an executor error names: its messages start with Node::describe(). The longest match wins.
const Node* named_node(const Graph& g, const std::string& msg, size_t* best, const Node* found, int depth = 0) {
  for (const auto& n : g.nodes()) {
    std::string d = n->describe();
    if (d.size() > *best && msg.compare(0, d.size(), d) == 0) {
      *best = d.size();
      found = n.get();
    }
    if (depth < 64)
      for (Graph* r : n->regions()) found = named_node(*r, msg, best, found, depth + 1);
  }
  return found;
}

cuvil_code code_of_load_error(const std::string& msg) {
  return msg.find("needs CPU features") != std::string::npos ? CUVIL_UNSUPPORTED_CPU : CUVIL_INVALID_ARTIFACT;
}

cuvil_session* make_session(artifact::Loaded loaded, const cuvil_session_options* options) {
  auto s = std::make_unique<cuvil_session>();
  s->loaded = std::move(loaded);
  ExecutorOptions o;
  o.threads = options ? options->threads : 0;
  o.kernel_code = s->loaded.kernel_code;
  s->versions = std::make_unique<VersionedModel>(s->loaded.graph, o);
  if (s->loaded.recipes) {
    s->recipes[s->versions->current_id()] = s->loaded.recipes;
    for (const WeightInfo& w : list_weights(*s->loaded.graph, *s->loaded.recipes)) s->weight_names.push_back(w.name);
  } else {
    for (const WeightInfo& w : list_weights(*s->loaded.graph)) s->weight_names.push_back(w.name);
  }
  auto describe = [](const std::vector<Value*>& vs, std::vector<cuvil_session::Io>& out) {
    for (Value* v : vs) {
      bool known = std::find(std::begin(kDtypes), std::end(kDtypes), v->dtype()) != std::end(kDtypes);
      CUVIL_CHECK(known, "'", v->name(), "' has element type ", dtype_name(v->dtype()),
                  ", which the C API has no cuvil_dtype for (strings, low-precision codes): use the Python API");
      cuvil_session::Io io{v->name(), v->dtype(), {}, {}};
      if (v->shape().rank_known())
        for (const Dim& d : v->shape().dims()) {
          io.dims.push_back(d.is_const() ? d.value() : -1);
          io.dim_names.push_back(d.is_const() ? "" : d.str());
        }
      out.push_back(std::move(io));
    }
  };
  s->bounds = artifact::dim_bounds(s->loaded.manifest, *s->loaded.graph);
  describe(s->loaded.graph->inputs(), s->inputs);
  describe(s->loaded.graph->outputs(), s->outputs);
  // A model whose inputs are all static is prepared now (plan, kernels, packed weights): the first run only runs.
  std::vector<std::vector<int64_t>> shapes;
  bool all_static = true;
  for (Value* v : s->loaded.graph->inputs()) {
    all_static = all_static && v->shape().is_static();
    if (all_static) shapes.push_back(v->shape().static_dims());
  }
  if (all_static) s->versions->prepare(shapes);
  return s.release();
}

bool check_options(const cuvil_session_options* o, cuvil_status** status) {
  if (o && (o->struct_size < offsetof(cuvil_session_options, threads) + sizeof(int32_t) || o->threads < 0)) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_options: bad struct_size or negative threads");
    return false;
  }
  return true;
}

// The callers' tensors as views, each checked: struct size, dtype, rank, dims, a buffer large enough.
bool views(const cuvil_tensor* ts, size_t n, const char* what, bool output, std::vector<Tensor>& out,
           cuvil_code* code, cuvil_status** status_out) {
  cuvil_status* st = nullptr;
  cuvil_status** status = &st;
  struct Report {  // the code always; the status object only when the caller asked for one
    cuvil_status*& st;
    cuvil_code* code;
    cuvil_status** out;
    ~Report() {
      if (!st) return;
      *code = st->code;
      if (out) *out = st;
      else delete st;
    }
  } report{st, code, status_out};
  if (n && !ts) {
    set_status(status, CUVIL_INVALID_ARGUMENT, std::string(what) + ": null array");
    return false;
  }
  static uint8_t empty_anchor[64];
  for (size_t i = 0; i < n; ++i) {
    const cuvil_tensor& t = ts[i];
    std::string name = std::string(what) + " " + std::to_string(i);
    DType dt;
    if (t.struct_size < sizeof(cuvil_tensor) || !to_dtype(t.dtype, &dt) || t.rank < 0 || t.rank > 64 ||
        (t.rank > 0 && !t.dims)) {
      set_status(status, CUVIL_INVALID_ARGUMENT, name + ": bad struct_size, dtype, rank or dims");
      return false;
    }
    std::vector<int64_t> dims(t.dims, t.dims + t.rank);
    uint64_t bytes = dtype_size(dt);
    for (int64_t d : dims)
      if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes)) {
        set_status(status, output ? CUVIL_OUTPUT_MISMATCH : CUVIL_INPUT_MISMATCH, name + ": bad dims");
        return false;
      }
    if (bytes > t.bytes || (bytes && !t.data)) {
      set_status(status, output ? CUVIL_OUTPUT_MISMATCH : CUVIL_INPUT_MISMATCH,
                 name + ": its buffer holds " + std::to_string(t.bytes) + " bytes, its dims need " +
                     std::to_string(bytes));
      return false;
    }
    out.push_back(Tensor::view(dt, dims, t.data ? t.data : empty_anchor));
  }
  return true;
}

// Runs f, turning any exception into a status; returns `fallback` then (for a cuvil_code: the status's code).
template <class F, class R = decltype(std::declval<F>()())>
R guarded(cuvil_status** status, cuvil_code on_error, const Graph* g, R fallback, F&& f) {
  cuvil_code code = CUVIL_INTERNAL;
  try {
    return f();
  } catch (const InputError& e) {
    code = CUVIL_INPUT_MISMATCH;
    set_status(status, code, e.what());
  } catch (const Error& e) {
    std::string msg = e.what(), node, loc;
    if (g) {
      size_t best = 0;
      if (const Node* n = named_node(*g, msg, &best, nullptr)) {
        node = std::string(n->op_name()) + (n->num_outputs() ? " -> " + n->output(0)->name() : "");
        loc = n->loc().str();
      }
    }
    code = on_error == CUVIL_INVALID_ARTIFACT ? code_of_load_error(msg) : on_error;
    set_status(status, code, msg, node, loc);
  } catch (const std::bad_alloc&) {
    set_status(status, code, "out of memory");
  } catch (const std::exception& e) {
    set_status(status, code, std::string("internal error: ") + e.what());
  } catch (...) {
    set_status(status, code, "internal error");
  }
  if constexpr (std::is_same_v<R, cuvil_code>) return code;
  else return fallback;
}

}  // namespace

extern "C" {

cuvil_code cuvil_status_code(const cuvil_status* s) { return s ? s->code : CUVIL_OK; }
const char* cuvil_status_message(const cuvil_status* s) { return s ? s->message.c_str() : ""; }
const char* cuvil_status_node(const cuvil_status* s) { return s ? s->node.c_str() : ""; }
const char* cuvil_status_location(const cuvil_status* s) { return s ? s->location.c_str() : ""; }
void cuvil_status_free(cuvil_status* s) { delete s; }

cuvil_session* cuvil_session_create_from_file(const char* path, const cuvil_session_options* options,
                                              cuvil_status** status) {
  if (!path) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_create_from_file: null path");
    return nullptr;
  }
  if (!check_options(options, status)) return nullptr;
  return guarded(status, CUVIL_INVALID_ARTIFACT, nullptr, (cuvil_session*)nullptr,
                 [&]() -> cuvil_session* { return make_session(artifact::load_file(path), options); });
}

cuvil_session* cuvil_session_create_from_memory(const void* data, size_t size, const cuvil_session_options* options,
                                                cuvil_status** status) {
  if (!data && size) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_create_from_memory: null buffer");
    return nullptr;
  }
  if (!check_options(options, status)) return nullptr;
  return guarded(status, CUVIL_INVALID_ARTIFACT, nullptr, (cuvil_session*)nullptr,
                 [&]() -> cuvil_session* { return make_session(artifact::load_memory(data, size), options); });
}

void cuvil_session_free(cuvil_session* s) { delete s; }

size_t cuvil_session_input_count(const cuvil_session* s) { return s ? s->inputs.size() : 0; }
size_t cuvil_session_output_count(const cuvil_session* s) { return s ? s->outputs.size() : 0; }

static const cuvil_session::Io* io(const cuvil_session* s, size_t i, bool input) {
  if (!s) return nullptr;
  const auto& v = input ? s->inputs : s->outputs;
  return i < v.size() ? &v[i] : nullptr;
}
const char* cuvil_session_input_name(const cuvil_session* s, size_t i) {
  auto* p = io(s, i, true);
  return p ? p->name.c_str() : nullptr;
}
const char* cuvil_session_output_name(const cuvil_session* s, size_t i) {
  auto* p = io(s, i, false);
  return p ? p->name.c_str() : nullptr;
}
cuvil_dtype cuvil_session_input_dtype(const cuvil_session* s, size_t i) {
  auto* p = io(s, i, true);
  return p ? from_dtype(p->dtype) : CUVIL_F32;
}
cuvil_dtype cuvil_session_output_dtype(const cuvil_session* s, size_t i) {
  auto* p = io(s, i, false);
  return p ? from_dtype(p->dtype) : CUVIL_F32;
}
static int32_t copy_dims(const cuvil_session::Io* p, int64_t* dims, size_t max_dims) {
  if (!p) return -1;
  if (dims)
    for (size_t k = 0; k < p->dims.size() && k < max_dims; ++k) dims[k] = p->dims[k];
  return int32_t(p->dims.size());
}
int32_t cuvil_session_input_dims(const cuvil_session* s, size_t i, int64_t* dims, size_t max_dims) {
  return copy_dims(io(s, i, true), dims, max_dims);
}
int32_t cuvil_session_output_dims(const cuvil_session* s, size_t i, int64_t* dims, size_t max_dims) {
  return copy_dims(io(s, i, false), dims, max_dims);
}
size_t cuvil_dtype_size(cuvil_dtype t) {
  DType d;
  return to_dtype(t, &d) ? dtype_size(d) : 0;
}

cuvil_code cuvil_session_run(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs,
                             const cuvil_tensor* outputs, size_t n_outputs, cuvil_status** status) {
  return cuvil_session_run_versioned(s, inputs, n_inputs, outputs, n_outputs, nullptr, status);
}

cuvil_code cuvil_session_run_versioned(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs,
                                       const cuvil_tensor* outputs, size_t n_outputs, uint64_t* weights_version,
                                       cuvil_status** status) {
  if (!s) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_run: null session");
    return CUVIL_INVALID_ARGUMENT;
  }
  if (n_outputs != s->outputs.size()) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_run: the model has " +
                                                   std::to_string(s->outputs.size()) + " outputs, given " +
                                                   std::to_string(n_outputs));
    return CUVIL_INVALID_ARGUMENT;
  }
  std::vector<Tensor> ins, outs;
  cuvil_code bad = CUVIL_OK;
  if (!views(inputs, n_inputs, "input", false, ins, &bad, status) ||
      !views(outputs, n_outputs, "output", true, outs, &bad, status))
    return bad;
  return guarded(status, CUVIL_RUN_FAILED, s->loaded.graph.get(), CUVIL_RUN_FAILED, [&]() -> cuvil_code {
    std::vector<std::vector<int64_t>> shapes;
    for (const Tensor& t : ins) shapes.push_back(t.shape());
    artifact::check_dim_ranges(s->bounds, *s->loaded.graph, shapes);
    VersionedModel::Lease lease = s->versions->lease();
    try {
      lease.executor().run_into(ins, outs);
      if (weights_version) *weights_version = lease.version_id();
      lease.note_shapes(std::move(shapes));
    } catch (const InputError& e) {
      // run_into's own check of the output buffers is an InputError naming "run_into: output".
      if (std::string(e.what()).find("run_into: output") != std::string::npos) {
        set_status(status, CUVIL_OUTPUT_MISMATCH, e.what());
        return CUVIL_OUTPUT_MISMATCH;
      }
      throw;
    }
    return CUVIL_OK;
  });
}

int32_t cuvil_session_output_shape(cuvil_session* s, const cuvil_tensor* inputs, size_t n_inputs, size_t i,
                                   int64_t* dims, size_t max_dims, cuvil_status** status) {
  if (!s || i >= s->outputs.size()) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_session_output_shape: null session or output index");
    return -1;
  }
  std::vector<Tensor> ins;
  cuvil_code bad = CUVIL_OK;
  if (!views(inputs, n_inputs, "input", false, ins, &bad, status)) return -1;
  return guarded(status, CUVIL_RUN_FAILED, s->loaded.graph.get(), int32_t(-1), [&]() -> int32_t {
    const Graph& g = *s->loaded.graph;
    if (ins.size() != g.inputs().size())
      throw InputError("the model has " + std::to_string(g.inputs().size()) + " inputs, given " +
                       std::to_string(ins.size()));
    // Symbols bound from the inputs' dims; an output whose dims they fix needs no run.
    SymbolBindings b;
    for (size_t k = 0; k < ins.size(); ++k) {
      const Shape& sh = g.inputs()[k]->shape();
      if (!sh.rank_known() || sh.rank() != ins[k].rank()) continue;
      for (size_t d = 0; d < sh.rank(); ++d)
        if (sh.dims()[d].is_symbol()) b[sh.dims()[d].symbol_name()] = ins[k].dim(d);
    }
    std::vector<int64_t> out;
    const Shape& os = g.outputs()[i]->shape();
    bool known = os.rank_known();
    for (size_t d = 0; known && d < os.rank(); ++d) {
      std::optional<int64_t> v = os.dims()[d].eval(b);
      if (v) out.push_back(*v);
      else known = false;
    }
    if (!known) out = s->versions->lease().executor().run(ins).at(i).shape();  // data-dependent: one run tells
    if (dims)
      for (size_t k = 0; k < out.size() && k < max_dims; ++k) dims[k] = out[k];
    return int32_t(out.size());
  });
}

size_t cuvil_session_weight_count(const cuvil_session* s) { return s ? s->weight_names.size() : 0; }
const char* cuvil_session_weight_name(const cuvil_session* s, size_t i) {
  return s && i < s->weight_names.size() ? s->weight_names[i].c_str() : nullptr;
}
uint64_t cuvil_session_weights_version(const cuvil_session* s) { return s ? s->versions->current_id() : 0; }

cuvil_code cuvil_weights_stage(cuvil_session* s, const char* const* names, const cuvil_tensor* tensors, size_t n,
                               uint32_t flags, cuvil_weights** staged, cuvil_status** status) {
  if (!s || !staged || (n && !names) || (flags & ~CUVIL_WEIGHTS_SUBSET)) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_weights_stage: null session, names or result, or unknown flags");
    return CUVIL_INVALID_ARGUMENT;
  }
  *staged = nullptr;
  for (size_t i = 0; i < n; ++i)
    if (!names[i]) {
      set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_weights_stage: name " + std::to_string(i) + " is null");
      return CUVIL_INVALID_ARGUMENT;
    }
  std::vector<Tensor> views_of;
  cuvil_code bad = CUVIL_OK;
  if (!views(tensors, n, "weight", false, views_of, &bad, status)) return bad;
  return guarded(status, CUVIL_WEIGHTS_MISMATCH, nullptr, CUVIL_WEIGHTS_MISMATCH, [&]() -> cuvil_code {
    std::vector<std::pair<std::string, Tensor>> ws;
    for (size_t i = 0; i < n; ++i) ws.emplace_back(names[i], views_of[i].clone());  // the caller's buffers may go
    std::shared_ptr<WeightsVersion> base = s->versions->current();
    auto w = std::make_unique<cuvil_weights>();
    bool strict = !(flags & CUVIL_WEIGHTS_SUBSET);
    try {
      if (std::shared_ptr<const WeightRecipes> r = s->recipes_of(base->id())) {
        // Original names: the folds made again (off the request path), then the derived constants replaced.
        auto next = std::make_shared<WeightRecipes>();
        auto derived = translate_updates(*base->graph(), *r, ws, strict, next.get());
        w->version = s->versions->stage(with_weights(*base->graph(), derived, false));
        w->recipes = std::move(next);
      } else {
        w->version = s->versions->stage(with_weights(*base->graph(), ws, strict));
      }
    } catch (const InputError& e) {  // names, dtypes, shapes, missing weights: nothing was built
      set_status(status, CUVIL_WEIGHTS_MISMATCH, e.what());
      return CUVIL_WEIGHTS_MISMATCH;
    }
    w->base = base->id();
    *staged = w.release();
    return CUVIL_OK;
  });
}

cuvil_code cuvil_weights_commit(cuvil_session* s, const cuvil_weights* staged, uint64_t* version,
                                cuvil_status** status) {
  if (!s || !staged) {
    set_status(status, CUVIL_INVALID_ARGUMENT, "cuvil_weights_commit: null session or staged weights");
    return CUVIL_INVALID_ARGUMENT;
  }
  return guarded(status, CUVIL_WEIGHTS_MISMATCH, nullptr, CUVIL_WEIGHTS_MISMATCH, [&]() -> cuvil_code {
    try {
      if (staged->recipes) {
        // Known before the commit publishes the version: a stage on it right after finds its originals.
        std::lock_guard<std::mutex> lock(s->recipes_mu);
        s->recipes[staged->version->id()] = staged->recipes;
      }
      s->versions->commit(staged->version, staged->base);
    } catch (const InputError& e) {  // staged before another commit
      set_status(status, CUVIL_WEIGHTS_MISMATCH, e.what());
      return CUVIL_WEIGHTS_MISMATCH;
    }
    if (staged->recipes) {  // stages from now on start from this version (or one still being staged on)
      std::lock_guard<std::mutex> lock(s->recipes_mu);
      std::erase_if(s->recipes, [&](const auto& e) { return e.first < staged->base; });
    }
    if (version) *version = staged->version->id();
    return CUVIL_OK;
  });
}

uint64_t cuvil_weights_version(const cuvil_weights* w) { return w ? w->version->id() : 0; }
void cuvil_weights_free(cuvil_weights* w) { delete w; }

const char* cuvil_version(void) { return CUVIL_VERSION; }

}  // extern "C"
