#include "serving/json_parse.h"

#include <simdjson.h>

namespace cuvil::serving {
namespace {

using json = nlohmann::json;

json convert(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      json a = json::array();
      simdjson::dom::array arr;
      if (e.get(arr) != simdjson::SUCCESS) return a;  // (cannot fail: the type was just checked)
      a.get_ref<json::array_t&>().reserve(arr.size());
      for (simdjson::dom::element x : arr) a.push_back(convert(x));
      return a;
    }
    case simdjson::dom::element_type::OBJECT: {
      json o = json::object();
      simdjson::dom::object obj;  // (a local: a range-for over a temporary result's value would dangle)
      if (e.get(obj) != simdjson::SUCCESS) return o;
      for (simdjson::dom::key_value_pair kv : obj)
        o[std::string(kv.key)] = convert(kv.value);  // (a repeated key: the last one wins, as in nlohmann)
      return o;
    }
    case simdjson::dom::element_type::INT64: {
      int64_t v = e.get_int64().value_unsafe();
      return v >= 0 ? json(uint64_t(v)) : json(v);
    }
    case simdjson::dom::element_type::UINT64: return json(e.get_uint64().value_unsafe());
    case simdjson::dom::element_type::DOUBLE: return json(e.get_double().value_unsafe());
    case simdjson::dom::element_type::STRING: return json(std::string(e.get_string().value_unsafe()));
    case simdjson::dom::element_type::BOOL: return json(e.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE: return json(nullptr);
  }
  return json();
}

}  // namespace

std::optional<json> parse_json(std::string_view text) {
  // One parser per thread: its buffers are reused from request to request.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  // (copies the text into a padded buffer: simdjson reads up to 64 bytes past the end)
  if (parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root) != simdjson::SUCCESS)
    return std::nullopt;
  return convert(root);
}

}  // namespace cuvil::serving
