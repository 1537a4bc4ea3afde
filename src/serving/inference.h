// One parsed request through its model: outputs checked, inputs bound to the signature, queued on the batcher,
// waited for (the model's timeout); metrics counted. Shared by the REST and gRPC front ends.
#pragma once

#include <string>
#include <vector>

#include "serving/model_repository.h"
#include "serving/protocol.h"

namespace cuvil::serving {

// The model's outputs (all of them, in its order). Throws ProtocolError: 400 bad input or a failed run, 503 queue
// full, shutting down or timed out. `version`: the model version whose weights produced them (a hot swap may
// have published a newer one than `model` names since the request began).
std::vector<Tensor> run_request(LoadedModel& model, const InferRequest& request, ModelMetrics& metrics,
                                std::string* version);

}  // namespace cuvil::serving
