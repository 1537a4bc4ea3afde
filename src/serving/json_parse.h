// Parses a request's JSON with simdjson (its number parsing is ~10x faster than nlohmann's strtod-based lexer,
// most of a JSON tensor's cost) into the nlohmann document the protocol code reads. Non-negative integers
// become unsigned numbers, as nlohmann's own parser makes them.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cuvil::serving {

// The document, or nullopt for text that is not JSON (or nests deeper than simdjson's limit, 1024).
std::optional<nlohmann::json> parse_json(std::string_view text);

}  // namespace cuvil::serving
