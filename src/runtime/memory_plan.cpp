#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace cuvil {

namespace {

// The buffers placed so far, found by the steps they are alive at: a segment tree over the steps, each buffer
// stored at the O(log steps) nodes that cover its live range, with a count of the buffers stored in each subtree
// so that a search skips empty ones. Finding the k buffers alive during r steps visits O((k + 1) log steps + r)
// nodes, so planning a 50,000-node chain costs per buffer about what planning 50 nodes does (a scan of every
// placed buffer per buffer took seconds there).
class LiveIndex {
 public:
  LiveIndex(int steps, size_t ids) : seen_(ids, 0) {
    while (size_ < steps) size_ *= 2;
    stored_.resize(size_t(2 * size_));
    count_.assign(size_t(2 * size_), 0);
  }
  void add(int first, int last, uint32_t id) {
    for (int l = first + size_, r = last + size_ + 1; l < r; l >>= 1, r >>= 1) {
      if (l & 1) store(l++, id);
      if (r & 1) store(--r, id);
    }
  }
  // Appends to `out` every buffer alive at some step of [first, last], once each.
  void alive_during(int first, int last, std::vector<uint32_t>& out) {
    ++stamp_;
    // Tree nodes whose subtree's steps [lo, hi] meet [first, last], depth first.
    stack_.assign(1, {1, 0, size_ - 1});
    while (!stack_.empty()) {
      Visit v = stack_.back();
      stack_.pop_back();
      if (count_[size_t(v.node)] == 0 || v.hi < first || last < v.lo) continue;
      for (uint32_t id : stored_[size_t(v.node)])
        if (seen_[id] != stamp_) {
          seen_[id] = stamp_;
          out.push_back(id);
        }
      if (v.node < size_) {
        int mid = (v.lo + v.hi) / 2;
        stack_.push_back({2 * v.node + 1, mid + 1, v.hi});
        stack_.push_back({2 * v.node, v.lo, mid});
      }
    }
  }

 private:
  struct Visit {
    int node, lo, hi;
  };
  void store(int node, uint32_t id) {
    stored_[size_t(node)].push_back(id);
    for (int a = node; a >= 1; a >>= 1) ++count_[size_t(a)];
  }
  int size_ = 1;
  std::vector<std::vector<uint32_t>> stored_;  // by tree node: buffers whose live range it covers
  std::vector<uint32_t> count_;                // by tree node: buffers stored in its subtree
  std::vector<uint32_t> seen_;                 // by buffer: the search that last reported it
  uint32_t stamp_ = 0;
  std::vector<Visit> stack_;
};

}  // namespace

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
  auto lo = [](const BufferRequest& r) { return std::max(0, std::min(r.first, r.last)); };
  auto hi = [](const BufferRequest& r) { return std::max({0, r.first, r.last}); };
  int steps = 1;
  for (const BufferRequest& r : requests) steps = std::max(steps, hi(r) + 1);
  LiveIndex live(steps, requests.size());
  std::vector<int64_t> offset(requests.size()), end(requests.size());
  std::vector<uint32_t> rank(requests.size());  // placement order: among equal offsets, the earlier placed first
  std::vector<uint32_t> together;
  uint32_t placed = 0;
  for (size_t id : order) {
    const BufferRequest& r = requests[id];
    plan.total_bytes += r.bytes;
    int64_t size = (r.bytes + alignment - 1) / alignment * alignment;
    // Best fit: the smallest gap between live-overlapping buffers (by offset) that holds this one.
    together.clear();
    live.alive_during(lo(r), hi(r), together);
    std::sort(together.begin(), together.end(), [&](uint32_t a, uint32_t b) {
      return offset[a] != offset[b] ? offset[a] < offset[b] : rank[a] < rank[b];
    });
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (uint32_t p : together) {
      if (offset[p] >= cursor) {
        int64_t gap = offset[p] - cursor;
        if (gap >= size && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, end[p]);
    }
    int64_t off = best >= 0 ? best : cursor;
    plan.offsets[id] = off;
    offset[id] = off;
    end[id] = off + size;
    rank[id] = placed++;
    live.add(lo(r), hi(r), uint32_t(id));
    plan.arena_bytes = std::max(plan.arena_bytes, off + size);
  }
  return plan;
}

}  // namespace cuvil
