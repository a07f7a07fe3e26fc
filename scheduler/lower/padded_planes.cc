#include "scheduler/lower/padded_planes.h"
#include "scheduler/lower/lower_dag.h"
#include "scheduler/lower/partition_loops.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "frontend/ir/error.h"
#include "scheduler/state/index_interval.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

using te::ExprOp;

// Whether index `e` is the axis `axis` for every value of the reduction variables: the axis itself,
// floordiv(., 1), or plus a reduction variable of one iteration (`unit`) or 0. A grouped conv whose
// groups have one channel (depthwise) reads channel floordiv(m, 1) + r0 with r0 in [0, 1).
bool is_axis(const Expr& e, const te::ExprNode* axis, const std::set<const te::ExprNode*>& unit) {
  if (e.get() == axis) return true;
  const auto zero = [&](const Expr& x) { return unit.count(x.get()) || (x->op == ExprOp::IntImm && x->int_value == 0); };
  if (e->op == ExprOp::Add)
    return (zero(e->args[1]) && is_axis(e->args[0], axis, unit)) || (zero(e->args[0]) && is_axis(e->args[1], axis, unit));
  if (e->op == ExprOp::FloorDiv && e->args[1]->op == ExprOp::IntImm && e->args[1]->int_value == 1)
    return is_axis(e->args[0], axis, unit);
  return false;
}

// How many leading axes of `reader` read `pad` at the reader's own position only (at most rank - 2).
size_t own_position_axes(const te::Stage& reader, const te::TensorNode* pad) {
  std::set<const te::ExprNode*> unit;
  for (const te::IterVar& r : reader.reduce_axes)
    if (r.extent == 1) unit.insert(r.var.get());
  const size_t rank = reader.axes.size();
  size_t depth = rank < 2 ? 0 : std::min(rank - 2, pad->shape.size());
  te::visit_loads(reader.body, [&](const Expr& l) {
    if (l->tensor.get() != pad) return;
    size_t k = 0;
    while (k < depth && pad->shape[k] == reader.shape[k] && is_axis(l->args[k], reader.axes[k].get(), unit)) ++k;
    depth = k;
  });
  return depth;
}

// The box of a pad stage's axes (from axis `from` on) where its body select(inside, value, fill) reads
// its input: `inside` a conjunction of bounds (axis + c) cmp K, one axis each (nn_lowering.cc's
// window_inside), and `fill` a constant. The plane is then stored as the fill around the box and the
// input inside it, with no condition per element: as a select, every vector costs a clamped load and
// a masked blend, and the 56x56 depthwise layer's planes took as long as the whole copy had. nullopt
// when the body is not of that form.
struct Box {
  std::vector<int64_t> lo, hi;  // per axis from `from`, [lo, hi)
  Expr value, fill;
};
std::optional<Box> input_box(const te::Stage& p, size_t from) {
  const Expr& b = p.body;
  if (b->op != ExprOp::Select) return std::nullopt;
  bool fill_reads = false;
  te::visit_loads(b->args[2], [&](const Expr&) { fill_reads = true; });
  if (fill_reads) return std::nullopt;
  Box box{std::vector<int64_t>(p.axes.size() - from, 0), {}, b->args[1], b->args[2]};
  for (size_t k = from; k < p.axes.size(); ++k) box.hi.push_back(p.shape[k]);
  std::function<bool(const Expr&)> bound = [&](const Expr& c) {
    if (c->op == ExprOp::And) return bound(c->args[0]) && bound(c->args[1]);
    const Expr& rhs = c->args.size() == 2 ? c->args[1] : nullptr;
    if (!rhs || rhs->op != ExprOp::IntImm) return false;
    for (size_t k = from; k < p.axes.size(); ++k) {
      const te::ExprNode* axis = p.axes[k].get();
      if (te::linear_coeff(c->args[0].get(), axis) != std::optional<int64_t>(1)) continue;
      // With the axis at 0 (a range of one value) the bound's left side is its constant c.
      auto at_zero = state::index_interval(c->args[0], {{axis, 1}});
      if (!at_zero || !at_zero->base.empty() || at_zero->lo != at_zero->hi) return false;
      const int64_t K = rhs->int_value - at_zero->lo;  // the bound on the axis itself
      int64_t& lo = box.lo[k - from];
      int64_t& hi = box.hi[k - from];
      switch (c->op) {
        case ExprOp::Ge: lo = std::max(lo, K); return true;
        case ExprOp::Gt: lo = std::max(lo, K + 1); return true;
        case ExprOp::Lt: hi = std::min(hi, K); return true;
        case ExprOp::Le: hi = std::min(hi, K + 1); return true;
        default: return false;
      }
    }
    return false;
  };
  if (!bound(b->args[0])) return std::nullopt;
  return box;
}

