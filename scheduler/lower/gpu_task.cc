#include "scheduler/lower/gpu_task.h"

#include <algorithm>
#include <fmt/format.h>

#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/lower/lower_model.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/state/steps/gpu_tile_step.h"

namespace kiln::lower {

GpuStageTiles gpu_stage_tiles(const state::State& s, const GpuScheduleParams& p) {
  const te::ComputeDAG& dag = s.dag();
  const size_t inputs = dag.placeholders.size();
  GpuStageTiles tiles;
  for (const state::StepRef& step : s.steps()) {
    const auto* gt = dynamic_cast<const state::GpuTileStep*>(step.get());
    if (!gt) throw state::ScheduleError("a GPU program has gpu_tile steps only, not " + step->to_json().dump());
    const size_t index = static_cast<size_t>(gt->stage_id) - inputs;  // stage ids: placeholders first
    if (gt->stage_id < static_cast<int>(inputs) || index >= dag.tensors.size())
      throw state::ScheduleError(fmt::format("gpu_tile: stage {} is not a computed stage", gt->stage_id));
    if (gt->none()) {
      tiles[index] = std::nullopt;
      continue;
    }
    const GpuSharedTile tile{gt->block, gt->thread_tile, gt->k_chunk, gt->prefetch};
    const te::Stage& stage = *dag.tensors[index]->stage;
    const std::vector<GpuSharedTile> space = shared_tile_space(stage, p);
    if (std::find(space.begin(), space.end(), tile) == space.end())
      throw state::ScheduleError(fmt::format("gpu_tile: stage '{}': the tile is not one this target's GPU schedule can "
                                             "take ({} threads per block, {} bytes of shared memory)",
                                             stage.name, p.threads_per_block, p.tuned_shared_bytes));
    tiles[index] = tile;
  }
  return tiles;
}

LoweredFunc lower_gpu_task(const state::State& s, const std::string& name, GpuScheduleParams p) {
  const GpuStageTiles tiles = gpu_stage_tiles(s, p);
  p.tuned = [&tiles](int) { return &tiles; };
  const te::ComputeDAG& dag = s.dag();
  LoweredSubgraph sg{dag, {}, dag.outputs};
  LoweredFunc f;
  f.name = name;
  const std::map<const te::TensorNode*, BufferRef> buffers = add_io_params(dag, f);
  std::vector<BufferRef> temporaries;
  const Stmt body = gpu_subgraph_scheduler(p)(sg, 0, buffers, temporaries);
  for (const BufferRef& b : temporaries) f.params.push_back(b);
  f.body = gpu_kernels_only(body, p);
  return f;
}

}  // namespace kiln::lower
