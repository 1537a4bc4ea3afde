// The IR's text form (.cvir): printer and parser. print(parse(print(g))) == print(g) exactly.
//
//   graph @main(%x: f32[batch, 3], %k: i64[1]) {
//     %w: f32[3] = constant [0.5, 1, -2]
//     %y: f32[batch, 3] = Mul(%x, %w) loc("mul1")
//     %s: f32[batch, 1], %t: f32[batch, 2] = Split(%y, %k) {axis = 1}
//     return %s, %t
//   }
//
// Values are %name (quoted as %"any text" when not a plain identifier); an omitted optional input is `none`.
// Types are dtype[dims] with symbolic dims as expressions, [*] for an unknown rank. Attributes are sorted;
// floats always print with a '.' or an exponent; regions print as nested graphs. Constants of up to
// kMaxInlineElements elements print as numbers, larger ones as hex bytes (or are elided on request, which makes
// the text unparseable).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/graph.h"

namespace cuvil {

struct PrintOptions {
  bool elide_large_constants = false;  // print "<elided N bytes>" instead of hex (for reading, not parsing)
  // When set, a constant that does not print inline is stored elsewhere by this hook (an artifact's weights
  // section), which returns its index, and prints as `external(INDEX)`; ParseOptions::external reads it back.
  std::function<int64_t(const Tensor&)> external;
};

struct ParseOptions {
  // Resolves `external(INDEX)` to the tensor of that index, dtype and dims (throws cuvil::Error when it has
  // none). Without it, external data is a parse error.
  std::function<Tensor(int64_t index, DType dtype, const std::vector<int64_t>& dims)> external;
};

inline constexpr int64_t kMaxInlineElements = 16;

std::string print_graph(const Graph& g, const PrintOptions& opts = {});
// Throws cuvil::Error with line:column on malformed text. Does not run inference or the verifier.
std::shared_ptr<Graph> parse_graph(const std::string& text, const ParseOptions& opts = {});

}  // namespace cuvil
