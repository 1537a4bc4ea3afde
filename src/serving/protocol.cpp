#include "serving/protocol.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "serving/json_parse.h"

namespace cuvil::serving {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& msg) { throw ProtocolError(400, msg); }

struct V2Name {
  const char* name;
  DType dtype;
};
constexpr V2Name kNames[] = {
    {"BOOL", DType::boolean}, {"UINT8", DType::u8},  {"UINT16", DType::u16}, {"UINT32", DType::u32},
    {"UINT64", DType::u64},   {"INT8", DType::i8},   {"INT16", DType::i16},  {"INT32", DType::i32},
    {"INT64", DType::i64},    {"FP16", DType::f16},  {"FP32", DType::f32},   {"FP64", DType::f64},
    {"BF16", DType::bf16},
};

std::string short_json(const json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Checked product of dims, so a hostile shape cannot overflow the byte count.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) bad(what + ": negative dim in shape " + shape_str(shape));
    if (d != 0 && n > (int64_t(1) << 40) / d) bad(what + ": shape " + shape_str(shape) + " is too large");
    n *= d;
  }
  return n;
}

// Appends the leaves of a (possibly nested) JSON array in row-major order.
void flatten(const json& j, std::vector<const json*>& out, int depth) {
  if (depth > 64) bad("tensor data nested too deeply");
  if (j.is_array()) {
    for (const json& e : j) flatten(e, out, depth + 1);
  } else {
    out.push_back(&j);
  }
}

template <class T>
T json_element(const json& e, const std::string& what) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!e.is_boolean()) bad(what + ": BOOL data must be true/false, got " + short_json(e));
    return e.get<bool>();
  } else if constexpr (is_float_v<T>) {
    if (!e.is_number()) bad(what + ": expected a number, got " + short_json(e));
    return T(compute_t<T>(e.get<double>()));
  } else {
    if (e.is_number_unsigned()) {
      uint64_t v = e.get<uint64_t>();
      if (v > uint64_t(std::numeric_limits<T>::max())) bad(what + ": " + e.dump() + " is out of range");
      return T(v);
    }
    if (e.is_number_integer()) {
      int64_t v = e.get<int64_t>();
      if (v < 0 && !std::is_signed_v<T>) bad(what + ": " + e.dump() + " is out of range");
      if constexpr (std::is_signed_v<T>)
        if (v < int64_t(std::numeric_limits<T>::min()) || v > int64_t(std::numeric_limits<T>::max()))
          bad(what + ": " + e.dump() + " is out of range");
      if constexpr (!std::is_signed_v<T>)
        if (uint64_t(v) > uint64_t(std::numeric_limits<T>::max())) bad(what + ": " + e.dump() + " is out of range");
      return T(v);
    }
    bad(what + ": expected an integer, got " + short_json(e));
  }
}

bool bool_param(const json& params, const char* key, bool fallback, const std::string& what) {
  if (!params.is_object() || !params.contains(key)) return fallback;
  const json& v = params[key];
  if (!v.is_boolean()) bad(what + ": parameter '" + key + "' must be true or false");
  return v.get<bool>();
}

template <class T>
void append_number(std::string& out, T v) {
  char buf[64];
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
    return;
  } else if constexpr (is_float_v<T>) {
    auto f = compute_t<T>(v);
    if (!std::isfinite(f)) {  // JSON has no NaN/Inf; null, as nlohmann writes them
      out += "null";
      return;
    }
    auto r = std::to_chars(buf, buf + sizeof buf, f);
    out.append(buf, r.ptr);
  } else {
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

}  // namespace

std::optional<DType> dtype_from_v2(std::string_view datatype) {
  for (const V2Name& n : kNames)
    if (datatype == n.name) return n.dtype;
  return std::nullopt;
}

std::string v2_datatype(DType dtype) {
  for (const V2Name& n : kNames)
    if (n.dtype == dtype) return n.name;
  fail("internal error: no v2 datatype for ", dtype_name(dtype));
}

