#include "scheduler/state/steps/cache_steps.h"

namespace kiln::state {
// Implemented in the next change.
void CacheReadStep::apply_to(State&) const { throw ScheduleError("cache_read: not implemented yet"); }
std::string CacheReadStep::print(const State& s) const { return s.stage(stage_id).name() + ".cache_read(" + scope + ")"; }
void CacheWriteStep::apply_to(State&) const { throw ScheduleError("cache_write: not implemented yet"); }
std::string CacheWriteStep::print(const State& s) const { return s.stage(stage_id).name() + ".cache_write(" + scope + ")"; }
}  // namespace kiln::state
