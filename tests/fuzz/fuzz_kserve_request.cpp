// libFuzzer target: cuvil serve's KServe v2 request parser (JSON tensors, Triton's binary extension), then the
// binding to a model's signature and the response encoding of what was bound. A hostile body must end in a
// ProtocolError (a 4xx), never a crash, a leak or an uncaught exception of another kind.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "serving/protocol.h"

namespace {

// A model with one batched f32 input [-1, 4] and one i64 input of unknown rank, echoing them as outputs.
const std::vector<cuvil::serving::TensorSpec>& specs() {
  static const std::vector<cuvil::serving::TensorSpec> s = {
      {"x", cuvil::DType::f32, true, {-1, 4}},
      {"ids", cuvil::DType::i64, false, {}},
  };
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte chooses whether an Inference-Header-Content-Length came with the body, and its value.
  std::optional<size_t> header_length;
  if (data[0] & 1) header_length = size > 1 ? (size_t(data[0] >> 1) * 977) % size : 0;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  using cuvil::serving::ProtocolError;
  try {
    cuvil::serving::InferRequest request = cuvil::serving::parse_infer_request(body, header_length);
    std::vector<cuvil::Tensor> inputs = cuvil::serving::bind_inputs(request, specs(), 8);
    cuvil::serving::encode_infer_response("m", "1", request, specs(), inputs);
  } catch (const ProtocolError& e) {
    if (e.status() < 400 || e.status() >= 500) __builtin_trap();  // a client's error is a 4xx
  }
  return 0;
}
