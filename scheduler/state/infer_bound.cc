#include "scheduler/state/infer_bound.h"

#include <optional>

#include "scheduler/state/index_interval.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/te/substitute.h"

namespace kiln::state {
namespace {

// Root values of `st` as expressions of its loop variables (regions' starts added).
std::vector<te::Expr> root_values(const Stage& st, const std::vector<te::Expr>& vars, const std::vector<RootRegion>& regions) {
  std::vector<te::Expr> nv = node_values(st, vars);
  std::vector<te::Expr> roots;
  for (int r = 0; r < st.num_roots; ++r) {
    te::Expr v = nv[static_cast<size_t>(r)];
    const te::Expr& start = regions[static_cast<size_t>(r)].start;
    roots.push_back(start ? start + v : v);
  }
  return roots;
}

// The region of `producer` that `reader` reads while the variables in `ranged` run over their
// extents, per dimension. `reader`'s root values are its regions' starts plus its loop variables.
std::vector<RootRegion> read_region(Inliner& inliner, const Stage& producer, const Stage& reader,
                                    const std::vector<te::Expr>& reader_vars, const std::vector<RootRegion>& reader_regions,
                                    const RangeMap& ranged) {
  const Shape& shape = producer.op->shape;
  const size_t rank = shape.size();
  std::vector<RootRegion> full(rank);
  for (size_t d = 0; d < rank; ++d) full[d].extent = shape[d];
  std::vector<te::Expr> roots = root_values(reader, reader_vars, reader_regions);
  std::map<const te::ExprNode*, te::Expr> m;
  for (size_t k = 0; k < reader.op->axes.size(); ++k) m[reader.op->axes[k].get()] = roots[k];
  for (size_t k = 0; k < reader.op->reduce_axes.size(); ++k)
    m[reader.op->reduce_axes[k].var.get()] = roots[reader.op->axes.size() + k];
  te::Expr body = te::substitute(inliner.expand(reader.op->body), m);

  std::vector<std::optional<IndexInterval>> acc(rank);
  std::vector<bool> unbounded(rank, false), seen(rank, false);
  te::visit_loads(body, [&](const te::Expr& load) {
    if (load->tensor.get() != producer.tensor.get()) return;
    for (size_t d = 0; d < rank; ++d) {
      if (unbounded[d]) continue;
      auto iv = index_interval(load->args[d], ranged);
      if (iv && seen[d]) iv = union_interval(*acc[d], *iv);
      if (!iv) unbounded[d] = true;
      else acc[d] = iv;
      seen[d] = true;
    }
  });
  std::vector<RootRegion> out(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (unbounded[d] || !seen[d]) {
      out[d] = full[d];
      continue;
    }
    const IndexInterval& iv = *acc[d];
    if (iv.base.empty()) {
      int64_t lo = std::max<int64_t>(iv.lo, 0), hi = std::min<int64_t>(iv.hi, shape[d] - 1);
      if (hi < lo) hi = lo;  // nothing read: keep one element so the region stays well formed
      out[d].start = lo ? te::int_imm(lo) : nullptr;
      out[d].extent = hi - lo + 1;
      continue;
    }
    int64_t ext = iv.hi - iv.lo + 1;
    if (ext >= shape[d]) {
      out[d] = full[d];
      continue;
    }
    te::Expr start = iv.base.to_expr();
    if (iv.lo) start = start + iv.lo;
    out[d] = {start, ext, true};
  }
  return out;
}

// Adds the loops of `st` from position `from` on to `ranged`; false when one's extent is not chosen yet.
bool range_loops(const Stage& st, size_t from, const std::vector<te::Expr>& vars, RangeMap& ranged) {
  for (size_t i = from; i < st.iters.size(); ++i) {
    const int n = st.iters[i].node;
    const int64_t e = st.nodes[static_cast<size_t>(n)].extent;
    if (e < 0) return false;
    ranged[vars[static_cast<size_t>(n)].get()] = e;
  }
  return true;
}

// The region of stage `id` computed per iteration of the loop it is attached to: what its consumer
// reads there (the target itself, or a stage computed inside the target's loop, all of whose loops
// then run within one iteration).
std::vector<RootRegion> attached_region(const State& s, Inliner& inliner, const Bounds& b, int id,
                                        const std::vector<std::vector<te::Expr>>& node_vars) {
  const Stage& st = b.stages[static_cast<size_t>(id)];
  const auto t = static_cast<size_t>(st.attach_stage);
  const Stage& target = b.stages[t];
  const int pos = target.iter_of_node(st.attach_node);
  if (pos < 0) throw ScheduleError("stage '" + st.name() + "' is attached to a loop '" + target.name() + "' no longer has");
  const int consumer = compute_at_consumer(s, id, st.attach_stage, pos);
  if (consumer < 0)
    throw ScheduleError("stage '" + st.name() + "' is attached to '" + target.name() + "', which neither reads it nor holds its reader there");
  const auto c = static_cast<size_t>(consumer);
  RangeMap ranged;
  bool known = range_loops(target, static_cast<size_t>(pos) + 1, node_vars[t], ranged);
  if (c != t) known = known && range_loops(b.stages[c], 0, node_vars[c], ranged);
  if (!known) {
    std::vector<RootRegion> unknown(st.op->shape.size());
    for (RootRegion& r : unknown) r.extent = -1;
    return unknown;
  }
  return read_region(inliner, st, b.stages[c], node_vars[c], b.regions[c], ranged);
}

}  // namespace

Bounds infer_bounds(const State& s, const std::vector<std::vector<te::Expr>>& node_vars) {
  Bounds b;
  b.stages = s.stages();
  b.regions.resize(b.stages.size());
  Inliner inliner(s);
  for (size_t i = b.stages.size(); i-- > 0;) {
    Stage& st = b.stages[i];
    if (st.kind != StageKind::Compute || st.compute_at == ComputeAtKind::Inlined) continue;
    std::vector<RootRegion> regions;
    if (st.compute_at == ComputeAtKind::Root) {
      for (int r = 0; r < st.num_roots; ++r) regions.push_back({nullptr, st.root_domain[static_cast<size_t>(r)], false});
    } else {
      regions = attached_region(s, inliner, b, static_cast<int>(i), node_vars);
      for (size_t k = 0; k < st.op->reduce_axes.size(); ++k) regions.push_back({nullptr, st.op->reduce_axes[k].extent, false});
    }
    for (int r = 0; r < st.num_roots; ++r) st.nodes[static_cast<size_t>(r)].extent = regions[static_cast<size_t>(r)].extent;
    propagate_extents(st);
    b.regions[i] = std::move(regions);
  }
  return b;
}

std::vector<Stage> infer_bound(const State& s) { return infer_bounds(s, make_node_vars(s)).stages; }

}  // namespace kiln::state
