// What the server needs from a model: its tensor signature and a thread-safe batched run. The server (batcher,
// protocol, repository) sees only this interface, so moving from the in-process compiler (ONNX/.cvir loaded,
// optimized and run on Executors) to the C API and .cuv artifacts is a change to served_model.cpp alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace cuvil::serving {

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  bool rank_known = true;
  std::vector<int64_t> shape;  // -1 for a dim not fixed by the model
};

struct ServedModelOptions {
  int instances = 1;  // executors that may run at once (each one run at a time)
  int threads = 0;    // threads per run; 0 = the machine's cores
};

class ServedModel {
 public:
  virtual ~ServedModel() = default;
  virtual const std::vector<TensorSpec>& inputs() const = 0;
  virtual const std::vector<TensorSpec>& outputs() const = 0;
  // Inputs in inputs() order, already checked against it; thread-safe (waits for a free instance).
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) = 0;
  // run(), also saying which weights version produced the outputs (hot weight swap; 0 when the model has none).
  virtual std::vector<Tensor> run_versioned(const std::vector<Tensor>& inputs, uint64_t* weights_version) {
    *weights_version = 0;
    return run(inputs);
  }
  // Prepares the plan for these input shapes ahead of the first request that has them (optional).
  virtual void prepare(const std::vector<std::vector<int64_t>>& input_shapes) {}
  // Hot weight swap: when MODEL_FILE holds this model's graph with other weights (the same nodes, attributes,
  // inputs, outputs and constant names and types), its weights become the next version: executors prepared off
  // the request path, published with one pointer swap; runs in flight finish on the weights they started with.
  // Returns the new weights version (> 0; `before_publish` is told it first), or 0 when the file differs in more
  // than weights (reload it instead). Throws cuvil::Error when the file does not load; the current weights keep
  // serving.
  virtual uint64_t swap_weights(const std::string& model_file,
                                const std::function<void(uint64_t)>& before_publish) {
    return 0;
  }
};

// Loads MODEL_FILE: a .cuv artifact (as compiled), or .onnx / .cvir (optimized at -O1 here). Throws cuvil::Error on bad input.
std::shared_ptr<ServedModel> load_served_model(const std::string& model_file, const ServedModelOptions& options);

}  // namespace cuvil::serving
