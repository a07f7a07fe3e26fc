#include "scheduler/state/index_interval.h"

#include <algorithm>

namespace kiln::state {

bool LinearForm::operator==(const LinearForm& o) const {
  if (terms.size() != o.terms.size()) return false;
  for (const auto& [k, v] : terms) {
    auto it = o.terms.find(k);
    if (it == o.terms.end() || it->second.second != v.second) return false;
  }
  return true;
}

te::Expr LinearForm::to_expr() const {
  te::Expr e;
  for (const auto& [k, v] : terms) {
    te::Expr t = v.second == 1 ? v.first : v.first * v.second;
    e = e ? e + t : t;
  }
  return e;
}

namespace {

using Opt = std::optional<IndexInterval>;
using te::ExprOp;

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

LinearForm scaled(const LinearForm& f, int64_t c) {
  LinearForm r;
  if (c == 0) return r;
  for (const auto& [k, v] : f.terms) r.terms[k] = {v.first, v.second * c};
  return r;
}

LinearForm added(const LinearForm& a, const LinearForm& b, int64_t sign) {
  LinearForm r = a;
  for (const auto& [k, v] : b.terms) {
    auto& slot = r.terms[k];
    slot.first = v.first;
    slot.second += sign * v.second;
    if (slot.second == 0) r.terms.erase(k);
  }
  return r;
}

LinearForm divided(const LinearForm& f, int64_t c) {
  LinearForm r;
  for (const auto& [k, v] : f.terms) r.terms[k] = {v.first, v.second / c};
  return r;
}

bool nonnegative(const IndexInterval& a) {
  return a.lo >= 0 && std::all_of(a.base.terms.begin(), a.base.terms.end(), [](const auto& kv) { return kv.second.second >= 0; });
}

bool divisible(const LinearForm& f, int64_t c) {
  return std::all_of(f.terms.begin(), f.terms.end(), [&](const auto& kv) { return kv.second.second % c == 0; });
}

Opt point(int64_t v) { return IndexInterval{{}, v, v}; }

Opt scale(const IndexInterval& a, int64_t c) {
  IndexInterval r{scaled(a.base, c), a.lo * c, a.hi * c};
  if (c < 0) std::swap(r.lo, r.hi);
  return r;
}

std::optional<int64_t> constant(const IndexInterval& a) {
  if (a.base.empty() && a.lo == a.hi) return a.lo;
  return std::nullopt;
}

Opt interval(const te::Expr& e, const RangeMap& ranged);

Opt binary(ExprOp op, const IndexInterval& a, const IndexInterval& b) {
  switch (op) {
    case ExprOp::Add: return IndexInterval{added(a.base, b.base, 1), a.lo + b.lo, a.hi + b.hi};
    case ExprOp::Sub: return IndexInterval{added(a.base, b.base, -1), a.lo - b.hi, a.hi - b.lo};
    case ExprOp::Mul: {
      if (auto c = constant(b)) return scale(a, *c);
      if (auto c = constant(a)) return scale(b, *c);
      if (!a.base.empty() || !b.base.empty()) return std::nullopt;
      int64_t p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
      return IndexInterval{{}, *std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case ExprOp::Div:
    case ExprOp::FloorDiv: {
      auto c = constant(b);
      if (!c || *c <= 0) return std::nullopt;
      if (op == ExprOp::Div && !nonnegative(a)) return std::nullopt;  // truncation differs from floor below 0
      if (!divisible(a.base, *c)) return std::nullopt;
      return IndexInterval{divided(a.base, *c), floor_div(a.lo, *c), floor_div(a.hi, *c)};
    }
    case ExprOp::Mod:
    case ExprOp::FloorMod: {
      auto c = constant(b);
      if (!c || *c <= 0) return std::nullopt;
      if (op == ExprOp::Mod && !nonnegative(a)) return std::nullopt;
      if (divisible(a.base, *c) && floor_div(a.lo, *c) == floor_div(a.hi, *c)) {
        int64_t lo = a.lo - floor_div(a.lo, *c) * *c;
        return IndexInterval{{}, lo, lo + (a.hi - a.lo)};
      }
      return IndexInterval{{}, 0, *c - 1};
    }
    case ExprOp::Min:
    case ExprOp::Max: {
      if (!(a.base == b.base)) return std::nullopt;
      if (op == ExprOp::Min) return IndexInterval{a.base, std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      return IndexInterval{a.base, std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    default: return std::nullopt;
  }
}

// Whether `e` reads no ranged variable and no tensor: its value is fixed while the region is computed.
bool fixed_value(const te::Expr& e, const RangeMap& ranged) {
  if (e->op == ExprOp::Load) return false;
  if (e->op == ExprOp::Var) return !ranged.count(e.get());
  return std::all_of(e->args.begin(), e->args.end(), [&](const te::Expr& a) { return fixed_value(a, ranged); });
}

Opt structural_interval(const te::Expr& e, const RangeMap& ranged);

// A fixed subexpression the arithmetic below cannot take apart exactly (the parts of a fused loop,
// floordiv(fused, n) and floormod(fused, n), a product of two outer loops) is a term of its own in the
// base, so a tile inside a fused loop still has a constant extent. (Without ranged variables an exact
// result is one point: a range there is the arithmetic's over-approximation.)
Opt interval(const te::Expr& e, const RangeMap& ranged) {
  Opt r = structural_interval(e, ranged);
  if (r && r->lo == r->hi) return r;
  if (!e || !is_integer(e->dtype) || e->dtype == DType::Bool || !fixed_value(e, ranged)) return r;
  IndexInterval opaque;
  opaque.base.terms[e.get()] = {e, 1};
  return opaque;
}

Opt structural_interval(const te::Expr& e, const RangeMap& ranged) {
  if (!e || !is_integer(e->dtype) || e->dtype == DType::Bool) return std::nullopt;
  switch (e->op) {
    case ExprOp::IntImm: return point(e->int_value);
    case ExprOp::Var: {
      auto it = ranged.find(e.get());
      if (it != ranged.end()) return IndexInterval{{}, 0, std::max<int64_t>(it->second - 1, 0)};
      IndexInterval r;
      r.base.terms[e.get()] = {e, 1};
      return r;
    }
    case ExprOp::Cast: {
      const te::Expr& a = e->args[0];
      if (!is_integer(a->dtype) || a->dtype == DType::Bool) return std::nullopt;
      return interval(a, ranged);
    }
    case ExprOp::Neg: {
      Opt a = interval(e->args[0], ranged);
      return a ? scale(*a, -1) : a;
    }
    case ExprOp::Select: {
      Opt a = interval(e->args[1], ranged), b = interval(e->args[2], ranged);
      if (!a || !b) return std::nullopt;
      return union_interval(*a, *b);
    }
    default: break;
  }
  if (!te::is_binary(e->op)) return std::nullopt;
  Opt a = interval(e->args[0], ranged);
  if (!a) return a;
  Opt b = interval(e->args[1], ranged);
  if (!b) return b;
  return binary(e->op, *a, *b);
}

}  // namespace

std::optional<IndexInterval> index_interval(const te::Expr& e, const RangeMap& ranged) { return interval(e, ranged); }

std::optional<IndexInterval> union_interval(const IndexInterval& a, const IndexInterval& b) {
  if (!(a.base == b.base)) return std::nullopt;
  return IndexInterval{a.base, std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

}  // namespace kiln::state
