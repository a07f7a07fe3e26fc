#include "scheduler/state/steps/rfactor_step.h"

#include <fmt/format.h>

#include <map>

#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/steps/attachments.h"
#include "scheduler/state/steps/stage_insertion.h"
#include "scheduler/te/substitute.h"

namespace kiln::state {
namespace {

void check_rfactor(const State& s, const Stage& st, int stage_id, int iter_id, int factor_iter_id) {
  const char* step = "rfactor";
  check_iter(st, iter_id, step);
  const IterNode& n = st.node_of(iter_id);
  if (n.kind != IteratorKind::Reduction)
    throw ScheduleError(fmt::format("{}: stage '{}': loop '{}' is not a reduction loop", step, st.name(), n.name));
  const int rank = static_cast<int>(st.op->axes.size());
  if (factor_iter_id < 0 || factor_iter_id > rank)
    throw ScheduleError(fmt::format("{}: stage '{}': factor axis position {} outside 0..{}", step, st.name(), factor_iter_id, rank));
  for (const IterRelation& r : st.relations)
    for (int in : r.in)
      if (st.nodes[static_cast<size_t>(in)].kind != IteratorKind::Reduction)
        throw ScheduleError(fmt::format("{}: stage '{}': spatial loop '{}' was split or fused; only reduction loops may be",
                                        step, st.name(), st.nodes[static_cast<size_t>(in)].name));
  for (const Iterator& it : st.iters)
    if (st.nodes[static_cast<size_t>(it.node)].extent < 0)
      throw ScheduleError(fmt::format("{}: stage '{}': loop '{}' has an unchosen split length", step, st.name(),
                                      st.nodes[static_cast<size_t>(it.node)].name));
  check_no_annotations(st, step);
  if (has_attached(s, stage_id))
    throw ScheduleError(fmt::format("{}: stages are computed inside '{}'", step, st.name()));
}

// The condition that every split of a reduction loop that does not divide stays inside its parent:
// past the end the loop must add the reducer's identity, or (for an inner split) count a value twice.
te::Expr split_guard(const Stage& st, const std::vector<te::Expr>& values) {
  te::Expr guard;
  for (const IterRelation& r : st.relations) {
    if (r.kind != IterRelation::Split) continue;
    const int64_t parent = st.nodes[static_cast<size_t>(r.in[0])].extent;
    int64_t covered = 1;
    for (int o : r.out) covered *= st.nodes[static_cast<size_t>(o)].extent;
    if (covered == parent) continue;
    te::Expr inside = values[static_cast<size_t>(r.in[0])] < te::int_imm(parent);
    guard = guard ? (guard && inside) : inside;
  }
  return guard;
}

}  // namespace

void RfactorStep::apply_to(State& s) const {
  const Stage& st = schedulable_stage(s, stage_id, "rfactor");
  check_rfactor(s, st, stage_id, iter_id, factor_iter_id);
  const te::Stage& old = *st.op;
  const size_t rank = old.axes.size();
  const IterNode& factor_node = st.node_of(iter_id);

  // Loop variables of the new stage: the output axes (fresh), the factor axis at its position, and
  // one reduction variable per remaining reduction loop of `st`, in loop order.
  std::vector<te::Expr> leaf_vars(st.nodes.size());
  std::vector<std::string> axis_names;
  for (const te::Expr& a : old.axes) axis_names.push_back(a->name);
  std::vector<te::Expr> rf_axes = fresh_vars(axis_names);
  for (size_t k = 0; k < rank; ++k) leaf_vars[k] = rf_axes[k];
  const te::Expr factor_var = te::var(factor_node.name);
  leaf_vars[static_cast<size_t>(st.iters[static_cast<size_t>(iter_id)].node)] = factor_var;
  std::vector<te::IterVar> rf_reduce;
  for (size_t i = 0; i < st.iters.size(); ++i) {
    const int node = st.iters[i].node;
    const IterNode& n = st.nodes[static_cast<size_t>(node)];
    if (n.kind != IteratorKind::Reduction || static_cast<int>(i) == iter_id) continue;
    rf_reduce.push_back({te::var(n.name), n.extent});
    leaf_vars[static_cast<size_t>(node)] = rf_reduce.back().var;
  }
  const std::vector<te::Expr> values = node_values(st, leaf_vars);
  std::map<const te::ExprNode*, te::Expr> roots;
  for (size_t k = 0; k < rank; ++k) roots[old.axes[k].get()] = values[k];
  for (size_t k = 0; k < old.reduce_axes.size(); ++k) roots[old.reduce_axes[k].var.get()] = values[rank + k];

  auto rf = std::make_shared<te::Stage>();
  rf->name = unused_stage_name(s, st.name() + ".rf");
  rf->tag = old.tag;
  rf->dtype = old.dtype;
  rf->shape = old.shape;
  rf->shape.insert(rf->shape.begin() + factor_iter_id, factor_node.extent);
  rf->axes = rf_axes;
  rf->axes.insert(rf->axes.begin() + factor_iter_id, factor_var);
  const te::Expr identity = te::reducer_identity(old.reducer, old.dtype);
  rf->body = te::substitute(old.body, roots);
  if (te::Expr guard = split_guard(st, values)) rf->body = te::select(guard, rf->body, identity);
  if (!rf_reduce.empty()) {  // with no reduction loop left the partial results are plain values
    rf->reducer = old.reducer;
    rf->reduce_axes = std::move(rf_reduce);
    rf->init = identity;
  }
  Stage rf_stage = new_compute_stage(rf, "global");

  // The stage now reduces the factor axis of the new stage, from its own start value.
  auto final_op = std::make_shared<te::Stage>();
  final_op->name = st.name();
  final_op->tag = old.tag;
  final_op->dtype = old.dtype;
  final_op->shape = old.shape;
  final_op->axes = fresh_vars(axis_names);
  const te::Expr r = te::var(factor_node.name);
  final_op->reduce_axes = {{r, factor_node.extent}};
  final_op->reducer = old.reducer;
  std::map<const te::ExprNode*, te::Expr> axes_map;
  for (size_t k = 0; k < rank; ++k) axes_map[old.axes[k].get()] = final_op->axes[k];
  final_op->init = te::substitute(old.init, axes_map);
  std::vector<te::Expr> index = final_op->axes;
  index.insert(index.begin() + factor_iter_id, r);
  final_op->body = te::load(rf_stage.tensor, std::move(index));

  rebuild_stage(s.mutable_stage(stage_id), std::move(final_op));  // `st` may dangle from here on
  s.insert_stage(stage_id, std::move(rf_stage));
}

std::string RfactorStep::print(const State& s) const {
  const Stage& st = s.stage(stage_id);
  return fmt::format("{}.rfactor({}, {})", st.name(), st.node_of(iter_id).name, factor_iter_id);
}

}  // namespace kiln::state
