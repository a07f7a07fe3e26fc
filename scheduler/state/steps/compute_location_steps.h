/// \file compute-at, compute-inline, compute-root: where a stage's values are computed. Inlined into its
/// consumers (no buffer), inside a loop of its consumer (a small buffer, reused while hot in cache), or
/// on its own at the top level (a whole buffer).
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["CA", stage_id, target_stage_id, target_iter_id]. The target is the stage's only consumer
/// (looking through inlined stages), or the stage that consumer is computed in, at a loop outside the
/// consumer's or at it (as Ansor's compute-location candidates: a padded input computed per channel
/// of a convolution whose accumulator is computed per row tile). The stage then computes, per
/// iteration of that loop, what the loops inside it read (bound inference).
struct ComputeAtStep : Step {
  ComputeAtStep(int stage_id, int target_stage_id, int target_iter_id)
      : Step(stage_id), target_stage_id(target_stage_id), target_iter_id(target_iter_id) {}
  const char* prefix() const override { return "CA"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"CA", stage_id, target_stage_id, target_iter_id}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<ComputeAtStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<int>());
  }

  int target_stage_id, target_iter_id;
};

/// Record: ["CI", stage_id]. Only a stage without reduction, not a DAG output, with nothing computed
/// inside its loops and not read by a runtime kernel.
struct ComputeInlineStep : Step {
  explicit ComputeInlineStep(int stage_id) : Step(stage_id) {}
  const char* prefix() const override { return "CI"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"CI", stage_id}; }
  std::string print(const State& s) const override { return s.stage(stage_id).name() + ".compute_inline()"; }
  static StepRef from_json(const nlohmann::json& j) { return std::make_shared<ComputeInlineStep>(j.at(1).get<int>()); }
};

/// Record: ["CR", stage_id].
struct ComputeRootStep : Step {
  explicit ComputeRootStep(int stage_id) : Step(stage_id) {}
  const char* prefix() const override { return "CR"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"CR", stage_id}; }
  std::string print(const State& s) const override { return s.stage(stage_id).name() + ".compute_root()"; }
  static StepRef from_json(const nlohmann::json& j) { return std::make_shared<ComputeRootStep>(j.at(1).get<int>()); }
};

/// The only consumer of stage `id` (through inlined stages) when stage `target` may compute it at
/// its loop `iter` (ComputeAtStep): the target itself, or the consumer computed at a loop of the
/// target at or inside `iter`. -1 otherwise.
int compute_at_consumer(const State& s, int id, int target, int iter);

/// Whether stage `id` writes one of the DAG's outputs.
bool is_output_stage(const State& s, int id);

}  // namespace kiln::state
