#include "scheduler/state/steps/gpu_tile_step.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::state {

void GpuTileStep::apply_to(State& s) const {
  const Stage& st = schedulable_stage(s, stage_id, "gpu_tile");
  if (!st.op || st.op->reducer == te::Reducer::None || st.op->reduce_axes.empty())
    throw ScheduleError(fmt::format("gpu_tile: '{}' is not a reduction", st.name()));
  if (none()) {
    if (!thread_tile.empty() || k_chunk != 0 || prefetch)
      throw ScheduleError(fmt::format("gpu_tile: '{}': no block but a register tile, chunk or prefetch", st.name()));
    return;
  }
  const te::Stage& op = *st.op;
  if (block.size() != op.axes.size() || thread_tile.size() != op.axes.size())
    throw ScheduleError(fmt::format("gpu_tile: '{}' has {} axes, the tile gives {} and {}", st.name(), op.axes.size(),
                                    block.size(), thread_tile.size()));
  for (size_t a = 0; a < block.size(); ++a)
    if (thread_tile[a] < 1 || block[a] < thread_tile[a] || block[a] % thread_tile[a] != 0 || op.shape[a] % block[a] != 0)
      throw ScheduleError(fmt::format("gpu_tile: '{}' axis {} (extent {}): block {} and register tile {} do not divide it",
                                      st.name(), a, op.shape[a], block[a], thread_tile[a]));
  if (k_chunk < 1 || op.reduce_axes[0].extent % k_chunk != 0)
    throw ScheduleError(fmt::format("gpu_tile: '{}': chunk {} does not divide the reduction's first axis ({})", st.name(),
                                    k_chunk, op.reduce_axes[0].extent));
}

std::string GpuTileStep::print(const State& s) const {
  const std::string& name = s.stage(stage_id).name();
  if (none()) return fmt::format("{}.gpu_tile(none)", name);
  return fmt::format("{}.gpu_tile(block=[{}], thread=[{}], chunk={}{})", name, fmt::join(block, ", "),
                     fmt::join(thread_tile, ", "), k_chunk, prefetch ? ", prefetch" : "");
}

}  // namespace kiln::state
