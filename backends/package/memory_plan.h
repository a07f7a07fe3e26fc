/// \file Static workspace planning: every intermediate tensor gets an offset in one caller-owned arena.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/lower/in_place_writes.h"
#include "scheduler/lower/lower_model.h"

namespace kiln::package {

/// The alignment of the workspace and of every buffer in it (and of the weights): a cache line, and
/// the widest vector (AVX-512) loads aligned.
inline constexpr int64_t kWorkspaceAlign = 64;

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

/// Greedy best-fit packing (two tensors share bytes only when their live ranges do not overlap), in
/// three orders: largest first (TFLM's greedy planner), first use first, and most bytes x statements
/// first; the smallest plan is kept (ties: the earlier order). No order wins everywhere: largest first
/// leaves holes that a chronological order fills on some lifetimes, and the reverse. `lower_bound` is
/// what no packing can beat, so size/lower_bound is the plan's efficiency (reported in the package's
/// metadata).
MemoryPlan plan_memory(const std::vector<LiveRange>& ranges, int64_t align);

/// The memory stage of the pipeline: where each workspace parameter of a lowered model lives.
struct ModelMemoryPlan {
  std::vector<int64_t> offset_of_param;  // per ModelProgram::params: offset in the workspace, -1 if not workspace
  int64_t size = 0;                      // bytes of workspace the model needs
  int64_t lower_bound = 0;               // peak-liveness bound (plan_memory)
  int intermediates = 0;                 // workspace parameters placed
  std::vector<lower::InPlaceWrite> in_place;  // the permitted in-place writes the plan uses
  int64_t size_apart = 0;                     // bytes of the plan with every buffer apart (no in-place)
  /// When the subgraphs were reordered for memory (memory_order.h): the bytes in the graph's order.
  int64_t size_in_given_order = 0;
};

/// Plans the workspace of `prog`: every Workspace parameter lives from the first to the last statement
/// of the body that touches it (finer than subgraphs, so an intermediate stage's bytes are reused
/// within its subgraph), packed by plan_memory with kWorkspaceAlign. `in_place` (find_in_place_writes)
/// permits outputs to take a dying input's bytes: the plan is made with the permitted pairs joined
/// (each buffer gives its bytes to one output and takes them from one input, so pairs chain) and
/// without, and the smaller is kept (ties: without, so code whose plan in-place does not shrink keeps
/// every buffer distinct). The lower bound is the one of the plan kept.
ModelMemoryPlan plan_model_memory(const lower::ModelProgram& prog, const std::vector<lower::InPlaceWrite>& in_place = {});

/// One line for the whole plan, then one per workspace buffer by offset: name, offset, bytes, statements.
std::string print_model_memory_plan(const lower::ModelProgram& prog, const ModelMemoryPlan& plan);

}  // namespace kiln::package
