/// \file The search space of a task's GPU program and how the GPU tuner moves in it: each matmul and
/// convolution of the task picks a shared-memory tile (block extents, register tile, chunk) from every
/// one that fits the GPU (lower::shared_tile_space), or none; a program is the initial state with one
/// gpu_tile step per such stage (scheduler/state/steps/gpu_tile_step.h).
///
/// Why not the CPU's sketches and evolutionary search yet: kiln's GPU lowering derives the loops,
/// copies and barriers from the tile, so the tile is the whole space, a few hundred to a few thousand
/// points per stage. Candidates are drawn at random or by changing one stage's tile of the best
/// program so far (a local step); the GPU tuner ranks such draws with the cost model over their
/// features (toolchain/gpu_tune.h).
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "scheduler/lower/lower_gpu.h"
#include "scheduler/search/features.h"
#include "scheduler/state/state.h"

namespace kiln::search {

/// A tunable stage: its id in the state (placeholders first) and its tiles.
struct GpuStageSpace {
  int stage_id = 0;
  std::vector<lower::GpuSharedTile> tiles;
};

/// The tunable stages of `dag` under `p`: empty when the task has no matmul or convolution the
/// shared-memory schedule applies to (its default program is then the only one).
std::vector<GpuStageSpace> gpu_task_space(const te::ComputeDAG& dag, const lower::GpuScheduleParams& p);

/// One choice per tunable stage: an index into its tiles, or -1 for none.
using GpuChoice = std::vector<int>;

/// The program of `choice`: the initial state of `dag` with its gpu_tile steps.
state::State gpu_program(const std::shared_ptr<const te::ComputeDAG>& dag, const std::vector<GpuStageSpace>& space,
                         const GpuChoice& choice);

/// The feature rows (search/features.h) of a GPU program of `dag` under `p`, lowered as the builder
/// lowers it (lower::lower_gpu_task), with GPU cache lines of 128 bytes; empty when it does not lower.
ProgramFeatures gpu_program_features(const state::State& program, const lower::GpuScheduleParams& p);

/// A choice drawn uniformly per stage (none included).
GpuChoice random_gpu_choice(const std::vector<GpuStageSpace>& space, std::mt19937_64& rng);

/// `from` with one stage's tile replaced: by a tile that differs from it in one knob (block, register
/// tile, chunk or prefetch) where there is one, else by any tile.
GpuChoice mutate_gpu_choice(const std::vector<GpuStageSpace>& space, const GpuChoice& from, std::mt19937_64& rng);

}  // namespace kiln::search