std::string error_body(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

InferRequest parse_infer_request(std::string_view body, std::optional<size_t> header_length) {
  size_t hlen = header_length.value_or(body.size());
  if (hlen > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(hlen) + " exceeds the body size " +
        std::to_string(body.size()));
  std::optional<json> parsed = parse_json(body.substr(0, hlen));
  if (!parsed) bad("the request header is not valid JSON");
  const json& j = *parsed;
  if (!j.is_object()) bad("the request must be a JSON object");
  InferRequest r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) bad("'id' must be a string");
    r.id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    if (!j["parameters"].is_object()) bad("'parameters' must be an object");
    r.binary_default = bool_param(j["parameters"], "binary_data_output", false, "request");
  }
  if (!j.contains("inputs") || !j["inputs"].is_array()) bad("the request needs an 'inputs' array");
  size_t offset = hlen;  // binary data follows the header, input by input
  for (const json& in : j["inputs"]) {
    if (!in.is_object()) bad("each input must be an object");
    if (!in.contains("name") || !in["name"].is_string()) bad("an input has no 'name'");
    std::string name = in["name"].get<std::string>();
    std::string what = "input '" + name + "'";
    for (const std::string& seen : r.input_names)
      if (seen == name) bad(what + " is given twice");
    if (!in.contains("datatype") || !in["datatype"].is_string()) bad(what + " has no 'datatype'");
    std::string dt = in["datatype"].get<std::string>();
    if (dt == "BYTES") bad(what + ": BYTES tensors are not supported (Cuvil models take numeric tensors)");
    std::optional<DType> dtype = dtype_from_v2(dt);
    if (!dtype) bad(what + ": unknown datatype '" + dt + "'");
    if (!in.contains("shape") || !in["shape"].is_array()) bad(what + " has no 'shape' array");
    std::vector<int64_t> shape;
    for (const json& d : in["shape"]) {
      if (!d.is_number_integer()) bad(what + ": shape entries must be integers");
      shape.push_back(d.get<int64_t>());
    }
    if (shape.size() > 32) bad(what + ": rank " + std::to_string(shape.size()) + " is too large");
    int64_t numel = checked_numel(shape, what);
    size_t nbytes = size_t(numel) * dtype_size(*dtype);
    std::optional<size_t> binary_size;
    if (in.contains("parameters")) {
      const json& p = in["parameters"];
      if (!p.is_object()) bad(what + ": 'parameters' must be an object");
      if (p.contains("binary_data_size")) {
        if (!p["binary_data_size"].is_number_unsigned()) bad(what + ": binary_data_size must be a non-negative integer");
        binary_size = p["binary_data_size"].get<uint64_t>();
      }
    }
    Tensor t;
    if (binary_size) {
      if (in.contains("data")) bad(what + " has both 'data' and binary_data_size");
      if (!header_length) bad(what + " has binary_data_size but the request has no Inference-Header-Content-Length");
      if (*binary_size != nbytes)
        bad(what + ": binary_data_size " + std::to_string(*binary_size) + " does not match shape " +
            shape_str(shape) + " of " + dt + " (" + std::to_string(nbytes) + " bytes)");
      if (body.size() - offset < nbytes) bad(what + ": the body ends before its binary data");
      t = Tensor::zeros(*dtype, shape);
      if (nbytes) std::memcpy(t.raw(), body.data() + offset, nbytes);
      offset += nbytes;
      if (*dtype == DType::boolean)  // one byte per element, anything but 0/1 is not a bool
        for (size_t i = 0; i < nbytes; ++i)
          if (static_cast<const uint8_t*>(t.raw())[i] > 1) bad(what + ": BOOL bytes must be 0 or 1");
    } else {
      if (!in.contains("data")) bad(what + " has neither 'data' nor binary_data_size");
      std::vector<const json*> leaves;
      leaves.reserve(size_t(numel));
      flatten(in["data"], leaves, 0);
      if (int64_t(leaves.size()) != numel)
        bad(what + ": " + std::to_string(leaves.size()) + " data elements for shape " + shape_str(shape) + " (" +
            std::to_string(numel) + " expected)");
      t = Tensor::zeros(*dtype, shape);
      visit_dtype(*dtype, [&]<class T>() {
        T* p = t.data<T>();
        for (size_t i = 0; i < leaves.size(); ++i) p[i] = json_element<T>(*leaves[i], what);
      });
    }
    r.input_names.push_back(std::move(name));
    r.inputs.push_back(std::move(t));
  }
  if (offset != body.size())
    bad("the body has " + std::to_string(body.size() - offset) + " bytes after the last binary input");
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) bad("'outputs' must be an array");
    for (const json& o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) bad("each requested output needs a 'name'");
      RequestedOutput ro;
      ro.name = o["name"].get<std::string>();
      if (o.contains("parameters")) {
        const json& p = o["parameters"];
        if (!p.is_object()) bad("output '" + ro.name + "': 'parameters' must be an object");
        if (p.contains("classification")) bad("output '" + ro.name + "': the classification extension is not supported");
      }
      ro.binary = bool_param(o.value("parameters", json::object()), "binary_data", r.binary_default,
                             "output '" + ro.name + "'");
      r.outputs.push_back(std::move(ro));
    }
  }
  return r;
}

