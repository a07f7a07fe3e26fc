/// \file A GPU program of one task, as a tuner measures it and a record replays it: the task's state,
/// whose gpu_tile steps (scheduler/state/steps/gpu_tile_step.h) choose its matmuls' and convolutions'
/// kernels, lowered by the GPU schedule (lower_gpu.h) into a function of kernels only.
///
/// Why here: the builder (backends/measure) compiles candidates and the compile stage
/// (toolchain/pipeline.cc) replays records; both must read a state's GPU choices the same way and
/// refuse the same ones (a record from a hand edit or another target may name a tile that does not fit).
#pragma once
#include <string>

#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/lower_gpu.h"
#include "scheduler/state/state.h"

namespace kiln::lower {

/// The tiles `s`'s gpu_tile steps choose, by index in the DAG's tensors. Throws state::ScheduleError,
/// naming the stage, for a state with steps other than gpu_tile (a CPU program) or a tile outside
/// the stage's space under `p` (shared_tile_space).
GpuStageTiles gpu_stage_tiles(const state::State& s, const GpuScheduleParams& p);

/// The task's GPU program as a function named `name`, its parameters in the order the measurement
/// builder's runners expect (measure::buffer_specs): placeholders, distinct outputs, temporaries.
/// Throws as gpu_stage_tiles, and Unsupported for a stage with no GPU kernel.
LoweredFunc lower_gpu_task(const state::State& s, const std::string& name, GpuScheduleParams p);

}  // namespace kiln::lower
