/// \file reorder: a new loop order for a stage (tiling structures such as SSRSRS are splits plus one
/// reorder).
#pragma once
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["RE", stage_id, [iter_ids in their new order]] — a permutation of all the stage's loops.
struct ReorderStep : Step {
  ReorderStep(int stage_id, std::vector<int> after_ids) : Step(stage_id), after_ids(std::move(after_ids)) {}
  const char* prefix() const override { return "RE"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"RE", stage_id, after_ids}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<ReorderStep>(j.at(1).get<int>(), j.at(2).get<std::vector<int>>());
  }

  std::vector<int> after_ids;
};

}  // namespace kiln::state
