// Prometheus metrics of the server (prometheus-cpp's registry, served as text on --metrics-port /metrics):
// per model, request counts and failures, queue time, compute time, batch size and request latency histograms,
// and the queue depth.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace cuvil::serving {

struct ModelMetrics {
  prometheus::Counter* success = nullptr;
  prometheus::Counter* failure = nullptr;
  prometheus::Counter* rejected = nullptr;     // queue full or shutting down
  prometheus::Counter* executions = nullptr;   // runs (one per batch)
  prometheus::Histogram* queue_seconds = nullptr;
  prometheus::Histogram* compute_seconds = nullptr;
  prometheus::Histogram* request_seconds = nullptr;
  prometheus::Histogram* batch_size = nullptr;  // rows (sum of the requests' dim 0) per run
  prometheus::Gauge* queue_depth = nullptr;
};

class Metrics {
 public:
  Metrics();
  // The metrics of one model (created on first use; they live as long as this object).
  ModelMetrics& model(const std::string& name);
  // The responses with this HTTP status (Family::Add builds and hashes a label map under a lock: the common
  // codes are looked up once and kept).
  prometheus::Counter& http_requests(int status);
  // The text exposition format.
  std::string serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>*success_, *failure_, *rejected_, *executions_, *http_;
  prometheus::Family<prometheus::Histogram>*queue_, *compute_, *request_, *batch_;
  prometheus::Family<prometheus::Gauge>* depth_;
  std::mutex mu_;
  std::map<std::string, ModelMetrics> models_;
  std::array<std::atomic<prometheus::Counter*>, 600> http_by_status_{};
};

}  // namespace cuvil::serving
