#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace cuvil {

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by earlier start so the result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first < requests[b].first;
  });
  struct Placed {
    int64_t offset, end;
    size_t id;
  };
  std::vector<Placed> placed;  // sorted by offset
  for (size_t id : order) {
    const BufferRequest& r = requests[id];
    plan.total_bytes += r.bytes;
    int64_t size = (r.bytes + alignment - 1) / alignment * alignment;
    // Best fit: the smallest gap between live-overlapping buffers that holds this one.
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const Placed& p : placed) {
      const BufferRequest& q = requests[p.id];
      if (q.last < r.first || r.last < q.first) continue;  // not alive together
      if (p.offset >= cursor) {
        int64_t gap = p.offset - cursor;
        if (gap >= size && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, p.end);
    }
    int64_t off = best >= 0 ? best : cursor;
    plan.offsets[id] = off;
    Placed np{off, off + size, id};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), np,
                                   [](const Placed& a, const Placed& b) { return a.offset < b.offset; }),
                  np);
    plan.arena_bytes = std::max(plan.arena_bytes, off + size);
  }
  return plan;
}

}  // namespace cuvil
