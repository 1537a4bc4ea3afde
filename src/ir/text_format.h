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

#include <memory>
#include <string>

#include "ir/graph.h"

namespace cuvil {

struct PrintOptions {
  bool elide_large_constants = false;  // print "<elided N bytes>" instead of hex (for reading, not parsing)
};

inline constexpr int64_t kMaxInlineElements = 16;

std::string print_graph(const Graph& g, const PrintOptions& opts = {});
// Throws cuvil::Error with line:column on malformed text. Does not run inference or the verifier.
std::shared_ptr<Graph> parse_graph(const std::string& text);

}  // namespace cuvil