std::vector<Tensor> bind_inputs(const InferRequest& request, const std::vector<TensorSpec>& specs, int64_t max_batch) {
  std::vector<Tensor> bound(specs.size());
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const std::string& name = request.input_names[i];
    size_t k = 0;
    while (k < specs.size() && specs[k].name != name) ++k;
    if (k == specs.size()) {
      std::string list;
      for (const TensorSpec& s : specs) list += (list.empty() ? "" : ", ") + s.name;
      bad("unexpected input '" + name + "' (the model's inputs: " + list + ")");
    }
    const TensorSpec& s = specs[k];
    const Tensor& t = request.inputs[i];
    std::string what = "input '" + name + "'";
    if (t.dtype() != s.dtype)
      bad(what + ": datatype " + v2_datatype(t.dtype()) + ", the model expects " + v2_datatype(s.dtype));
    if (s.rank_known) {
      if (t.rank() != s.shape.size())
        bad(what + ": shape " + shape_str(t.shape()) + " has rank " + std::to_string(t.rank()) + ", the model expects " +
            std::to_string(s.shape.size()));
      for (size_t d = 0; d < t.rank(); ++d)
        if (s.shape[d] >= 0 && s.shape[d] != t.dim(d))
          bad(what + ": shape " + shape_str(t.shape()) + " does not match the model's " + shape_str(s.shape));
    }
    if (max_batch > 0) {
      if (t.rank() == 0) bad(what + ": a batched model needs a batch dim");
      if (t.dim(0) < 1 || t.dim(0) > max_batch)
        bad(what + ": batch size " + std::to_string(t.dim(0)) + " is outside [1, " + std::to_string(max_batch) + "]");
    }
    bound[k] = t;
  }
  for (size_t k = 0; k < specs.size(); ++k)
    if (!bound[k].defined()) bad("missing input '" + specs[k].name + "'");
  if (max_batch > 0)
    for (const Tensor& t : bound)
      if (t.dim(0) != bound[0].dim(0)) bad("the inputs' batch sizes (dim 0) differ");
  return bound;
}

EncodedResponse encode_infer_response(const std::string& model_name, const std::string& model_version,
                                      const InferRequest& request, const std::vector<TensorSpec>& specs,
                                      const std::vector<Tensor>& outputs) {
  std::vector<RequestedOutput> wanted = request.outputs;
  if (wanted.empty())
    for (const TensorSpec& s : specs) wanted.push_back({s.name, request.binary_default});
  std::string out = "{\"model_name\":" + json(model_name).dump(-1, ' ', false, json::error_handler_t::replace) +
                    ",\"model_version\":" + json(model_version).dump();
  if (!request.id.empty()) out += ",\"id\":" + json(request.id).dump(-1, ' ', false, json::error_handler_t::replace);
  out += ",\"outputs\":[";
  std::vector<const Tensor*> binary;
  for (size_t w = 0; w < wanted.size(); ++w) {
    size_t k = 0;
    while (k < specs.size() && specs[k].name != wanted[w].name) ++k;
    if (k == specs.size()) bad("unknown output '" + wanted[w].name + "' requested");
    const Tensor& t = outputs.at(k);
    if (w) out += ',';
    out += "{\"name\":" + json(specs[k].name).dump(-1, ' ', false, json::error_handler_t::replace) +
           ",\"datatype\":\"" + v2_datatype(t.dtype()) + "\",\"shape\":[";
    for (size_t d = 0; d < t.rank(); ++d) out += (d ? "," : "") + std::to_string(t.dim(d));
    out += ']';
    if (wanted[w].binary) {
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.nbytes()) + "}}";
      binary.push_back(&t);
      continue;
    }
    out += ",\"data\":[";
    visit_dtype(t.dtype(), [&]<class T>() {
      const T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) out += ',';
        append_number(out, p[i]);
      }
    });
    out += "]}";
  }
  out += "]}";
  EncodedResponse r;
  if (!binary.empty()) {
    r.header_length = out.size();
    for (const Tensor* t : binary) out.append(static_cast<const char*>(t->raw()), t->nbytes());
  }
  r.body = std::move(out);
  return r;
}

std::string base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) throw ProtocolError(400, "base64 data has a bad length");
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value(c);
    if (v < 0) throw ProtocolError(400, "base64 data holds a character outside its alphabet");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace cuvil::serving
