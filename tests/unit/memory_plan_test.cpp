#include <gtest/gtest.h>

#include <random>

#include "runtime/memory_plan.h"

using namespace cuvil;

namespace {

// No two buffers alive at the same step may overlap.
void expect_valid(const std::vector<BufferRequest>& reqs, const MemoryPlan& p) {
  ASSERT_EQ(p.offsets.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0);
    EXPECT_LE(p.offsets[i] + reqs[i].bytes, p.arena_bytes);
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      bool live_together = !(reqs[i].last < reqs[j].first || reqs[j].last < reqs[i].first);
      bool overlap = p.offsets[i] < p.offsets[j] + reqs[j].bytes && p.offsets[j] < p.offsets[i] + reqs[i].bytes;
      EXPECT_FALSE(live_together && overlap && reqs[i].bytes && reqs[j].bytes) << i << " and " << j;
    }
  }
}

}  // namespace

TEST(MemoryPlan, ReusesMemoryOfDeadBuffers) {
  // A chain a -> b -> c: a and c never live together, so they share memory.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryPlan p = plan_memory(r);
  expect_valid(r, p);
  EXPECT_EQ(p.arena_bytes, 2 * 1024);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_EQ(p.total_bytes, 3000);
}

TEST(MemoryPlan, EmptyAndZeroSized) {
  EXPECT_EQ(plan_memory({}).arena_bytes, 0);
  std::vector<BufferRequest> r = {{0, 0, 0}, {64, 0, 0}};
  MemoryPlan p = plan_memory(r);
  expect_valid(r, p);
  EXPECT_EQ(p.arena_bytes, 64);
}

TEST(MemoryPlan, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> r;
    int n = 1 + int(rng() % 40);
    int64_t peak_lower_bound = 0;
    for (int i = 0; i < n; ++i) {
      int first = int(rng() % 30);
      r.push_back({int64_t(rng() % 5000), first, first + int(rng() % 10)});
    }
    MemoryPlan p = plan_memory(r);
    expect_valid(r, p);
    for (int step = 0; step < 40; ++step) {
      int64_t live = 0;
      for (auto& q : r)
        if (q.first <= step && step <= q.last) live += q.bytes;
      peak_lower_bound = std::max(peak_lower_bound, live);
    }
    EXPECT_GE(p.arena_bytes, peak_lower_bound);
    EXPECT_LE(p.arena_bytes, (p.total_bytes + 64 * int64_t(n)));
  }
}
