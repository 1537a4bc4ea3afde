// The model cache's graph and weights hashes (cache_key.h).
#include "artifact/cache_key.h"

#include <cstdio>

#include "artifact/checksum.h"
#include "ir/text_format.h"
#include "support/sha256.h"

namespace cuvil::artifact {

std::string strip_locations(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find('\n', i);
    if (end == std::string::npos) end = text.size();
    // The first ` loc(` outside a quoted string starts the location, which runs to the end of the line (the
    // printer writes it last; quoted() escapes newlines, so a line is one node).
    size_t cut = end;
    bool in_quotes = false;
    for (size_t j = i; j < end; ++j) {
      char c = text[j];
      if (in_quotes) {
        if (c == '\\') ++j;
        else if (c == '"') in_quotes = false;
      } else if (c == '"') {
        in_quotes = true;
      } else if (c == ' ' && text.compare(j, 5, " loc(") == 0) {
        cut = j;
        break;
      }
    }
    out.append(text, i, cut - i);
    if (end < text.size()) out += '\n';
    i = end + 1;
  }
  return out;
}

uint64_t bytes_hash(const void* data, size_t size) { return checksum64(data, size); }

GraphKey graph_key(const Graph& g) {
  Sha256 weights;
  int64_t count = 0;
  PrintOptions po;
  po.external = [&](const Tensor& t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum64(t.raw(), t.nbytes())));
    weights.update(t.type_str()).update(" ").update(buf).update("\n");
    return count++;
  };
  std::string text = strip_locations(print_graph(g, po));
  return {to_hex(sha256(text.data(), text.size())), to_hex(weights.finish())};
}

std::string git_revision() { return CUVIL_GIT_REV; }
std::string onednn_version() { return CUVIL_ONEDNN_VERSION; }

}  // namespace cuvil::artifact
