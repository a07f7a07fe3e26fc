/// \file follow-split and follow-fused-split: split a loop the way an earlier split step did, so a
/// consumer's tiles line up with its producer's (a cache-write stage and its output, fused stages).
/// Because they refer to the earlier step, mutating that step's lengths moves both.
#pragma once
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["FSP", stage_id, iter_id, src_step_id, n_split]. Splits into n_split + 1 loops with the
/// first n_split - 1 lengths of split step `src_step_id` and, last, the product of the rest.
struct FollowSplitStep : Step {
  FollowSplitStep(int stage_id, int iter_id, int src_step_id, int n_split)
      : Step(stage_id), iter_id(iter_id), src_step_id(src_step_id), n_split(n_split) {}
  const char* prefix() const override { return "FSP"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"FSP", stage_id, iter_id, src_step_id, n_split}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<FollowSplitStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<int>(), j.at(4).get<int>());
  }
  std::vector<std::optional<int64_t>> lengths(const State& s) const;

  int iter_id, src_step_id, n_split;
};

/// Record: ["FFSP", stage_id, iter_id, [src_step_ids], level, factor_or_nparts]. Splits in two with the
/// product of the level-th lengths of the source split steps as the inner length (factor_or_nparts)
/// or as the outer loop's extent.
struct FollowFusedSplitStep : Step {
  FollowFusedSplitStep(int stage_id, int iter_id, std::vector<int> src_step_ids, int level, bool factor_or_nparts)
      : Step(stage_id), iter_id(iter_id), src_step_ids(std::move(src_step_ids)), level(level), factor_or_nparts(factor_or_nparts) {}
  const char* prefix() const override { return "FFSP"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override {
    return {"FFSP", stage_id, iter_id, src_step_ids, level, factor_or_nparts ? 1 : 0};
  }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<FollowFusedSplitStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<std::vector<int>>(),
                                                  j.at(4).get<int>(), j.at(5).get<int>() != 0);
  }
  std::optional<int64_t> length(const State& s) const;

  int iter_id;
  std::vector<int> src_step_ids;
  int level;
  bool factor_or_nparts;
};

}  // namespace kiln::state
