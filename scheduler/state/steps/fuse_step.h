/// \file fuse: adjacent loops become one, so a parallel loop has enough iterations or a vector loop
/// spans several axes.
#pragma once
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["FU", stage_id, [iter_ids...]]. The ids must be consecutive positions, outer first, and of
/// one kind (all spatial or all reduction; kiln does not build mixed loops).
struct FuseStep : Step {
  FuseStep(int stage_id, std::vector<int> iter_ids) : Step(stage_id), iter_ids(std::move(iter_ids)) {}
  const char* prefix() const override { return "FU"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"FU", stage_id, iter_ids}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<FuseStep>(j.at(1).get<int>(), j.at(2).get<std::vector<int>>());
  }

  std::vector<int> iter_ids;
};

}  // namespace kiln::state
