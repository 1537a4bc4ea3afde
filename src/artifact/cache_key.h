// The parts of the model cache's key (python/cuvil/cache.py) that only the core can compute: a hash of the
// graph as compiled, without source locations and without its weights, and a hash of the weights, apart, so that
// a miss can say which of the two changed. Also the build's identity (git revision, oneDNN version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace cuvil::artifact {

struct GraphKey {
  std::string graph;    // SHA-256 of the IR text, locations removed, large constants as external(i)
  std::string weights;  // over the large constants in order: dtype, dims and a 64-bit hash of their bytes
};
GraphKey graph_key(const Graph& g);

// The IR text line by line with each node's trailing ` loc(...)` removed (quoted strings skipped, so a name
// holding " loc(" stays).
std::string strip_locations(const std::string& ir_text);

// checksum64 of a buffer (the model cache hashes weights with it: GB/s; corruption, not forgery).
uint64_t bytes_hash(const void* data, size_t size);

std::string git_revision();
std::string onednn_version();

}  // namespace cuvil::artifact