// The statements that pad one plane (the pad stage `p`'s axes from d on, at `at_reader` along the
// first d) into `local`.
Stmt plane_fill(const te::Stage& p, size_t d, const std::map<const te::ExprNode*, Expr>& at_reader, const BufferRef& local,
                const std::map<const te::TensorNode*, BufferRef>& buffers) {
  const std::vector<Expr> rest(p.axes.begin() + static_cast<std::ptrdiff_t>(d), p.axes.end());
  const Shape shape(p.shape.begin() + static_cast<std::ptrdiff_t>(d), p.shape.end());
  const size_t n = rest.size();
  // Loops over [lo[k], hi[k]) along each axis k around the store of `value` at the plane's index.
  auto nest = [&](const Expr& value, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
    std::map<const te::ExprNode*, Expr> m = at_reader;
    // An axis of one iteration is its constant, so the bound tests that read it fold.
    for (size_t k = 0; k < n; ++k) m[rest[k].get()] = hi[k] - lo[k] == 1 ? te::int_imm(lo[k]) : rest[k] + lo[k];
    Stmt st = store(local, te::substitute(flat_index(rest, shape), m), flatten_loads(te::substitute(value, m), buffers));
    for (size_t k = n; k-- > 0;)
      if (hi[k] - lo[k] != 1)
        st = for_loop(rest[k], hi[k] - lo[k], k + 1 == n && hi[k] - lo[k] >= 4 ? ForKind::Vectorized : ForKind::Serial, st);
    return st;
  };
  const std::vector<int64_t> zeros(n, 0);
  const std::vector<int64_t> whole(shape.begin(), shape.end());
  std::optional<Box> box = input_box(p, d);
  // No box (an int8 plane of byte quads: four taps, each tested): the loops split where the tests
  // change value, so the rows above and below the input store constants (partition_loops.h).
  if (!box) return partition_guarded_loops(nest(p.body, zeros, whole));
  for (size_t k = 0; k < n; ++k)
    if (box->hi[k] <= box->lo[k]) return nest(box->fill, zeros, whole);
  // The fill outside the box, as one slab per side of each axis: axes before k inside the box, axis k
  // below or above it, axes after k whole. Each element is stored once.
  std::vector<Stmt> parts;
  for (size_t k = 0; k < n; ++k) {
    std::vector<int64_t> lo = box->lo, hi = box->hi;
    std::fill(lo.begin() + static_cast<std::ptrdiff_t>(k) + 1, lo.end(), 0);
    std::copy(whole.begin() + static_cast<std::ptrdiff_t>(k) + 1, whole.end(), hi.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    std::vector<int64_t> below_lo = lo, below_hi = hi, above_lo = lo, above_hi = hi;
    below_lo[k] = 0, below_hi[k] = box->lo[k];
    above_lo[k] = box->hi[k], above_hi[k] = whole[k];
    if (below_hi[k] > 0) parts.push_back(nest(box->fill, below_lo, below_hi));
    if (above_hi[k] > above_lo[k]) parts.push_back(nest(box->fill, above_lo, above_hi));
  }
  parts.push_back(nest(box->value, box->lo, box->hi));
  return block(std::move(parts));
}

// `s` with the body of the loop over `var` run after `before`, inside an allocation of `local`.
// `found` counts such loops.
Stmt with_plane_at(const Stmt& s, const te::ExprNode* var, const BufferRef& local, const Stmt& before, int& found) {
  if (!s) return s;
  auto copy = std::make_shared<StmtNode>(*s);
  for (Stmt& b : copy->body) b = with_plane_at(b, var, local, before, found);
  if (s->kind == StmtKind::For && s->var.get() == var) {
    ++found;
    copy->body[0] = allocate(local, block({before, copy->body[0]}));
  }
  return copy;
}

// `s` reading `to` at index - `offset` wherever it reads (or prefetches) `from` at index.
Stmt redirect_reads(const Stmt& s, const BufferRef& from, const BufferRef& to, const Expr& offset) {
  if (!s) return s;
  auto copy = std::make_shared<StmtNode>(*s);
  const auto moved = [&](const Expr& l) -> Expr { return l->tensor.get() == from->node.get() ? load(to, l->args[0] - offset) : nullptr; };
  for (Expr* e : {&copy->index, &copy->value, &copy->cond})
    if (*e) *e = te::rewrite_loads(*e, moved);
  if (s->kind == StmtKind::Prefetch && s->buffer == from) {
    copy->buffer = to;
    copy->index = copy->index - offset;
  }
  if (s->buffer == from && s->kind != StmtKind::Prefetch)
    throw InternalError("loop IR: '" + from->name + "' is written where it is padded plane by plane");
  for (Stmt& b : copy->body) b = redirect_reads(b, from, to, offset);
  return copy;
}

// Whether loop IR `s` holds the loop over `var`.
bool holds_loop(const Stmt& s, const te::ExprNode* var) {
  if (!s) return false;
  if (s->kind == StmtKind::For && s->var.get() == var) return true;
  for (const Stmt& b : s->body)
    if (holds_loop(b, var)) return true;
  return false;
}

// Whether some parallel loop of `s` is not around the loop over `var` (nor that loop): threads would
// then share one plane, or it would be padded before the parallel loop starts.
bool parallel_off_path(const Stmt& s, const te::ExprNode* var, bool inside = false) {
  if (!s) return false;
  if (s->kind == StmtKind::For && s->var.get() == var) inside = true;
  else if (s->kind == StmtKind::For && s->for_kind == ForKind::Parallel && (inside || !holds_loop(s, var))) return true;
  for (const Stmt& b : s->body)
    if (parallel_off_path(b, var, inside)) return true;
  return false;
}

// How many loops over `var` loop IR `s` has.
int loops_over(const Stmt& s, const te::ExprNode* var) {
  if (!s) return 0;
  int n = s->kind == StmtKind::For && s->var.get() == var ? 1 : 0;
  for (const Stmt& b : s->body) n += loops_over(b, var);
  return n;
}

// Whether the reader's default nest has exactly one loop over its axis `depth - 1`, and no parallel
// loop off its path: where lower_with_padded_plane can put the plane. A reader whose tiles split that
// axis (an NCHW AveragePool over 1024 channels, vectorized along them: a main loop and tails) cannot
// take one; its pad stage is then stored whole.
bool plane_has_one_loop(const te::TensorRef& out, size_t depth, const ScheduleParams& params) {
  std::map<const te::TensorNode*, BufferRef> trial;
  for (const te::TensorRef& in : out->stage->inputs()) trial[in.get()] = make_buffer(in->name, in->dtype, num_elements(in->shape));
  trial[out.get()] = make_buffer(out->name, out->dtype, num_elements(out->shape));
  const te::ExprNode* var = out->stage->axes[depth - 1].get();
  try {
    const Stmt nest = lower_stage_default(out, trial, params);
    return loops_over(nest, var) == 1 && !parallel_off_path(nest, var);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

PaddedPlanePlan plan_padded_planes(const te::ComputeDAG& dag, const ScheduleParams& params) {
  PaddedPlanePlan plan;
  std::map<const te::TensorNode*, std::vector<size_t>> readers;
  for (size_t i = 0; i < dag.tensors.size(); ++i)
    for (const te::TensorRef& in : dag.tensors[i]->stage->inputs()) readers[in.get()].push_back(i);
  std::set<const te::TensorNode*> outputs;
  for (const te::TensorRef& o : dag.outputs) outputs.insert(o.get());
  for (size_t i = 0; i < dag.tensors.size(); ++i) {
    const te::TensorRef& pad = dag.tensors[i];
    const te::Stage& p = *pad->stage;
    const auto& r = readers[pad.get()];
    if (p.is_extern() || p.tag != "pad" || p.reducer != te::Reducer::None || outputs.count(pad.get()) || r.size() != 1) continue;
    const te::Stage& reader = *dag.tensors[r[0]]->stage;
    if (reader.is_extern() || reader.reducer == te::Reducer::None || plan.by_reader.count(r[0])) continue;
    const size_t most = own_position_axes(reader, pad.get());
    const std::optional<size_t> operand = operand_block_axis(reader);
    const int64_t element = static_cast<int64_t>(dtype_size(p.dtype));
    bool spread = false;  // some axis before depth has 4 or more iterations
    for (size_t depth = 1; depth <= most; ++depth) {
      if (operand && *operand < depth) break;
      spread |= reader.shape[depth - 1] >= 4;
      int64_t plane = element;
      for (size_t k = depth; k < pad->shape.size(); ++k) plane *= pad->shape[k];
      if (plane > params.local_plane_bytes || !spread) continue;
      if (!plane_has_one_loop(dag.tensors[r[0]], depth, params)) break;
      plan.by_reader[r[0]] = {i, depth};
      plan.planes.insert(pad.get());
      break;
    }
  }
  return plan;
}

Stmt lower_with_padded_plane(const te::ComputeDAG& dag, size_t reader, const PaddedPlane& plane,
                             const std::map<const te::TensorNode*, BufferRef>& buffers, const ScheduleParams& params,
                             const Epilogue* epilogue) {
  const te::TensorRef& pad = dag.tensors.at(plane.pad_stage);
  const te::TensorRef& out = dag.tensors.at(reader);
  const te::Stage& p = *pad->stage;
  const te::Stage& r = *out->stage;
  const size_t d = plane.depth;
  const Shape plane_shape(pad->shape.begin() + static_cast<std::ptrdiff_t>(d), pad->shape.end());
  BufferRef local = make_buffer(pad->name + ".plane", pad->dtype, num_elements(plane_shape), true);

  // The reader's nest as if the whole pad stage were stored (so its tiles are the usual ones), then
  // reading the plane instead: the whole tensor's index less that of the plane's first element.
  BufferRef whole = make_buffer(pad->name, pad->dtype, num_elements(pad->shape));
  std::map<const te::TensorNode*, BufferRef> with_whole = buffers;
  with_whole[pad.get()] = whole;
  std::vector<Expr> first(r.axes.begin(), r.axes.begin() + static_cast<std::ptrdiff_t>(d));
  first.resize(pad->shape.size(), te::int_imm(0));
  const Expr base = flat_index(first, pad->shape);
  Stmt nest = redirect_reads(lower_stage_default(out, with_whole, params, epilogue), whole, local, base);

  // The plane: the pad stage at the reader's position along the first d axes.
  std::map<const te::ExprNode*, Expr> at_reader;
  for (size_t k = 0; k < d; ++k) at_reader[p.axes[k].get()] = r.axes[k];
  Stmt fill = plane_fill(p, d, at_reader, local, buffers);

  const te::ExprNode* var = r.axes[d - 1].get();
  int found = 0;
  Stmt result = with_plane_at(nest, var, local, fill, found);
  if (found != 1 || parallel_off_path(result, var))
    throw InternalError("stage '" + out->name + "': its padded plane has no single loop to go in (" + std::to_string(found) +
                        " loops over axis " + std::to_string(d - 1) + ")");
  return result;
}

}  // namespace kiln::lower
