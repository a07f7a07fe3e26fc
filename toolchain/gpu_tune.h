/// \file `kiln tune` for a CUDA target: each task's matmuls and convolutions take the shared-memory
/// tile that measures fastest on the GPU (scheduler/search/gpu_tile_search.h), with the builder,
/// runners (local or a device server over RPC) and records of CPU tuning.
///
/// Rounds: the task whose weight x best time is largest gets the next batch (untimed tasks first,
/// largest FLOPs first), of per_round programs or, when the budget is shared by many tasks, of
/// trials / tasks (at least 2), so that every task is measured; a task's first batch holds its default program (the fixed tile rule, recorded
/// as the default schedule so compile --records uses a tuned tile only when it beats it) and random
/// programs, later batches half mutations of its best and half random. Every result is appended to
/// the records before the next round (a kill loses at most the batch in flight); the records of an
/// earlier run are restored and never measured again.
///
/// With a cost model (Ansor's: one model over every task, trained on each round's measurements), a
/// round draws a pool of unmeasured programs the same way, and measures those the model ranks
/// fastest, plus a fifth drawn from the rest of the pool (exploration, so the model also sees what it
/// ranks low). Why: a GPU is lent for minutes, and 128 programs measured 8 of ResNet-50's 25 tasks
/// (bench/RESULTS.md); ranking spends those minutes on likely programs. Feature rows of every measured
/// program go beside the records (measure::features_path), as for CPU tuning, so later runs and
/// offline studies can learn from them.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "scheduler/measure/program_runner.h"
#include "scheduler/search/cost_model.h"
#include "scheduler/search/tuner.h"
#include "targets/target.h"

namespace kiln {

struct GpuTuneOptions {
  int trials = 64;       ///< programs measured in all, restored ones included
  int per_round = 16;
  uint64_t seed = 0;
  search::CostModel* model = nullptr;  ///< ranks each round's pool; null: the batch is the draws themselves
  int pool = 128;                      ///< programs drawn per round for the model to rank
};

/// Tunes `tasks` (those without a matmul or convolution are left out, saying how many) and prints one
/// line per round and a table of every task's default and best times to `out`. Returns the programs
/// measured in this run.
int tune_gpu(const std::vector<search::TuneTask>& tasks, const Target& target, const GpuTuneOptions& options,
             measure::Builder& builder, measure::ProgramRunner& runner, const std::string& records_path, std::ostream& out);

}  // namespace kiln
