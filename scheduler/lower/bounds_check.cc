#include "scheduler/lower/bounds_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

#include "scheduler/state/index_interval.h"
#include "scheduler/te/affine.h"
#include "scheduler/te/compute.h"
#include "scheduler/lower/z3_terms.h"

namespace kiln::lower {
namespace {

using te::ExprOp;

// The interval of `index` over the loops in `ranges`, on its affine form; nullopt when some atom has
// no bounds the interval analysis knows.
std::optional<std::pair<int64_t, int64_t>> affine_interval(const Expr& index, const state::RangeMap& ranges) {
  if (!is_integer(index->dtype) || index->dtype == DType::Bool) return std::nullopt;
  const te::Affine a = te::affine_form(index);
  int64_t lo = a.constant, hi = a.constant;
  for (const auto& [atom, c] : a.terms) {
    if (c == 0) continue;
    auto in = state::index_interval(atom, ranges);
    if (!in || !in->base.empty()) return std::nullopt;
    lo += c > 0 ? c * in->lo : c * in->hi;
    hi += c > 0 ? c * in->hi : c * in->lo;
  }
  return std::make_pair(lo, hi);
}

class Checker {
 public:
  std::optional<BoundsViolation> found;
  int lanes = 64;
  int64_t own_stack = 0, task_stack = 0, largest_task_stack = 0;  // bytes of locals

  void stmt(const Stmt& s) {
    if (!s || found) return;
    switch (s->kind) {
      case StmtKind::For: {
        ranges_[s->var.get()] = s->extent;
        loops_.push_back(s);
        const bool task = s->for_kind == ForKind::Parallel && parallel_depth_++ == 0;
        if (task) task_stack = 0;
        vectorized_depth_ += s->for_kind == ForKind::Vectorized;
        stmt(s->body[0]);
        vectorized_depth_ -= s->for_kind == ForKind::Vectorized;
        parallel_depth_ -= s->for_kind == ForKind::Parallel;
        if (task) largest_task_stack = std::max(largest_task_stack, task_stack);
        loops_.pop_back();
        ranges_.erase(s->var.get());
        return;
      }
      case StmtKind::Store:
        expr(s->index);
        expr(s->value);
        access("store", s->buffer->name, s->buffer->size, s->index);
        return;
      case StmtKind::IfThenElse:
        expr(s->cond);
        guards_.push_back({s->cond, true});
        stmt(s->body[0]);
        guards_.back().second = false;
        stmt(s->body.size() > 1 ? s->body[1] : nullptr);
        guards_.pop_back();
        return;
      case StmtKind::Allocate: {
        // Every local lives in its function's frame for the whole call (codegen allocates them all at
        // entry), one copy per lane inside a vectorized loop, one per thread of a GPU block for a
        // per-thread buffer (its threads run one after another on a CPU).
        const int64_t bytes = s->buffer->size * static_cast<int64_t>(dtype_size(s->buffer->dtype)) *
                              (vectorized_depth_ > 0 ? lanes : 1) *
                              (s->buffer->scope == BufferScope::GpuPerThread ? s->buffer->threads : 1);
        (parallel_depth_ > 0 ? task_stack : own_stack) += bytes;
        for (const Stmt& b : s->body) stmt(b);
        return;
      }
      case StmtKind::Block:
        for (const Stmt& b : s->body) stmt(b);
        return;
      case StmtKind::ExternCall:
      case StmtKind::Prefetch:  // a runtime kernel checks its own sizes; a prefetch never faults
      case StmtKind::Barrier: return;
    }
  }

 private:
  state::RangeMap ranges_;
  std::vector<Stmt> loops_;
  int parallel_depth_ = 0, vectorized_depth_ = 0;
  std::vector<std::pair<Expr, bool>> guards_;  // condition, and whether the branch is its then-branch

  // The loads of `e`, except under a select's branches: codegen clamps those into their buffer.
  void expr(const Expr& e) {
    if (!e || found) return;
    if (e->op == ExprOp::Select) {
      expr(e->args[0]);
      return;
    }
    for (const Expr& a : e->args) expr(a);
    // A loop-IR load names its buffer through a tensor of shape {size} (loop_ir.h).
    if (e->op == ExprOp::Load && e->args.size() == 1 && e->tensor->shape.size() == 1)
      access("load", e->tensor->name, e->tensor->shape[0], e->args[0]);
  }

  void access(const char* what, const std::string& buffer, int64_t size, const Expr& index) {
    if (found) return;
    auto in = affine_interval(index, ranges_);
    if (in && in->first >= 0 && in->second < size) return;
    prove(what, buffer, size, index);
  }

  void prove(const char* what, const std::string& buffer, int64_t size, const Expr& index) {
    Z3Terms z;
    z3::solver solver(z.ctx);
    for (const Stmt& loop : loops_) {
      z3::expr v = z.ctx.int_const(fmt::format("{}#{}", loop->var->name, z.vars.size()).c_str());
      z.vars.emplace(loop->var.get(), v);
      solver.add(v >= 0 && v < z.ctx.int_val(static_cast<int64_t>(loop->extent)));
    }
    for (const auto& [cond, then_branch] : guards_)
      if (auto c = z.boolean(cond)) solver.add(then_branch ? *c : !*c);
    BoundsViolation v{buffer, size, what, te::print_expr(index), ""};
    auto i = z.integer(index);
    if (!i) {
      v.why = "not an integer expression the check can bound";
      found = v;
      return;
    }
    solver.add(*i < 0 || *i >= z.ctx.int_val(static_cast<int64_t>(size)));
    switch (solver.check()) {
      case z3::unsat: return;  // no loop values leave the buffer
      case z3::sat: {
        const z3::model m = solver.get_model();
        std::string values;
        for (const Stmt& loop : loops_)
          values += fmt::format("{}{} = {}", values.empty() ? "" : ", ", loop->var->name,
                                m.eval(z.vars.at(loop->var.get()), true).to_string());
        v.why = fmt::format("{} make it {}", values.empty() ? "it is" : values, m.eval(*i, true).to_string());
        found = v;
        return;
      }
      case z3::unknown: v.why = "Z3 could not decide (" + solver.reason_unknown() + ")"; found = v; return;
    }
  }
};

}  // namespace

std::optional<BoundsViolation> first_out_of_bounds(const Stmt& body, int64_t max_stack, int lanes) {
  Checker c;
  c.lanes = lanes;
  c.stmt(body);
  if (c.found) return c.found;
  const int64_t stack = c.own_stack + c.largest_task_stack;
  if (stack > max_stack)
    return BoundsViolation{"stack", max_stack, "local buffers", "", fmt::format("{} bytes", stack)};
  return std::nullopt;
}

std::string describe(const BoundsViolation& v) {
  if (v.buffer == "stack" && v.index.empty())
    return fmt::format("its local buffers need {} of stack, over the limit of {} bytes", v.why, v.size);
  return fmt::format("a {} of {} (size {}) at {} may leave it: {}", v.access, v.buffer, v.size, v.index, v.why);
}

void check_bounds(const LoweredFunc& f, int lanes) {
  if (auto v = first_out_of_bounds(f.body, kMaxStackBytes, lanes)) throw BoundsError(f.name + ": " + describe(*v));
}

}  // namespace kiln::lower
