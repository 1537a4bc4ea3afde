// ServedModel on Cuvil's runtime: a VersionedModel (hot weight swap, runtime/versioned_model.h) over the graph of a
// .cuv artifact (as compiled, with its kernel code) or of an ONNX/.cvir file (load_model + the -O1 passes), at most
// `instances` runs at once.
#include "serving/served_model.h"

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "artifact/artifact.h"
#include "artifact/cache_key.h"
#include "frontend/load_model.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/versioned_model.h"
#include "runtime/weights.h"

namespace cuvil::serving {
namespace {

std::vector<TensorSpec> specs_of(const std::vector<Value*>& values) {
  std::vector<TensorSpec> r;
  for (Value* v : values) {
    TensorSpec s;
    s.name = v->name();
    s.dtype = v->dtype();
    s.rank_known = v->shape().rank_known();
    if (s.rank_known)
      for (const Dim& d : v->shape().dims()) s.shape.push_back(d.is_const() ? d.value() : -1);
    r.push_back(std::move(s));
  }
  return r;
}

struct LoadedGraph {
  std::shared_ptr<Graph> graph;
  std::shared_ptr<codegen::KernelCodeSource> kernel_code;
};

LoadedGraph load_graph(const std::string& model_file) {
  if (model_file.size() > 4 && model_file.ends_with(".cuv")) {  // optimized when it was compiled
    artifact::Loaded l = artifact::load_file(model_file);
    return {std::move(l.graph), std::move(l.kernel_code)};
  }
  std::shared_ptr<Graph> g = load_model(model_file);
  optimize(*g, 1);
  return {std::move(g), nullptr};
}

// The graph's text with every non-inline constant as external(i) in order, without locations.
std::string structure_text(const Graph& g) {
  int64_t n = 0;
  PrintOptions po;
  po.external = [&](const Tensor&) { return n++; };
  return artifact::strip_locations(print_graph(g, po));
}

// Whether `next` is `cur` with other constant values: `cur` with all of next's constants put in (in next's order,
// so both list them alike) must print as next does. Small constants print inline, so comparing the two texts
// alone would call a changed bias a changed graph.
bool differs_only_in_weights(const Graph& cur, const Graph& next) {
  std::vector<std::pair<std::string, Tensor>> all;
  for (const Value* v : next.constants()) all.emplace_back(v->name(), v->constant());
  std::shared_ptr<Graph> merged;
  try {
    merged = with_weights(cur, all, /*strict=*/false);
  } catch (const Error&) {
    return false;  // a constant next has and cur has not, or of another type
  }
  return merged->constants().size() == next.constants().size() && structure_text(*merged) == structure_text(next);
}

class GraphModel final : public ServedModel {
 public:
  GraphModel(LoadedGraph g, const ServedModelOptions& o)
      : inputs_(specs_of(g.graph->inputs())),
        outputs_(specs_of(g.graph->outputs())),
        instances_(std::max(1, o.instances)),
        versions_(g.graph, [&] {
          ExecutorOptions eo;
          eo.threads = o.threads;
          eo.kernel_code = std::move(g.kernel_code);  // an artifact's generated kernels, compiled ahead of time
          return eo;
        }()) {}
  const std::vector<TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    uint64_t v;
    return run_versioned(inputs, &v);
  }
  std::vector<Tensor> run_versioned(const std::vector<Tensor>& inputs, uint64_t* weights_version) override {
    Slot slot(*this);
    VersionedModel::Lease l = versions_.lease();
    *weights_version = l.version_id();
    std::vector<Tensor> out = l.executor().run(inputs);
    InputShapes shapes;  // (a swap prepares the next weights' executors for the shapes run last)
    shapes.reserve(inputs.size());
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    l.note_shapes(std::move(shapes));
    return out;
  }

  void prepare(const std::vector<std::vector<int64_t>>& shapes) override {
    {
      std::lock_guard lock(mu_);
      prepared_.push_back(shapes);
    }
    // Every instance, so each one gets the plan (leases held together are distinct executors).
    std::vector<std::unique_ptr<VersionedModel::Lease>> all;
    for (int i = 0; i < instances_; ++i) all.push_back(std::make_unique<VersionedModel::Lease>(versions_.lease()));
    for (auto& l : all) l->executor().prepare(shapes);
  }

  uint64_t swap_weights(const std::string& model_file,
                        const std::function<void(uint64_t)>& before_publish) override {
    LoadedGraph next = load_graph(model_file);
    std::shared_ptr<WeightsVersion> cur = versions_.current();
    if (!differs_only_in_weights(*cur->graph(), *next.graph)) return 0;
    // stage() prepares as many executors as ran at once, for the shapes run most recently; the warm-up shapes
    // (every batch size) are prepared on each of them here too, so no request pays for a plan after the swap.
    std::shared_ptr<WeightsVersion> staged = versions_.stage(next.graph);
    std::vector<InputShapes> warm;
    {
      std::lock_guard lock(mu_);
      warm = prepared_;
    }
    if (!warm.empty()) {
      std::vector<std::unique_ptr<Executor>> es;
      int64_t n = std::max<int64_t>(instances_, staged->executors_created());
      for (int64_t i = 0; i < n; ++i) es.push_back(staged->take());
      for (auto& e : es)
        for (const InputShapes& s : warm) e->prepare(s);
      for (auto& e : es) staged->give(std::move(e));
    }
    before_publish(staged->id());
    versions_.commit(staged, cur->id());  // (refused if another swap won meanwhile: the repository serializes them)
    return staged->id();
  }

 private:
  // One of the `instances` run slots (VersionedModel makes executors on demand; this bounds them).
  struct Slot {
    GraphModel& m;
    explicit Slot(GraphModel& model) : m(model) {
      std::unique_lock lock(m.mu_);
      m.cv_.wait(lock, [&] { return m.running_ < m.instances_; });
      ++m.running_;
    }
    ~Slot() {
      {
        std::lock_guard lock(m.mu_);
        --m.running_;
      }
      m.cv_.notify_one();
    }
  };
  std::vector<TensorSpec> inputs_, outputs_;
  const int instances_;
  VersionedModel versions_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
  std::vector<InputShapes> prepared_;
};

}  // namespace

std::shared_ptr<ServedModel> load_served_model(const std::string& model_file, const ServedModelOptions& options) {
  return std::make_shared<GraphModel>(load_graph(model_file), options);
}

}  // namespace cuvil::serving
