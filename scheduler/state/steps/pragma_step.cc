#include "scheduler/state/steps/pragma_step.h"

#include <fmt/format.h>

namespace kiln::state {

void PragmaStep::apply_to(State& s) const {
  const Stage& cst = schedulable_stage(s, stage_id, "pragma");
  check_iter(cst, iter_id, "pragma");
  const std::string key = "auto_unroll_max_step$";
  int64_t value = -1;
  if (pragma.rfind(key, 0) == 0) {
    try {
      size_t used = 0;
      value = std::stoll(pragma.substr(key.size()), &used);
      if (used != pragma.size() - key.size()) value = -1;
    } catch (const std::exception&) {
      value = -1;
    }
  }
  if (value < 0) throw ScheduleError(fmt::format("pragma: stage '{}': unknown pragma '{}' (kiln knows auto_unroll_max_step$N)", cst.name(), pragma));
  s.mutable_stage(stage_id).iters[static_cast<size_t>(iter_id)].auto_unroll_max_step = value;
}

std::string PragmaStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  return fmt::format("{}.pragma({}, \"{}\")", st.name(), st.node_of(iter_id).name, pragma);
}

}  // namespace kiln::state
