/// \file storage-align: pads the stride of one dimension of a stage's buffer (factor * k + offset), to
/// keep rows of a local tile from sharing cache sets or bank lines.
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["SA", stage_id, iter_id, factor, offset]. `iter_id` must be one of the stage's output axes
/// (a root spatial loop); the stride of that dimension is padded. Only buffers that lowering allocates
/// itself (stages computed at a loop) have a layout to change; a root stage keeps the model's layout.
struct StorageAlignStep : Step {
  StorageAlignStep(int stage_id, int iter_id, int64_t factor, int64_t offset)
      : Step(stage_id), iter_id(iter_id), factor(factor), offset(offset) {}
  const char* prefix() const override { return "SA"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"SA", stage_id, iter_id, factor, offset}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j) {
    return std::make_shared<StorageAlignStep>(j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<int64_t>(), j.at(4).get<int64_t>());
  }

  int iter_id;
  int64_t factor, offset;
};

}  // namespace kiln::state
