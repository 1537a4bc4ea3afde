// ONNX -> Cuvil IR. Reads a ModelProto (file or bytes), converts every node through the converter table
// (one entry per ONNX op, normalizing older opsets to the op table's form), then infers shapes and verifies.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cuvil {

// How one ONNX graph input or output maps onto the imported Graph's (sequence and optional values are resolved
// at import, static_sequences.h): a tensor is one Graph value, a sequence of n elements n values in order, an
// empty optional none.
struct OnnxIoSlot {
  enum class Kind { Tensor, Sequence, None };
  std::string name;
  Kind kind = Kind::Tensor;
  size_t count = 1;
  bool optional = false;  // an optional-typed graph input (bound present, or absent as Kind::None)
};
struct OnnxIoLayout {
  std::vector<OnnxIoSlot> inputs, outputs;
};

struct OnnxImportOptions {
  bool infer_and_verify = true;  // run shape inference and the verifier after conversion
  // Sequence-typed graph inputs (or optional inputs holding a sequence), by name, bound to a length: each becomes
  // that many tensor inputs, "<name>_0", "<name>_1", ...
  std::map<std::string, int64_t> sequence_lengths;
  // Optional-typed graph inputs bound as empty: they become no input. Others are bound as present.
  std::set<std::string> absent_optionals;
  // When set, filled with how the ONNX graph's inputs and outputs map onto the Graph's.
  OnnxIoLayout* layout = nullptr;
  // With a layout: a sequence-typed graph input missing from sequence_lengths is no error; the import stops after
  // reading the graph's inputs, returns null and leaves their kinds in layout->inputs (a sequence's count 0), so
  // that a caller given the values (Python lists) can import again with their lengths.
  bool stop_at_unbound_sequences = false;
};

// Throws cuvil::Error with a clear message for unreadable, truncated or malformed files and unsupported ops.
// Returns null only under OnnxImportOptions::stop_at_unbound_sequences.
std::shared_ptr<Graph> import_onnx_file(const std::string& path, const OnnxImportOptions& opts = {});
// `base_dir` is where external tensor data files are looked up ("" disables external data).
std::shared_ptr<Graph> import_onnx_bytes(const void* data, size_t size, const std::string& base_dir = "",
                                         const OnnxImportOptions& opts = {});

}  // namespace cuvil

namespace cuvil {
// Reads a serialized onnx.TensorProto (the ONNX test suite's input_N.pb / output_N.pb files).
Tensor read_onnx_tensor_file(const std::string& path);
}  // namespace cuvil
