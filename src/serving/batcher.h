// The dynamic batcher of one model: requests queue up; a worker takes the oldest one and, while the batch has
// room and the oldest has waited less than max_queue_delay, adds queued requests of the same signature (dtypes
// and every dim but the batch dim), concatenates them along dim 0 into one run and splits the outputs back.
// A full queue rejects (ProtocolError 503); destruction drains: queued requests still run.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serving/metrics.h"
#include "serving/served_model.h"

namespace cuvil::serving {

struct BatcherOptions {
  int64_t max_batch_size = 0;  // rows per run; 0: the model does not batch, each request runs alone
  std::chrono::microseconds max_queue_delay{0};
  size_t max_queue_size = 1024;  // queued requests beyond this are rejected
  int workers = 1;               // runs in flight at once (the model's instances)
};

// One request's passage through the batcher.
class BatchJob {
 public:
  // Waits up to `timeout` for the outputs; false on time-out (the job is then cancelled: if it has not started it
  // never runs). Rethrows the run's error.
  bool wait(std::chrono::nanoseconds timeout);
  std::vector<Tensor>& outputs() { return outputs_; }
  // The weights version that produced the outputs (ServedModel::run_versioned; 0: the model has none).
  uint64_t weights_version() const { return weights_version_; }

 private:
  friend class DynamicBatcher;
  void finish(std::vector<Tensor> outputs, std::exception_ptr error);
  std::vector<Tensor> inputs_, outputs_;
  std::string signature_;
  int64_t rows_ = 1;
  std::chrono::steady_clock::time_point enqueued_;
  std::exception_ptr error_;
  uint64_t weights_version_ = 0;  // written before finish() publishes the outputs
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

class DynamicBatcher {
 public:
  DynamicBatcher(std::shared_ptr<ServedModel> model, BatcherOptions options, ModelMetrics* metrics);
  ~DynamicBatcher();  // drains

  // Queues inputs already checked against the model (bind_inputs). Throws ProtocolError(503) when the queue is
  // full or the batcher is stopping.
  std::shared_ptr<BatchJob> submit(std::vector<Tensor> inputs);
  // Stops accepting, runs what is queued, joins the workers.
  void drain();

  const BatcherOptions& options() const { return options_; }
  const std::shared_ptr<ServedModel>& model() const { return model_; }

 private:
  void work();
  void run_batch(std::vector<std::shared_ptr<BatchJob>>& jobs);

  std::shared_ptr<ServedModel> model_;
  BatcherOptions options_;
  ModelMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<BatchJob>> queue_;
  bool stopping_ = false;
  int active_ = 0;  // runs in progress (workers' and inline ones), at most options_.workers
  std::vector<std::thread> workers_;
};

// Concatenates tensors of one dtype and equal trailing dims along dim 0 / splits one back into `rows` pieces.
Tensor concat_rows(const std::vector<const Tensor*>& parts);
std::vector<Tensor> split_rows(const Tensor& t, const std::vector<int64_t>& rows);

}  // namespace cuvil::serving
