#include "scheduler/state/steps/annotation_step.h"

#include <fmt/format.h>

namespace kiln::state {

void AnnotationStep::apply_to(State& s) const {
  const Stage& cst = schedulable_stage(s, stage_id, "annotation");
  check_iter(cst, iter_id, "annotation");
  const IterNode& n = cst.node_of(iter_id);
  if (n.kind == IteratorKind::Reduction &&
      (annotation == IteratorAnnotation::Vectorize || annotation == IteratorAnnotation::Parallel))
    throw ScheduleError(fmt::format("annotation: stage '{}': cannot {} the reduction loop '{}'", cst.name(),
                                    annotation_name(annotation), n.name));
  if (cst.iters[static_cast<size_t>(iter_id)].annotation != IteratorAnnotation::None && annotation != IteratorAnnotation::None)
    throw ScheduleError(fmt::format("annotation: stage '{}': loop '{}' is already annotated {}", cst.name(), n.name,
                                    annotation_name(cst.iters[static_cast<size_t>(iter_id)].annotation)));
  s.mutable_stage(stage_id).iters[static_cast<size_t>(iter_id)].annotation = annotation;
}

StepRef AnnotationStep::from_json(const nlohmann::json& j) {
  int a = j.at(3).get<int>();
  if (a < 0 || a > static_cast<int>(IteratorAnnotation::Tensorize)) throw ScheduleError(fmt::format("AN: unknown annotation {}", a));
  return std::make_shared<AnnotationStep>(j.at(1).get<int>(), j.at(2).get<int>(), static_cast<IteratorAnnotation>(a));
}

std::string AnnotationStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  return fmt::format("{}.{}({})", st.name(), annotation_name(annotation), st.node_of(iter_id).name);
}

}  // namespace kiln::state
