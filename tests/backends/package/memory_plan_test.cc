// The workspace planner (backends/package/memory_plan.h): plans never let two tensors that are live
// at once share a byte, never beat the peak-liveness bound, and reach it where one packing order
// alone does not.
#include "backends/package/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::package {
namespace {

void expect_valid(const std::vector<LiveRange>& ranges, const MemoryPlan& plan, int64_t align) {
  ASSERT_EQ(plan.offsets.size(), ranges.size());
  EXPECT_GE(plan.size, plan.lower_bound);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % align, 0);
    EXPECT_LE(plan.offsets[i] + ranges[i].bytes, plan.size);
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      const bool live_together = !(ranges[i].last < ranges[j].first || ranges[j].last < ranges[i].first);
      const bool share_bytes = plan.offsets[i] < plan.offsets[j] + ranges[j].bytes &&
                               plan.offsets[j] < plan.offsets[i] + ranges[i].bytes;
      EXPECT_FALSE(live_together && share_bytes) << "ranges " << i << " and " << j;
    }
  }
}

// Largest first puts the two 5-byte tensors of steps 0..1 and 3..4 at 0, the one of 2..5 above them
// at 5, and the 2-byte one of 1..2 then fits only at 10: 12 bytes. Taken by first use (or by byte-steps,
// the 2..5 tensor first), the 2-byte tensor finds room at 5 and the plan meets the bound, 10.
TEST(MemoryPlan, TriesAnotherOrderWhereLargestFirstLeavesAHole) {
  const std::vector<LiveRange> ranges = {{5, 0, 1}, {5, 3, 4}, {5, 2, 5}, {2, 1, 2}};
  const MemoryPlan plan = plan_memory(ranges, 1);
  expect_valid(ranges, plan, 1);
  EXPECT_EQ(plan.lower_bound, 10);
  EXPECT_EQ(plan.size, 10);
}

TEST(MemoryPlan, RandomLifetimesArePackedSafelyAndNeverBelowTheBound) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> bytes(1, 300), start(0, 40), length(0, 12), count(1, 30);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<LiveRange> ranges;
    for (int64_t n = count(rng); n > 0; --n) {
      const int64_t first = start(rng);
      ranges.push_back({bytes(rng), first, first + length(rng)});
    }
    for (int64_t align : {1, 64}) expect_valid(ranges, plan_memory(ranges, align), align);
  }
}

TEST(MemoryPlan, NothingToPlace) {
  const MemoryPlan plan = plan_memory({}, 64);
  EXPECT_EQ(plan.size, 0);
  EXPECT_EQ(plan.lower_bound, 0);
}

}  // namespace
}  // namespace kiln::package
