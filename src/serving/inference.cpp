#include "serving/inference.h"

namespace cuvil::serving {

std::vector<Tensor> run_request(LoadedModel& m, const InferRequest& ir, ModelMetrics& mm, std::string* version) {
  auto start = std::chrono::steady_clock::now();
  try {
    for (const RequestedOutput& o : ir.outputs) {  // before the run, not after
      bool known = false;
      for (const TensorSpec& s : m.model().outputs()) known |= s.name == o.name;
      if (!known) throw ProtocolError(400, "unknown output '" + o.name + "' requested");
    }
    std::vector<Tensor> inputs = bind_inputs(ir, m.model().inputs(), m.config.batcher.max_batch_size);
    std::shared_ptr<BatchJob> job;
    try {
      job = m.batcher->submit(std::move(inputs));
    } catch (const ProtocolError&) {
      mm.rejected->Increment();
      throw;
    }
    bool done;
    try {
      done = job->wait(m.config.timeout);
    } catch (const ProtocolError&) {
      throw;
    } catch (const std::exception& e) {  // the model rejected these inputs or failed on them
      throw ProtocolError(400, std::string("inference failed: ") + e.what());
    }
    if (!done) throw ProtocolError(503, "the request timed out after " + std::to_string(m.config.timeout.count()) + " ms");
    *version = m.version_of(job->weights_version());
    mm.success->Increment();
    mm.request_seconds->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return std::move(job->outputs());
  } catch (...) {
    mm.failure->Increment();
    throw;
  }
}

}  // namespace cuvil::serving
