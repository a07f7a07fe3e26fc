#include "scheduler/state/steps/stage_insertion.h"

#include <fmt/format.h>

namespace kiln::state {

std::string unused_stage_name(const State& s, const std::string& base) {
  std::string name = base;
  for (int k = 1; s.stage_id(name) >= 0; ++k) name = fmt::format("{}.{}", base, k);
  return name;
}

std::vector<te::Expr> fresh_vars(const std::vector<std::string>& names) {
  std::vector<te::Expr> vars;
  vars.reserve(names.size());
  for (const std::string& n : names) vars.push_back(te::var(n));
  return vars;
}

Stage new_compute_stage(std::shared_ptr<const te::Stage> op, const std::string& scope) {
  te::TensorRef identity = te::placeholder(op->name, op->dtype, op->shape);
  Stage st = make_stage(std::move(identity), std::move(op));
  st.scope = scope;
  return st;
}

void rebuild_stage(Stage& st, std::shared_ptr<const te::Stage> op) {
  Stage rebuilt = make_stage(st.tensor, std::move(op));
  rebuilt.scope = st.scope;
  rebuilt.compute_at = st.compute_at;
  rebuilt.attach_stage = st.attach_stage;
  rebuilt.attach_node = st.attach_node;
  rebuilt.storage_align = st.storage_align;
  st = std::move(rebuilt);
}

void check_no_annotations(const Stage& st, const char* step_name) {
  for (size_t i = 0; i < st.iters.size(); ++i) {
    const Iterator& it = st.iters[i];
    if (it.annotation != IteratorAnnotation::None || it.auto_unroll_max_step != 0)
      throw ScheduleError(fmt::format("{}: stage '{}': loop '{}' is annotated; the step rebuilds the stage's loops and would drop it",
                                      step_name, st.name(), st.node_of(static_cast<int>(i)).name));
  }
}

}  // namespace kiln::state
