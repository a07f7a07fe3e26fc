#include "scheduler/state/steps/compute_location_steps.h"

#include <fmt/format.h>

#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/steps/attachments.h"
#include "scheduler/te/substitute.h"

namespace kiln::state {

bool is_output_stage(const State& s, int id) {
  const te::TensorNode* t = s.stage(id).tensor.get();
  for (const te::TensorRef& o : s.dag().outputs)
    if (o.get() == t) return true;
  return false;
}

namespace {

// Whether `inner` is computed (transitively) inside a loop of `outer`.
bool nested_in(const State& s, int inner, int outer) {
  for (int cur = inner, guard = 0; guard <= static_cast<int>(s.stages().size()); ++guard) {
    const Stage& st = s.stage(cur);
    if (st.compute_at != ComputeAtKind::Iter) return false;
    if (st.attach_stage == outer) return true;
    cur = st.attach_stage;
  }
  return true;  // a cycle: treat as nested so the caller refuses
}

}  // namespace

int compute_at_consumer(const State& s, int id, int target, int iter) {
  const std::vector<int> consumers = consumers_through_inlined(s, id);
  if (consumers.size() != 1) return -1;
  const int c = consumers[0];
  if (c == target) return c;
  const Stage& cs = s.stage(c);
  if (cs.compute_at != ComputeAtKind::Iter || cs.attach_stage != target) return -1;
  const int at = s.stage(target).iter_of_node(cs.attach_node);
  return at >= iter ? c : -1;
}

void ComputeAtStep::apply_to(State& s) const {
  const Stage& st = schedulable_stage(s, stage_id, "compute_at");
  const Stage& target = schedulable_stage(s, target_stage_id, "compute_at");
  check_iter(target, target_iter_id, "compute_at");
  if (is_output_stage(s, stage_id)) throw ScheduleError(fmt::format("compute_at: stage '{}' is an output", st.name()));
  if (target.compute_at == ComputeAtKind::Inlined)
    throw ScheduleError(fmt::format("compute_at: target '{}' is inlined", target.name()));
  if (target_stage_id == stage_id || nested_in(s, target_stage_id, stage_id))
    throw ScheduleError(fmt::format("compute_at: '{}' is computed inside '{}'", target.name(), st.name()));
  const int consumer = compute_at_consumer(s, stage_id, target_stage_id, target_iter_id);
  if (consumer < 0)
    throw ScheduleError(fmt::format("compute_at: '{}' is not the only consumer of '{}', nor computed in it inside that loop",
                                    target.name(), st.name()));
  bool in_init = false;
  te::visit_loads(Inliner(s).expand(s.stage(consumer).op->init), [&](const te::Expr& l) { in_init = in_init || l->tensor == st.tensor; });
  if (in_init)
    throw ScheduleError(fmt::format("compute_at: '{}' reads '{}' in its reduction's start value", s.stage(consumer).name(), st.name()));
  const int node = target.iters[static_cast<size_t>(target_iter_id)].node;
  Stage& m = s.mutable_stage(stage_id);
  m.compute_at = ComputeAtKind::Iter;
  m.attach_stage = target_stage_id;
  m.attach_node = node;
}

std::string ComputeAtStep::print(const State& s) const {
  const Stage& target = s.stage(target_stage_id);
  return fmt::format("{}.compute_at({}, {})", s.stage(stage_id).name(), target.name(), target.node_of(target_iter_id).name);
}

void ComputeInlineStep::apply_to(State& s) const {
  const Stage& st = schedulable_stage(s, stage_id, "compute_inline");
  if (st.op->reducer != te::Reducer::None) throw ScheduleError(fmt::format("compute_inline: stage '{}' is a reduction", st.name()));
  if (is_output_stage(s, stage_id)) throw ScheduleError(fmt::format("compute_inline: stage '{}' is an output", st.name()));
  if (has_attached(s, stage_id)) throw ScheduleError(fmt::format("compute_inline: stages are computed inside '{}'", st.name()));
  for (int c : consumers_through_inlined(s, stage_id))
    if (s.stage(c).kind != StageKind::Compute)
      throw ScheduleError(fmt::format("compute_inline: '{}' is read by the runtime kernel of '{}'", st.name(), s.stage(c).name()));
  Stage& m = s.mutable_stage(stage_id);
  m.compute_at = ComputeAtKind::Inlined;
  m.attach_stage = m.attach_node = -1;
}

void ComputeRootStep::apply_to(State& s) const {
  schedulable_stage(s, stage_id, "compute_root");
  Stage& m = s.mutable_stage(stage_id);
  m.compute_at = ComputeAtKind::Root;
  m.attach_stage = m.attach_node = -1;
}

}  // namespace kiln::state
