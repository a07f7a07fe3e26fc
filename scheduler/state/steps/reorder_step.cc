#include "scheduler/state/steps/reorder_step.h"

#include <fmt/format.h>

namespace kiln::state {

void ReorderStep::apply_to(State& s) const {
  const Stage& cst = schedulable_stage(s, stage_id, "reorder");
  if (after_ids.size() != cst.iters.size())
    throw ScheduleError(fmt::format("reorder: stage '{}' has {} loops, the order names {}", cst.name(), cst.iters.size(), after_ids.size()));
  std::vector<bool> used(cst.iters.size(), false);
  for (int i : after_ids) {
    check_iter(cst, i, "reorder");
    if (used[static_cast<size_t>(i)]) throw ScheduleError(fmt::format("reorder: stage '{}': loop {} appears twice", cst.name(), i));
    used[static_cast<size_t>(i)] = true;
  }
  Stage& st = s.mutable_stage(stage_id);
  std::vector<Iterator> order;
  for (int i : after_ids) order.push_back(st.iters[static_cast<size_t>(i)]);
  st.iters = std::move(order);
}

std::string ReorderStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  std::string names;
  for (int i : after_ids) names += (names.empty() ? "" : ", ") + st.node_of(i).name;
  return fmt::format("{}.reorder({})", st.name(), names);
}

}  // namespace kiln::state
