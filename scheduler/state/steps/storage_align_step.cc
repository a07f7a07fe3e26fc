#include "scheduler/state/steps/storage_align_step.h"

#include <fmt/format.h>

namespace kiln::state {

void StorageAlignStep::apply_to(State& s) const {
  const Stage& cst = schedulable_stage(s, stage_id, "storage_align");
  check_iter(cst, iter_id, "storage_align");
  const int node = cst.iters[static_cast<size_t>(iter_id)].node;
  if (node >= static_cast<int>(cst.op->axes.size()))
    throw ScheduleError(fmt::format("storage_align: stage '{}': loop '{}' is not an output axis", cst.name(), cst.node_of(iter_id).name));
  if (factor <= 0 || offset < 0 || offset >= factor)
    throw ScheduleError(fmt::format("storage_align: stage '{}': factor {} and offset {} need 0 <= offset < factor", cst.name(), factor, offset));
  s.mutable_stage(stage_id).storage_align.push_back({node, factor, offset});
}

std::string StorageAlignStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  return fmt::format("{}.storage_align({}, {}, {})", st.name(), st.node_of(iter_id).name, factor, offset);
}

}  // namespace kiln::state
