#include "scheduler/lower/bounds_check.h"

#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <map>
#include <vector>

#include "scheduler/state/index_interval.h"
#include "scheduler/te/affine.h"
#include "scheduler/te/compute.h"

namespace kiln::lower {
namespace {

using te::ExprOp;

// Z3 terms of loop-IR expressions: loop variables are the constants declared for them, anything the
// translation cannot express exactly (a loaded value, an unknown variable) is an unconstrained unknown,
// so a proof never rests on a guess about it.
class Z3Terms {
 public:
  z3::context ctx;
  std::map<const te::ExprNode*, z3::expr> vars;

  // One unknown per distinct expression: two reads of sequence_lens[i0] in one index are one value, so
  // `i < n ? n - 1 - i : i` stays provable although n itself is unknown.
  z3::expr unknown(const te::Expr& e, bool boolean = false) {
    for (const auto& [x, term] : unknowns_)
      if (te::same_expr(x, e)) return term;
    const std::string name = fmt::format("free{}", unknowns_.size());
    z3::expr t = boolean ? ctx.bool_const(name.c_str()) : ctx.int_const(name.c_str());
    unknowns_.emplace_back(e, t);
    return t;
  }

  // An integer term; nullopt when `e` is not an integer expression (a float compared in a guard).
  std::optional<z3::expr> integer(const te::Expr& e) {
    if (!e || !is_integer(e->dtype) || e->dtype == DType::Bool) return std::nullopt;
    switch (e->op) {
      case ExprOp::IntImm: return ctx.int_val(static_cast<int64_t>(e->int_value));
      case ExprOp::Var: {
        auto it = vars.find(e.get());
        return it != vars.end() ? it->second : unknown(e);
      }
      case ExprOp::Cast: {
        if (!is_integer(e->args[0]->dtype) || e->args[0]->dtype == DType::Bool) return unknown(e);
        return integer(e->args[0]);
      }
      case ExprOp::Neg: {
        auto a = integer(e->args[0]);
        return a ? std::optional<z3::expr>(-*a) : unknown(e);
      }
      case ExprOp::Select: {
        auto a = integer(e->args[1]), b = integer(e->args[2]);
        if (!a || !b) return unknown(e);
        return z3::ite(condition(e->args[0]), *a, *b);
      }
      default: break;
    }
    if (!te::is_binary(e->op) || te::is_comparison(e->op)) return unknown(e);
    auto a = integer(e->args[0]), b = integer(e->args[1]);
    if (!a || !b) return unknown(e);
    const bool positive_constant = e->args[1]->op == ExprOp::IntImm && e->args[1]->int_value > 0;
    switch (e->op) {
      case ExprOp::Add: return *a + *b;
      case ExprOp::Sub: return *a - *b;
      case ExprOp::Mul: return *a * *b;
      case ExprOp::Min: return z3::ite(*a <= *b, *a, *b);
      case ExprOp::Max: return z3::ite(*a >= *b, *a, *b);
      // SMT-LIB's div and mod are Euclidean: floor division and a non-negative remainder for a
      // positive divisor, as floordiv and floormod.
      case ExprOp::FloorDiv:
        if (positive_constant) return z3::expr(ctx, Z3_mk_div(ctx, *a, *b));
        return unknown(e);
      case ExprOp::FloorMod:
        if (positive_constant) return z3::expr(ctx, Z3_mk_mod(ctx, *a, *b));
        return unknown(e);
      case ExprOp::Div:  // truncating: floor division where the dividend is not negative
        if (positive_constant) return z3::ite(*a >= 0, z3::expr(ctx, Z3_mk_div(ctx, *a, *b)), -z3::expr(ctx, Z3_mk_div(ctx, -*a, *b)));
        return unknown(e);
      case ExprOp::Mod:
        if (positive_constant) return z3::ite(*a >= 0, z3::expr(ctx, Z3_mk_mod(ctx, *a, *b)), -z3::expr(ctx, Z3_mk_mod(ctx, -*a, *b)));
        return unknown(e);
      default: return unknown(e);
    }
  }

  // A condition as a term: unknown (but one value per distinct expression) when not over integers.
  z3::expr condition(const te::Expr& e) {
    auto c = boolean(e);
    return c ? *c : unknown(e, true);
  }

  // A condition; nullopt when it is not one over integers (then it is no fact).
  std::optional<z3::expr> boolean(const te::Expr& e) {
    if (!e) return std::nullopt;
    switch (e->op) {
      case ExprOp::And:
      case ExprOp::Or: {
        auto a = boolean(e->args[0]), b = boolean(e->args[1]);
        if (!a || !b) return std::nullopt;
        return e->op == ExprOp::And ? (*a && *b) : (*a || *b);
      }
      case ExprOp::Not: {
        auto a = boolean(e->args[0]);
        return a ? std::optional<z3::expr>(!*a) : std::nullopt;
      }
      default: break;
    }
    if (!te::is_comparison(e->op)) return std::nullopt;
    auto a = integer(e->args[0]), b = integer(e->args[1]);
    if (!a || !b) return std::nullopt;
    switch (e->op) {
      case ExprOp::Lt: return *a < *b;
      case ExprOp::Le: return *a <= *b;
      case ExprOp::Gt: return *a > *b;
      case ExprOp::Ge: return *a >= *b;
      case ExprOp::Eq: return *a == *b;
      case ExprOp::Ne: return *a != *b;
      default: return std::nullopt;
    }
  }

 private:
  std::vector<std::pair<te::Expr, z3::expr>> unknowns_;
};

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
