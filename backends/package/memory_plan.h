/// \file Static workspace planning: every intermediate tensor gets an offset in one caller-owned arena.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln::package {

/// A buffer to place: its size and the first and last step (statement position in the model body) at which it is live.
struct LiveRange {
  int64_t bytes;
  int64_t first;
  int64_t last;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per LiveRange, aligned to `align`
  int64_t size = 0;              // bytes of workspace the plan needs
  int64_t lower_bound = 0;       // peak of the summed sizes of simultaneously live tensors
};

/// Greedy best-fit packing, largest tensors first: two tensors share bytes only when their live
/// ranges do not overlap. `lower_bound` is what no packing can beat, so size/lower_bound is the plan's
/// efficiency (reported in the package's metadata).
MemoryPlan plan_memory(const std::vector<LiveRange>& ranges, int64_t align);

}  // namespace kiln::package
