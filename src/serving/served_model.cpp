// ServedModel on Cuvil's in-process runtime: load_model + the -O1 pass pipeline, then a pool of Executors (an
// Executor runs one graph at a time). The one file to change when serving moves to the C API and .cuv files.
#include "serving/served_model.h"

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "artifact/artifact.h"
#include "frontend/load_model.h"
#include "passes/pipeline.h"
#include "runtime/executor.h"

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

class GraphModel final : public ServedModel {
 public:
  GraphModel(std::shared_ptr<Graph> g, const ServedModelOptions& o,
             std::shared_ptr<codegen::KernelCodeSource> kernel_code = nullptr) {
    inputs_ = specs_of(g->inputs());
    outputs_ = specs_of(g->outputs());
    ExecutorOptions eo;
    eo.threads = o.threads;
    eo.kernel_code = std::move(kernel_code);  // an artifact's generated kernels, compiled ahead of time
    for (int i = 0; i < std::max(1, o.instances); ++i) {
      executors_.push_back(std::make_unique<Executor>(g, eo));
      free_.push_back(executors_.back().get());
    }
  }
  const std::vector<TensorSpec>& inputs() const override { return inputs_; }
  const std::vector<TensorSpec>& outputs() const override { return outputs_; }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    Lease l(*this);
    return l.exec->run(inputs);
  }
  void prepare(const std::vector<std::vector<int64_t>>& shapes) override {
    std::vector<std::unique_ptr<Lease>> all;  // every instance, so each one gets the plan
    for (size_t i = 0; i < executors_.size(); ++i) all.push_back(std::make_unique<Lease>(*this));
    for (auto& l : all) l->exec->prepare(shapes);
  }

 private:
  struct Lease {
    GraphModel& m;
    Executor* exec;
    explicit Lease(GraphModel& model) : m(model) {
      std::unique_lock lock(m.mu_);
      m.cv_.wait(lock, [&] { return !m.free_.empty(); });
      exec = m.free_.back();
      m.free_.pop_back();
    }
    ~Lease() {
      {
        std::lock_guard lock(m.mu_);
        m.free_.push_back(exec);
      }
      m.cv_.notify_one();
    }
  };
  std::vector<TensorSpec> inputs_, outputs_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Executor*> free_;
};

}  // namespace

std::shared_ptr<ServedModel> load_served_model(const std::string& model_file, const ServedModelOptions& options) {
  if (model_file.size() > 4 && model_file.ends_with(".cuv")) {  // optimized when it was compiled
    artifact::Loaded l = artifact::load_file(model_file);
    return std::make_shared<GraphModel>(std::move(l.graph), options, std::move(l.kernel_code));
  }
  std::shared_ptr<Graph> g = load_model(model_file);
  optimize(*g, 1);
  return std::make_shared<GraphModel>(std::move(g), options);
}

}  // namespace cuvil::serving
