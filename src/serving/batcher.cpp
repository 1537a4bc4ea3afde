#include "serving/batcher.h"

#include <algorithm>
#include <cstring>

#include "serving/protocol.h"

namespace cuvil::serving {
namespace {

std::string signature_of(const std::vector<Tensor>& inputs, bool batched) {
  std::string s;
  for (const Tensor& t : inputs) {
    s += dtype_name(t.dtype());
    s += '[';
    for (size_t d = batched ? 1 : 0; d < t.rank(); ++d) s += std::to_string(t.dim(d)) + ',';
    s += ']';
  }
  return s;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Tensor concat_rows(const std::vector<const Tensor*>& parts) {
  CUVIL_CHECK(!parts.empty(), "internal error: nothing to concatenate");
  std::vector<int64_t> shape = parts[0]->shape();
  CUVIL_CHECK(!shape.empty(), "internal error: concatenating scalars");
  int64_t rows = 0;
  for (const Tensor* t : parts) rows += t->dim(0);
  shape[0] = rows;
  Tensor out = Tensor::zeros(parts[0]->dtype(), shape);
  char* p = static_cast<char*>(out.raw());
  for (const Tensor* t : parts) {
    std::memcpy(p, t->raw(), t->nbytes());
    p += t->nbytes();
  }
  return out;
}

std::vector<Tensor> split_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<Tensor> out;
  size_t row_bytes = t.dim(0) ? t.nbytes() / size_t(t.dim(0)) : 0;
  const char* p = static_cast<const char*>(t.raw());
  for (int64_t r : rows) {
    std::vector<int64_t> shape = t.shape();
    shape[0] = r;
    Tensor piece = Tensor::zeros(t.dtype(), shape);
    std::memcpy(piece.raw(), p, piece.nbytes());
    p += size_t(r) * row_bytes;
    out.push_back(std::move(piece));
  }
  return out;
}

bool BatchJob::wait(std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    cancelled_ = true;
    return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void BatchJob::finish(std::vector<Tensor> outputs, std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    outputs_ = std::move(outputs);
    error_ = error;
    done_ = true;
  }
  cv_.notify_all();
}

DynamicBatcher::DynamicBatcher(std::shared_ptr<ServedModel> model, BatcherOptions options, ModelMetrics* metrics)
    : model_(std::move(model)), options_(options), metrics_(metrics) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { work(); });
}

DynamicBatcher::~DynamicBatcher() { drain(); }

void DynamicBatcher::drain() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

std::shared_ptr<BatchJob> DynamicBatcher::submit(std::vector<Tensor> inputs) {
  auto job = std::make_shared<BatchJob>();
  bool batched = options_.max_batch_size > 0;
  job->rows_ = batched && !inputs.empty() ? inputs[0].dim(0) : 1;
  job->signature_ = signature_of(inputs, batched);
  job->inputs_ = std::move(inputs);
  job->enqueued_ = std::chrono::steady_clock::now();
  {
    std::unique_lock lock(mu_);
    if (stopping_) throw ProtocolError(503, "the server is shutting down");
    // Idle and nothing to wait for (no batching, or no queue delay): run on the caller's thread, sparing the two
    // thread hand-offs (tens of microseconds each, most of a small model's latency).
    bool inline_run = queue_.empty() && active_ < std::max(1, options_.workers) &&
                      (options_.max_batch_size == 0 || options_.max_queue_delay.count() == 0);
    if (inline_run) {
      ++active_;
    } else {
      if (queue_.size() >= options_.max_queue_size)
        throw ProtocolError(503, "the model's queue is full (" + std::to_string(options_.max_queue_size) + " requests)");
      queue_.push_back(job);
      if (metrics_) metrics_->queue_depth->Set(double(queue_.size()));
    }
    if (inline_run) {
      lock.unlock();
      std::vector<std::shared_ptr<BatchJob>> jobs{job};
      run_batch(jobs);  // (reports errors through the job, never throws)
      lock.lock();
      --active_;
      if (!queue_.empty()) cv_.notify_one();  // requests that came meanwhile
      return job;
    }
  }
  cv_.notify_one();
  return job;
}

