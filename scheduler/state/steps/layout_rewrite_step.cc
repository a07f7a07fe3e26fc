#include "scheduler/state/steps/layout_rewrite_step.h"

#include <fmt/format.h>

namespace kiln::state {

void LayoutRewriteStep::apply_to(State& s) const {
  if (stage_id < 0 || static_cast<size_t>(stage_id) >= s.stages().size())
    throw ScheduleError(fmt::format("layout rewrite: stage {} does not exist (the state has {} stages)", stage_id, s.stages().size()));
  const Stage& st = s.stage(stage_id);
  if (st.kind != StageKind::Placeholder || !st.tensor->constant)
    throw ScheduleError(fmt::format("layout rewrite: '{}' is not a constant input (only a weight's layout is chosen when compiling)", st.name()));
  if (st.layout_rewrite) throw ScheduleError(fmt::format("layout rewrite: '{}' is rewritten already", st.name()));
  s.mutable_stage(stage_id).layout_rewrite = true;
}

std::string LayoutRewriteStep::print(const State& s) const {
  return fmt::format("{}.layout_rewrite()", s.stage(stage_id).name());
}

}  // namespace kiln::state
