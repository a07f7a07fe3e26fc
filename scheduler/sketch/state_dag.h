/// \file A state's stages as a compute DAG of their current computations, so the DAG analysis
/// (scheduler/te/analysis.h) sees the stages that cache and rfactor steps added, as Ansor re-analyses
/// the replayed DAG.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "scheduler/state/state.h"
#include "scheduler/te/analysis.h"

namespace kiln::sketch {

struct StateDag {
  te::ComputeDAG dag;
  std::vector<te::TensorRef> tensor_of_stage;  // per stage id
  std::map<const te::TensorNode*, int> stage_of;
  std::shared_ptr<te::DagAnalysis> analysis;

  const te::TensorNode* tensor(int stage) const { return tensor_of_stage[static_cast<size_t>(stage)].get(); }
  /// Stage ids read by / reading `stage` once the state's inlined stages are looked through.
  std::vector<int> consumers(const state::State& s, int stage) const;
  std::vector<int> producers(const state::State& s, int stage) const;
};

StateDag make_state_dag(const state::State& s);

}  // namespace kiln::sketch
