#include "scheduler/search/access_region.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "frontend/ir/dtype.h"

namespace kiln::search {
namespace {

using te::Expr;
using te::ExprNode;
using te::ExprOp;

struct Interval {
  int64_t lo, hi;
};

// Values of loop variables when a region is measured: loops at `level` and deeper run over their
// extent, outer ones are pinned at 0. `probe` (if set) pins one variable at `probe_value` and every
// other at 0: that evaluates an index at a point.
struct VarValues {
  const LoopNest* nest;
  size_t level = 0;
  const ExprNode* probe = nullptr;
  int64_t probe_value = 0;

  std::optional<Interval> of(const ExprNode* v) const {
    if (probe) return v == probe ? Interval{probe_value, probe_value} : Interval{0, 0};
    const std::vector<LoopVar>& loops = nest->loops;
    for (size_t k = loops.size(); k-- > 0;)
      if (loops[k].var == v) return k >= level ? Interval{0, loops[k].extent - 1} : Interval{0, 0};
    if (std::find(nest->unit_vars.begin(), nest->unit_vars.end(), v) != nest->unit_vars.end()) return Interval{0, 0};
    return std::nullopt;  // not a loop variable: nothing bounds it
  }
};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::optional<Interval> bound(const Expr& e, const VarValues& vv) {
  auto arg = [&](size_t k) { return bound(e->args[k], vv); };
  auto const_rhs = [&]() -> int64_t { return e->args[1]->op == ExprOp::IntImm ? e->args[1]->int_value : 0; };
  switch (e->op) {
    case ExprOp::IntImm: return Interval{e->int_value, e->int_value};
    case ExprOp::Var: return vv.of(e.get());
    case ExprOp::Cast:
      if (is_float(e->dtype) || is_float(e->args[0]->dtype)) return std::nullopt;
      return arg(0);
    case ExprOp::Neg: {
      auto a = arg(0);
      if (!a) return std::nullopt;
      return Interval{-a->hi, -a->lo};
    }
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Min:
    case ExprOp::Max: {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      if (e->op == ExprOp::Add) return Interval{a->lo + b->lo, a->hi + b->hi};
      if (e->op == ExprOp::Sub) return Interval{a->lo - b->hi, a->hi - b->lo};
      if (e->op == ExprOp::Min) return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      if (e->op == ExprOp::Max) return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      const int64_t p[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
      return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case ExprOp::Div:
    case ExprOp::FloorDiv: {
      const int64_t c = const_rhs();
      auto a = arg(0);
      if (c <= 0 || !a) return std::nullopt;
      if (e->op == ExprOp::Div) return Interval{a->lo / c, a->hi / c};
      return Interval{floor_div(a->lo, c), floor_div(a->hi, c)};
    }
    case ExprOp::Mod:
    case ExprOp::FloorMod: {
      const int64_t c = const_rhs();
      auto a = arg(0);
      if (c <= 0 || !a) return std::nullopt;
      if (a->lo >= 0 && a->lo / c == a->hi / c) return Interval{a->lo % c, a->hi % c};
      if (a->lo >= 0 || e->op == ExprOp::FloorMod) return Interval{0, c - 1};
      return Interval{-(c - 1), c - 1};
    }
    case ExprOp::Select: {
      auto a = arg(1), b = arg(2);
      if (!a || !b) return std::nullopt;
      return Interval{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
    }
    default: return std::nullopt;
  }
}

}  // namespace

void LinearIndex::scale(int64_t k) {
  constant *= k;
  for (Term& t : terms) t.coef *= k;
  for (Atom& a : atoms) a.coef *= k;
}

void LinearIndex::add(LinearIndex o, int64_t sign) {
  constant += sign * o.constant;
  for (const Term& t : o.terms) {
    auto it = std::find_if(terms.begin(), terms.end(), [&](const Term& x) { return x.var == t.var; });
    if (it == terms.end()) terms.push_back({t.var, sign * t.coef});
    else it->coef += sign * t.coef;
  }
  for (Atom& a : o.atoms) {
    a.coef *= sign;
    atoms.push_back(std::move(a));
  }
}

bool Access::mentions(const ExprNode* v) const { return std::find(vars.begin(), vars.end(), v) != vars.end(); }

void collect_vars(const Expr& e, std::vector<const ExprNode*>& out) {
  if (e->op == ExprOp::Var) {
    if (std::find(out.begin(), out.end(), e.get()) == out.end()) out.push_back(e.get());
    return;
  }
  for (const Expr& a : e->args) collect_vars(a, out);
}

LinearIndex linearize(const Expr& e) {
  LinearIndex l;
  switch (e->op) {
    case ExprOp::IntImm: l.constant = e->int_value; return l;
    case ExprOp::Var: l.terms.push_back({e.get(), 1}); return l;
    case ExprOp::Add:
    case ExprOp::Sub:
      l = linearize(e->args[0]);
      l.add(linearize(e->args[1]), e->op == ExprOp::Add ? 1 : -1);
      return l;
    case ExprOp::Neg:
      l = linearize(e->args[0]);
      l.scale(-1);
      return l;
    case ExprOp::Mul: {
      LinearIndex a = linearize(e->args[0]), b = linearize(e->args[1]);
      if (a.is_constant()) {
        b.scale(a.constant);
        return b;
      }
      if (b.is_constant()) {
        a.scale(b.constant);
        return a;
      }
      break;
    }
    case ExprOp::Cast:
      if (!is_float(e->dtype) && !is_float(e->args[0]->dtype)) return linearize(e->args[0]);
      break;
    default: break;
  }
  LinearIndex::Atom atom{e, 1, {}};
  collect_vars(e, atom.vars);
  l.atoms.push_back(std::move(atom));
  return l;
}

Access make_access(const Expr& index) {
  Access a{linearize(index), {}};
  collect_vars(index, a.vars);
  return a;
}

Region region_of(const Access& a, const LoopNest& nest, size_t level, int64_t buffer_size) {
  const Region whole{static_cast<double>(buffer_size), 0, buffer_size - 1, 1.0};
  const VarValues vv{&nest, level};
  std::vector<std::pair<double, double>> dims;  // (stride, extent)
  int64_t lo = a.index.constant, hi = lo;
  auto add_dim = [&](int64_t coef, int64_t ilo, int64_t ihi) {
    lo += std::min(coef * ilo, coef * ihi);
    hi += std::max(coef * ilo, coef * ihi);
    if (coef != 0 && ihi > ilo) dims.emplace_back(static_cast<double>(std::abs(coef)), static_cast<double>(ihi - ilo + 1));
  };
  for (const LinearIndex::Term& t : a.index.terms) {
    auto r = vv.of(t.var);
    if (!r) return whole;
    add_dim(t.coef, r->lo, r->hi);
  }
  for (const LinearIndex::Atom& at : a.index.atoms) {
    auto r = bound(at.expr, vv);
    if (!r) return whole;
    add_dim(at.coef, r->lo, r->hi);
  }
  std::sort(dims.begin(), dims.end());
  double count = 1, span = 1, contiguous = 1;
  bool dense = true;
  for (const auto& [stride, extent] : dims) {
    const double new_span = stride * (extent - 1) + span;
    if (stride >= span) count *= extent;
    else count = std::min(count * extent, std::ceil(count * new_span / span));
    dense = dense && stride <= span;
    span = new_span;
    if (dense) contiguous = span;
  }
  return {std::min(count, static_cast<double>(buffer_size)), lo, hi, contiguous};
}

// How far one step of loop variable `v` moves an access (at the start of the iteration space); 0 when
// the access does not depend on it.
double step_of(const Access& a, const ExprNode* v, int64_t extent, const LoopNest& nest) {
  if (!a.mentions(v)) return 0;
  auto at = [&](int64_t x) -> std::optional<double> {
    VarValues vv{&nest, 0, v, x};
    double sum = 0;
    for (const LinearIndex::Term& t : a.index.terms)
      if (t.var == v) sum += static_cast<double>(t.coef * x);
    for (const LinearIndex::Atom& atom : a.index.atoms) {
      auto r = bound(atom.expr, vv);
      if (!r) return std::nullopt;
      sum += static_cast<double>(atom.coef * r->lo);
    }
    return sum;
  };
  auto x0 = at(0), x1 = at(1);
  if (!x0 || !x1) return 2;  // an index this analysis cannot evaluate: Ansor's guess
  if (*x1 != *x0 || extent <= 2) return std::abs(*x1 - *x0);
  auto xe = at(extent - 1);  // a variable that moves only every few steps (a fused loop's quotient)
  return xe ? std::max(1.0, std::ceil(std::abs(*xe - *x0) / static_cast<double>(extent - 1))) : 2.0;
}

}  // namespace kiln::search
