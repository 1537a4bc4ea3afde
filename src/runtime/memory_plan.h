// Static memory planning: given each buffer's size and live range (first and last step that touches it), assign
// offsets in one arena so that buffers alive at the same time never overlap. Greedy by size, best fit: the
// classic heuristic (TFLite's arena planner, ORT's), near-optimal on inference graphs.
#pragma once

#include <cstdint>
#include <vector>

namespace cuvil {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // step that writes it
  int last = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // one per request, multiples of the alignment
  int64_t arena_bytes = 0;       // peak: the arena size needed
  int64_t total_bytes = 0;       // sum of all requests (what no reuse would cost)
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

}  // namespace cuvil
