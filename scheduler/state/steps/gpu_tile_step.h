/// \file gpu_tile: the knobs of a GPU matmul's or convolution's kernel (scheduler/lower/gpu_shared_tiles.h)
/// for one stage, so that a tuner can search them and a record can replay them.
///
/// Why a step of its own rather than splits and thread bindings: kiln's GPU lowering builds the
/// shared-memory kernel from three choices (the block's extent along each output axis, each thread's
/// register tile, and the reduction's chunk) and derives the loops, copies and barriers itself. The
/// step names those choices; it changes no loop of the state, and only a GPU program reads it. Its
/// space is every tile gpu_shared_tiles.h enumerates for the stage, plus "none" (one thread per output).
#pragma once
#include <cstdint>
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["GT", stage_id, [block extents per axis], [register tile per axis], chunk(, 1)]; empty
/// lists and chunk 0 mean "no shared-memory tile" (the thread-per-output kernel). A trailing 1 means
/// chunk prefetch (the next chunk loaded during the current one's FMAs); without it, none, which is
/// how records written before prefetch existed replay.
struct GpuTileStep : Step {
  GpuTileStep(int stage_id, std::vector<int64_t> block, std::vector<int64_t> thread_tile, int64_t k_chunk,
              bool prefetch = false)
      : Step(stage_id), block(std::move(block)), thread_tile(std::move(thread_tile)), k_chunk(k_chunk), prefetch(prefetch) {}
  const char* prefix() const override { return "GT"; }
  /// Checks the stage is a reduction whose axes the tile divides (block by register tile, the
  /// shape by the block, the reduction's first axis by the chunk); the state's loops are unchanged.
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override {
    nlohmann::json j = {"GT", stage_id, block, thread_tile, k_chunk};
    if (prefetch) j.push_back(1);
    return j;
  }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    const int64_t prefetch = j.size() > 5 ? j.at(5).get<int64_t>() : 0;
    if (prefetch != 0 && prefetch != 1) throw ScheduleError("GT: prefetch must be 0 or 1 in " + j.dump());
    return std::make_shared<GpuTileStep>(j.at(1).get<int>(), j.at(2).get<std::vector<int64_t>>(),
                                         j.at(3).get<std::vector<int64_t>>(), j.at(4).get<int64_t>(), prefetch == 1);
  }
  bool none() const { return block.empty(); }

  std::vector<int64_t> block, thread_tile;
  int64_t k_chunk = 0;
  bool prefetch = false;
};

}  // namespace kiln::state
