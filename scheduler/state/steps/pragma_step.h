/// \file pragma: a hint on one loop. The one kiln honours is Ansor's auto-unroll: unroll the loops
/// inside it while their iteration count stays under a bound.
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["PR", stage_id, iter_id, "auto_unroll_max_step$N"].
struct PragmaStep : Step {
  PragmaStep(int stage_id, int iter_id, std::string pragma) : Step(stage_id), iter_id(iter_id), pragma(std::move(pragma)) {}
  const char* prefix() const override { return "PR"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"PR", stage_id, iter_id, pragma}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<PragmaStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<std::string>());
  }

  int iter_id;
  std::string pragma;
};

}  // namespace kiln::state