void DynamicBatcher::work() {
  for (;;) {
    std::vector<std::shared_ptr<BatchJob>> jobs;
    bool more = false;
    {
      std::unique_lock lock(mu_);
      // (A free instance too: a request run inline on its own thread holds one.)
      cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && active_ < std::max(1, options_.workers)); });
      if (queue_.empty()) return;  // stopping and drained
      if (options_.max_batch_size > 0) {
        // A signature's batch is ready when its rows fill max_batch_size or its oldest request has waited
        // max_queue_delay; oldest first, so one signature's slow-filling batch does not hold up another's.
        std::string sig;
        for (;;) {
          std::erase_if(queue_, [](auto& j) { return j->cancelled_.load(); });  // callers that gave up
          if (queue_.empty()) break;
          auto now = std::chrono::steady_clock::now();
          auto next_deadline = std::chrono::steady_clock::time_point::max();
          std::vector<std::pair<const std::string*, int64_t>> groups;  // in order of their oldest request
          for (auto& j : queue_) {
            auto g = std::find_if(groups.begin(), groups.end(), [&](auto& x) { return *x.first == j->signature_; });
            if (g == groups.end()) {
              groups.push_back({&j->signature_, j->rows_});
              next_deadline = std::min(next_deadline, j->enqueued_ + options_.max_queue_delay);
            } else {
              g->second += j->rows_;
            }
          }
          for (const auto& group : groups) {  // (not a structured binding: clang 14 cannot capture one)
            const std::string* g = group.first;
            auto oldest = std::find_if(queue_.begin(), queue_.end(), [&](auto& j) { return j->signature_ == *g; });
            if (group.second >= options_.max_batch_size || stopping_ ||
                now >= (*oldest)->enqueued_ + options_.max_queue_delay) {
              sig = *g;
              break;
            }
          }
          if (!sig.empty()) break;
          cv_.wait_until(lock, next_deadline);
        }
        if (queue_.empty() || sig.empty()) continue;
        int64_t rows = 0;
        for (auto it = queue_.begin(); it != queue_.end();) {
          auto& j = *it;
          if (j->signature_ == sig && (jobs.empty() || rows + j->rows_ <= options_.max_batch_size)) {
            rows += j->rows_;
            jobs.push_back(j);
            it = queue_.erase(it);
            if (rows >= options_.max_batch_size) break;
          } else {
            ++it;
          }
        }
      } else {
        while (!queue_.empty() && queue_.front()->cancelled_) queue_.pop_front();
        if (queue_.empty()) continue;
        jobs.push_back(queue_.front());
        queue_.pop_front();
      }
      if (metrics_) metrics_->queue_depth->Set(double(queue_.size()));
      more = !queue_.empty();
      if (!jobs.empty()) ++active_;
    }
    if (more) cv_.notify_one();  // another worker may start on the rest
    if (!jobs.empty()) {
      run_batch(jobs);
      std::lock_guard lock(mu_);
      --active_;
      if (!queue_.empty()) cv_.notify_one();
    }
  }
}

void DynamicBatcher::run_batch(std::vector<std::shared_ptr<BatchJob>>& jobs) {
  auto start = std::chrono::steady_clock::now();
  int64_t rows = 0;
  for (auto& j : jobs) {
    rows += j->rows_;
    if (metrics_) metrics_->queue_seconds->Observe(seconds(start - j->enqueued_));
  }
  try {
    std::vector<Tensor> inputs;
    if (jobs.size() == 1) {
      inputs = jobs[0]->inputs_;
    } else {
      for (size_t i = 0; i < jobs[0]->inputs_.size(); ++i) {
        std::vector<const Tensor*> parts;
        for (auto& j : jobs) parts.push_back(&j->inputs_[i]);
        inputs.push_back(concat_rows(parts));
      }
    }
    uint64_t version = 0;
    std::vector<Tensor> outputs = model_->run_versioned(inputs, &version);
    for (auto& j : jobs) j->weights_version_ = version;
    auto end = std::chrono::steady_clock::now();
    if (metrics_) {
      metrics_->compute_seconds->Observe(seconds(end - start));
      metrics_->batch_size->Observe(double(rows));
      metrics_->executions->Increment();
    }
    if (jobs.size() == 1) {
      jobs[0]->finish(std::move(outputs), nullptr);
      return;
    }
    std::vector<int64_t> split;
    for (auto& j : jobs) split.push_back(j->rows_);
    std::vector<std::vector<Tensor>> per_job(jobs.size());
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Tensor& t = outputs[o];
      if (t.rank() == 0 || t.dim(0) != rows)
        fail("output '", model_->outputs()[o].name, "' has shape ", shape_str(t.shape()),
             ", not the batch of ", rows, " rows along dim 0: set max_batch_size 0 for this model");
      std::vector<Tensor> pieces = split_rows(t, split);
      for (size_t k = 0; k < jobs.size(); ++k) per_job[k].push_back(std::move(pieces[k]));
    }
    for (size_t k = 0; k < jobs.size(); ++k) jobs[k]->finish(std::move(per_job[k]), nullptr);
  } catch (...) {
    for (auto& j : jobs) j->finish({}, std::current_exception());
  }
}

}  // namespace cuvil::serving
