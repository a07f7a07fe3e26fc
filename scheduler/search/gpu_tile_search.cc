#include "scheduler/search/gpu_tile_search.h"

#include "frontend/ir/error.h"
#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/lower/gpu_task.h"
#include "scheduler/state/steps/gpu_tile_step.h"

namespace kiln::search {

std::vector<GpuStageSpace> gpu_task_space(const te::ComputeDAG& dag, const lower::GpuScheduleParams& p) {
  std::vector<GpuStageSpace> space;
  const int inputs = static_cast<int>(dag.placeholders.size());
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    const te::TensorRef& t = dag.tensors[i];
    if (!t->stage || t->stage->is_extern()) continue;
    std::vector<lower::GpuSharedTile> tiles = lower::shared_tile_space(*t->stage, p);
    if (!tiles.empty()) space.push_back({inputs + static_cast<int>(i), std::move(tiles)});
  }
  return space;
}

state::State gpu_program(const std::shared_ptr<const te::ComputeDAG>& dag, const std::vector<GpuStageSpace>& space,
                         const GpuChoice& choice) {
  state::State s(dag);
  for (size_t k = 0; k < space.size(); ++k) {
    const int c = choice.at(k);
    if (c < 0) {
      s.apply(std::make_shared<state::GpuTileStep>(space[k].stage_id, std::vector<int64_t>{}, std::vector<int64_t>{}, 0));
      continue;
    }
    const lower::GpuSharedTile& t = space[k].tiles.at(static_cast<size_t>(c));
    s.apply(std::make_shared<state::GpuTileStep>(space[k].stage_id, t.block, t.thread_tile, t.k_chunk, t.prefetch));
  }
  return s;
}

ProgramFeatures gpu_program_features(const state::State& program, const lower::GpuScheduleParams& p) {
  // A GPU's L1 line: what the line counts of its accesses are measured in.
  constexpr int kGpuLineBytes = 128;
  try {
    return extract_features(lower::lower_gpu_task(program, "features", p), kGpuLineBytes);
  } catch (const Error&) {
    return {};
  }
}

GpuChoice random_gpu_choice(const std::vector<GpuStageSpace>& space, std::mt19937_64& rng) {
  GpuChoice c;
  for (const GpuStageSpace& st : space)
    c.push_back(std::uniform_int_distribution<int>(-1, static_cast<int>(st.tiles.size()) - 1)(rng));
  return c;
}

GpuChoice mutate_gpu_choice(const std::vector<GpuStageSpace>& space, const GpuChoice& from, std::mt19937_64& rng) {
  GpuChoice c = from;
  if (space.empty()) return c;
  const size_t k = std::uniform_int_distribution<size_t>(0, space.size() - 1)(rng);
  const std::vector<lower::GpuSharedTile>& tiles = space[k].tiles;
  std::vector<int> near;
  if (c[k] >= 0) {
    const lower::GpuSharedTile& t = tiles[static_cast<size_t>(c[k])];
    for (size_t i = 0; i < tiles.size(); ++i) {
      const lower::GpuSharedTile& u = tiles[i];
      const int same =
          (u.block == t.block) + (u.thread_tile == t.thread_tile) + (u.k_chunk == t.k_chunk) + (u.prefetch == t.prefetch);
      if (same == 3) near.push_back(static_cast<int>(i));
    }
  }
  if (!near.empty()) c[k] = near[std::uniform_int_distribution<size_t>(0, near.size() - 1)(rng)];
  else c[k] = std::uniform_int_distribution<int>(-1, static_cast<int>(tiles.size()) - 1)(rng);
  return c;
}

}  // namespace kiln::search
