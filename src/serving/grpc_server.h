// The KServe v2 gRPC front end (inference.GRPCInferenceService, kserve_v2.proto) on gRPC's synchronous server:
// health, metadata, infer (typed contents or raw_input_contents, answered with raw_output_contents) and the
// repository RPCs, over the same repository and batchers as REST.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "serving/metrics.h"
#include "serving/model_repository.h"

namespace cuvil::serving {

class GrpcServer {
 public:
  GrpcServer(ModelRepository& repo, Metrics& metrics, std::string host, int port, size_t max_message_bytes);
  ~GrpcServer();
  // Binds and starts serving (gRPC's own threads); returns the port (0 asks for a free one).
  int start();
  // Stops accepting; waits for the calls in progress.
  void stop();
  void set_ready(bool ready);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuvil::serving
