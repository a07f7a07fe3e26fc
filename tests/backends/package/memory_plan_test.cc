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

// A model program of workspace buffers only, each `bytes` long and live over its steps; the
// statements are not looked at by the planner.
lower::ModelProgram workspace_program(const std::vector<std::pair<int, int>>& steps, int64_t bytes) {
  lower::ModelProgram p;
  for (size_t i = 0; i < steps.size(); ++i) {
    p.func.params.push_back(lower::make_buffer("t" + std::to_string(i), DType::Float32, bytes / 4));
    lower::ModelParam m;
    m.bytes = bytes;
    m.first_step = steps[i].first;
    m.last_step = steps[i].second;
    p.params.push_back(m);
  }
  return p;
}

// t0 and t1 are written at step 0, t1 lives on to step 2, and step 1 reads t0 to write t2: three
// buffers live at step 1 unless t2 takes t0's bytes; t3 (step 2, from t2) then takes them in turn.
TEST(MemoryPlan, AnOutputWrittenInPlaceTakesItsInputsBytes) {
  const lower::ModelProgram p = workspace_program({{0, 1}, {0, 2}, {1, 2}, {2, 3}}, 1024);
  const ModelMemoryPlan apart = plan_model_memory(p);
  EXPECT_EQ(apart.size, 3072);
  EXPECT_TRUE(apart.in_place.empty());
  const ModelMemoryPlan joined = plan_model_memory(p, {{0, 2, 1}, {2, 3, 2}});
  EXPECT_EQ(joined.size, 2048);
  EXPECT_EQ(joined.lower_bound, 2048);
  EXPECT_EQ(joined.size_apart, 3072);
  ASSERT_EQ(joined.in_place.size(), 2u);
  EXPECT_EQ(joined.offset_of_param[2], joined.offset_of_param[0]);
  EXPECT_EQ(joined.offset_of_param[3], joined.offset_of_param[0]);
  EXPECT_NE(joined.offset_of_param[1], joined.offset_of_param[0]);
  EXPECT_NE(print_model_memory_plan(p, joined).find("t2 (1024 bytes, statements 1..2, over t0)"), std::string::npos)
      << print_model_memory_plan(p, joined);
}

// A buffer gives its bytes to one output only: the second permission for t0 is not used.
TEST(MemoryPlan, AnInputGivesItsBytesToOneOutput) {
  const lower::ModelProgram p = workspace_program({{0, 1}, {1, 2}, {1, 2}}, 1024);
  const ModelMemoryPlan plan = plan_model_memory(p, {{0, 1, 1}, {0, 2, 1}});
  ASSERT_EQ(plan.in_place.size(), 1u);
  EXPECT_EQ(plan.in_place[0].written, 1u);
  EXPECT_EQ(plan.size, 2048);
}

// Where the peak lies elsewhere in-place shrinks nothing, and every buffer keeps bytes of its own.
TEST(MemoryPlan, InPlaceIsNotUsedWhereItShrinksNothing) {
  lower::ModelProgram p = workspace_program({{0, 1}, {1, 2}, {3, 3}}, 1024);
  p.params[2].bytes = 4096;
  const ModelMemoryPlan plan = plan_model_memory(p, {{0, 1, 1}});
  EXPECT_TRUE(plan.in_place.empty());
  EXPECT_EQ(plan.size, 4096);
  EXPECT_NE(plan.offset_of_param[0], plan.offset_of_param[1]);
}

TEST(MemoryPlan, NothingToPlace) {
  const MemoryPlan plan = plan_memory({}, 64);
  EXPECT_EQ(plan.size, 0);
  EXPECT_EQ(plan.lower_bound, 0);
}

}  // namespace
}  // namespace kiln::package
