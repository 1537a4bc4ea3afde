#include "serving/metrics.h"

#include <prometheus/text_serializer.h>

namespace cuvil::serving {
namespace {

prometheus::Histogram::BucketBoundaries time_buckets() {
  // 50 us .. ~13 s, x2 per bucket: covers an MLP's microseconds and a large model's seconds.
  prometheus::Histogram::BucketBoundaries b;
  for (double t = 50e-6; t < 15; t *= 2) b.push_back(t);
  return b;
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  success_ = &prometheus::BuildCounter().Name("cuvil_inference_request_success_total")
                  .Help("Successful inference requests").Register(r);
  failure_ = &prometheus::BuildCounter().Name("cuvil_inference_request_failure_total")
                  .Help("Failed inference requests (bad input, run errors, time-outs, rejections)").Register(r);
  rejected_ = &prometheus::BuildCounter().Name("cuvil_inference_request_rejected_total")
                   .Help("Requests rejected because the model's queue was full or the server was stopping").Register(r);
  executions_ = &prometheus::BuildCounter().Name("cuvil_inference_exec_total")
                     .Help("Model runs (one per batch)").Register(r);
  http_ = &prometheus::BuildCounter().Name("cuvil_http_requests_total").Help("HTTP responses by status code").Register(r);
  queue_ = &prometheus::BuildHistogram().Name("cuvil_inference_queue_seconds")
                .Help("Time a request waited in the batcher's queue").Register(r);
  compute_ = &prometheus::BuildHistogram().Name("cuvil_inference_compute_seconds")
                  .Help("Time of one model run (a whole batch)").Register(r);
  request_ = &prometheus::BuildHistogram().Name("cuvil_inference_request_seconds")
                  .Help("Time from a request's arrival at the model to its outputs").Register(r);
  batch_ = &prometheus::BuildHistogram().Name("cuvil_inference_batch_size")
                .Help("Rows (sum of the requests' batch dims) per model run").Register(r);
  depth_ = &prometheus::BuildGauge().Name("cuvil_inference_queue_depth").Help("Requests waiting per model").Register(r);
}

ModelMetrics& Metrics::model(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = models_.find(name);
  if (it != models_.end()) return it->second;
  prometheus::Labels l{{"model", name}};
  ModelMetrics m;
  m.success = &success_->Add(l);
  m.failure = &failure_->Add(l);
  m.rejected = &rejected_->Add(l);
  m.executions = &executions_->Add(l);
  m.queue_seconds = &queue_->Add(l, time_buckets());
  m.compute_seconds = &compute_->Add(l, time_buckets());
  m.request_seconds = &request_->Add(l, time_buckets());
  prometheus::Histogram::BucketBoundaries sizes;
  for (double s = 1; s <= 1024; s *= 2) sizes.push_back(s);
  m.batch_size = &batch_->Add(l, sizes);
  m.queue_depth = &depth_->Add(l);
  return models_.emplace(name, m).first->second;
}

prometheus::Counter& Metrics::http_requests(int status) {
  if (status < 0 || size_t(status) >= http_by_status_.size()) return http_->Add({{"code", std::to_string(status)}});
  std::atomic<prometheus::Counter*>& slot = http_by_status_[size_t(status)];
  prometheus::Counter* c = slot.load(std::memory_order_acquire);
  if (!c) {  // (two threads may both Add: the family returns the same counter to both)
    c = &http_->Add({{"code", std::to_string(status)}});
    slot.store(c, std::memory_order_release);
  }
  return *c;
}

std::string Metrics::serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace cuvil::serving
