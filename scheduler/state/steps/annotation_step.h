/// \file annotation: how one loop runs — parallel over cores, vectorized, unrolled, or bound to a GPU
/// block/thread index.
#pragma once
#include "scheduler/state/step.h"

namespace kiln::state {

/// Record: ["AN", stage_id, iter_id, annotation] with TVM's annotation numbers (state.h).
struct AnnotationStep : Step {
  AnnotationStep(int stage_id, int iter_id, IteratorAnnotation annotation)
      : Step(stage_id), iter_id(iter_id), annotation(annotation) {}
  const char* prefix() const override { return "AN"; }
  void apply_to(State& s) const override;
  nlohmann::json to_json() const override { return {"AN", stage_id, iter_id, static_cast<int>(annotation)}; }
  std::string print(const State& s) const override;
  static StepRef from_json(const nlohmann::json& j);

  int iter_id;
  IteratorAnnotation annotation;
};

}  // namespace kiln::state
