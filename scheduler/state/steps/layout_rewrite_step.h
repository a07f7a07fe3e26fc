/// \file layout rewrite: a constant operand (a weight) takes the layout in which its reader's loops
/// walk it, fixed when the program is compiled.
///
/// Why: a tiled matmul or convolution reads its weight one small panel per reduction step, a whole row
/// of the tensor apart; in the original layout those rows fall into the same few cache sets, and
/// packing them at run time (a cache-read) costs a copy per tile. A weight is known when the program
/// is compiled, so it can be stored in the order the chosen tiles read it (Ansor's layout rewrite, and
/// what ORT's MLAS does by prepacking). The layout follows from the loops (scheduler/lower/
/// constant_layout.h), so the step has no fields beyond the stage: replaying a record gives the same
/// layout, and a mutated split changes it with the tiles.
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["LR", stage_id], stage_id a constant placeholder.
struct LayoutRewriteStep : Step {
  explicit LayoutRewriteStep(int stage_id) : Step(stage_id) {}
  const char* prefix() const override { return "LR"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"LR", stage_id}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) { return std::make_shared<LayoutRewriteStep>(j.at(1).get<int>()); }
};

}  // namespace kiln::state
