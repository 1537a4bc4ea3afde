// The KServe v2 / Open Inference Protocol request and response bodies over REST: JSON tensors in every v2
// datatype and Triton's binary tensor data extension (the JSON header, then raw tensor bytes, the header's size in
// the Inference-Header-Content-Length HTTP header). Pure functions: no sockets, no model runs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serving/served_model.h"
#include "support/error.h"

namespace cuvil::serving {

// An error the client caused or can act on, with the HTTP status it maps to; sent as {"error": message}.
class ProtocolError : public Error {
 public:
  ProtocolError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// "FP32" <-> DType::f32 ... ("BYTES" has no Cuvil dtype: nullopt).
std::optional<DType> dtype_from_v2(std::string_view datatype);
std::string v2_datatype(DType dtype);

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;
  std::vector<std::string> input_names;
  std::vector<Tensor> inputs;           // as sent, in request order
  std::vector<RequestedOutput> outputs; // empty: every output, binary as binary_default says
  bool binary_default = false;          // parameters.binary_data_output
};

// Parses an infer request. `header_length` is Inference-Header-Content-Length when the client sent it: the
// JSON is body[0, header_length) and binary inputs follow it in request order. Throws ProtocolError(400).
InferRequest parse_infer_request(std::string_view body, std::optional<size_t> header_length);

// The request's inputs in the model's order, checked against its signature (names, dtypes, ranks, fixed dims).
// With max_batch > 0 the model batches along dim 0 and the first dim of each input must be in [1, max_batch].
std::vector<Tensor> bind_inputs(const InferRequest& request, const std::vector<TensorSpec>& specs, int64_t max_batch);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when some output is binary: send Inference-Header-Content-Length
};

// The response for `outputs` (in the model's output order, `specs` naming them). Throws ProtocolError(400) for a
// requested output the model does not have.
EncodedResponse encode_infer_response(const std::string& model_name, const std::string& model_version,
                                      const InferRequest& request, const std::vector<TensorSpec>& specs,
                                      const std::vector<Tensor>& outputs);

// {"error": message}
std::string error_body(std::string_view message);

// Standard base64 (padding optional, no whitespace), as JSON carries bytes; ProtocolError(400) when it is not.
std::string base64_decode(std::string_view text);

}  // namespace cuvil::serving
