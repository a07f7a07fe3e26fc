#include "scheduler/state/steps/rfactor_step.h"

namespace kiln::state {
void RfactorStep::apply_to(State&) const { throw ScheduleError("rfactor: not implemented yet"); }
std::string RfactorStep::print(const State& s) const { return s.stage(stage_id).name() + ".rfactor()"; }
}  // namespace kiln::state
