/// \file split: one loop becomes several nested loops. The base of tiling; lengths may be unchosen in a
/// sketch (filled by the init-population rules). Extents need not divide: the remainder is guarded.
#pragma once
#include <optional>
#include <vector>

#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["SP", stage_id, iter_id, extent, [lengths...], inner_to_outer]. With inner_to_outer the
/// lengths are those of the inner loops (outer to inner) and the outermost loop takes the rest; without
/// it they are the outer loops' and the innermost takes the rest. `extent` is the loop's extent when
/// the step was made (informative; replay uses the current one).
struct SplitStep : Step {
  SplitStep(int stage_id, int iter_id, int64_t extent, std::vector<std::optional<int64_t>> lengths, bool inner_to_outer = true)
      : Step(stage_id), iter_id(iter_id), extent(extent), lengths(std::move(lengths)), inner_to_outer(inner_to_outer) {}
  const char* prefix() const override { return "SP"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override;
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j);

  int iter_id;
  int64_t extent;
  std::vector<std::optional<int64_t>> lengths;
  bool inner_to_outer;
};

/// Splits loop `iter_id` of `stage_id` with `lengths` (shared by the follow-split steps).
void apply_split(State& s, int stage_id, int iter_id, const std::vector<std::optional<int64_t>>& lengths,
                 bool inner_to_outer, const char* step_name);

/// JSON of optional lengths: null for an unchosen one.
nlohmann::json lengths_to_json(const std::vector<std::optional<int64_t>>& lengths);
std::vector<std::optional<int64_t>> lengths_from_json(const nlohmann::json& j);

}  // namespace kiln::state
