#include "scheduler/state/steps/cache_steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "scheduler/state/steps/attachments.h"
#include "scheduler/state/steps/stage_insertion.h"
#include "scheduler/te/substitute.h"

namespace kiln::state {
namespace {

std::vector<std::string> copy_axis_names(size_t rank) {
  std::vector<std::string> names;
  for (size_t k = 0; k < rank; ++k) names.push_back(fmt::format("ax{}", k));
  return names;
}

// out[ax...] = source[ax...]: the op of a stage that only copies a tensor (the cache-read stage, and
// the stage a cache-write leaves behind).
std::shared_ptr<te::Stage> copy_op(const std::string& name, const te::TensorRef& source) {
  auto op = std::make_shared<te::Stage>();
  op->name = name;
  op->tag = "injective";
  op->dtype = source->dtype;
  op->shape = source->shape;
  op->axes = fresh_vars(copy_axis_names(source->shape.size()));
  op->body = te::load(source, op->axes);
  return op;
}

bool reads_directly(const te::Stage& op, const te::TensorNode* t) {
  bool reads = false;
  auto check = [&](const te::Expr& l) { reads = reads || l->tensor.get() == t; };
  te::visit_loads(op.body, check);
  te::visit_loads(op.init, check);
  return reads;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

void CacheReadStep::apply_to(State& s) const {
  const char* step = "cache_read";
  if (stage_id < 0 || static_cast<size_t>(stage_id) >= s.stages().size())
    throw ScheduleError(fmt::format("{}: stage {} does not exist (the state has {} stages)", step, stage_id, s.stages().size()));
  const Stage& src = s.stage(stage_id);
  if (src.compute_at == ComputeAtKind::Inlined)
    throw ScheduleError(fmt::format("{}: stage '{}' is inlined and has no buffer to read", step, src.name()));
  if (scope.empty()) throw ScheduleError(fmt::format("{}: stage '{}': empty scope", step, src.name()));
  if (reader_stage_ids.empty()) throw ScheduleError(fmt::format("{}: stage '{}': no readers", step, src.name()));
  for (size_t k = 0; k < reader_stage_ids.size(); ++k) {
    const int r = reader_stage_ids[k];
    const Stage& reader = schedulable_stage(s, r, step);
    const auto seen_end = reader_stage_ids.begin() + static_cast<std::ptrdiff_t>(k);
    if (std::find(reader_stage_ids.begin(), seen_end, r) != seen_end)
      throw ScheduleError(fmt::format("{}: stage '{}': reader '{}' is listed twice", step, src.name(), reader.name()));
    if (!reads_directly(*reader.op, src.tensor.get()))
      throw ScheduleError(fmt::format("{}: stage '{}' is not read by '{}'", step, src.name(), reader.name()));
  }

  // Build everything first, then mutate: a failed check above leaves `s` as it was.
  const std::string name = unused_stage_name(s, src.name() + "." + scope);
  Stage cache = new_compute_stage(copy_op(name, src.tensor), scope);
  const te::TensorNode* old_tensor = src.tensor.get();
  const te::TensorRef new_tensor = cache.tensor;
  auto redirect = [&](const te::Expr& load) -> te::Expr {
    return load->tensor.get() == old_tensor ? te::load(new_tensor, load->args) : nullptr;
  };
  std::map<int, std::shared_ptr<const te::Stage>> new_ops;
  for (int r : reader_stage_ids) {
    auto op = std::make_shared<te::Stage>(*s.stage(r).op);  // the old op may be shared with other states
    op->body = te::rewrite_loads(op->body, redirect);
    op->init = te::rewrite_loads(op->init, redirect);
    new_ops[r] = std::move(op);
  }
  for (auto& [r, op] : new_ops) s.mutable_stage(r).op = std::move(op);
  s.insert_stage(stage_id + 1, std::move(cache));
}

std::string CacheReadStep::print(const State& s) const {
  std::string readers;
  for (int r : reader_stage_ids) readers += (readers.empty() ? "" : ", ") + s.stage(r).name();
  return fmt::format("{}.cache_read({}, [{}])", s.stage(stage_id).name(), quoted(scope), readers);
}

void CacheWriteStep::apply_to(State& s) const {
  const char* step = "cache_write";
  const Stage& st = schedulable_stage(s, stage_id, step);
  if (st.compute_at == ComputeAtKind::Inlined) throw ScheduleError(fmt::format("{}: stage '{}' is inlined", step, st.name()));
  if (scope.empty()) throw ScheduleError(fmt::format("{}: stage '{}': empty scope", step, st.name()));
  bool pristine = st.relations.empty() && st.iters.size() == static_cast<size_t>(st.num_roots);
  for (size_t i = 0; pristine && i < st.iters.size(); ++i) pristine = st.iters[i].node == static_cast<int>(i);
  if (!pristine)
    throw ScheduleError(fmt::format("{}: stage '{}': its loops were already split, fused or reordered", step, st.name()));
  check_no_annotations(st, step);
  if (has_attached(s, stage_id))
    throw ScheduleError(fmt::format("{}: stages are computed inside '{}'; cache_write must come first", step, st.name()));

  // The cache stage computes what the stage computed, over variables of its own.
  const te::Stage& old = *st.op;
  auto cached = std::make_shared<te::Stage>(old);
  cached->name = unused_stage_name(s, st.name() + "." + scope);
  std::map<const te::ExprNode*, te::Expr> fresh;
  auto renew = [&](te::Expr& v) {
    te::Expr renewed = te::var(v->name);
    fresh[v.get()] = renewed;
    v = renewed;
  };
  for (te::Expr& a : cached->axes) renew(a);
  for (te::IterVar& r : cached->reduce_axes) renew(r.var);
  cached->body = te::substitute(old.body, fresh);
  cached->init = te::substitute(old.init, fresh);
  Stage cache = new_compute_stage(cached, scope);

  // The stage itself now copies the cache; its consumers keep reading its identity tensor.
  auto copy = copy_op(st.name(), cache.tensor);
  rebuild_stage(s.mutable_stage(stage_id), std::move(copy));  // `st` may dangle from here on
  s.insert_stage(stage_id, std::move(cache));
}

std::string CacheWriteStep::print(const State& s) const {
  return fmt::format("{}.cache_write({})", s.stage(stage_id).name(), quoted(scope));
}

}  // namespace kiln::state
