/// \file rfactor: a reduction split in two becomes two stages, the first reducing into a new spatial
/// axis (which can then be parallelized or vectorized), the second reducing that axis. For reductions
/// over a long axis with little spatial work (a sum over a whole tensor, layer norm's statistics).
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["RF", stage_id, iter_id, factor_iter_id]. `iter_id` is a reduction loop of the stage (after
/// a split of its reduction axis). Adds stage "<name>.rf" before the stage: its axes are the stage's
/// output axes with `iter_id`'s loop inserted as a spatial axis at position `factor_iter_id`, and it
/// reduces over the stage's other reduction loops; the stage then reduces the new axis of "<name>.rf".
/// Only the stage's reduction loops may have been split or fused before.
struct RfactorStep : Step {
  RfactorStep(int stage_id, int iter_id, int factor_iter_id) : Step(stage_id), iter_id(iter_id), factor_iter_id(factor_iter_id) {}
  const char* prefix() const override { return "RF"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"RF", stage_id, iter_id, factor_iter_id}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<RfactorStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<int>());
  }

  int iter_id, factor_iter_id;
};

}  // namespace kiln::state
