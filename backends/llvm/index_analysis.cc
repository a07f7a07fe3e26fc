#include "backends/llvm/index_analysis.h"

#include <algorithm>

namespace kiln::llvm_backend {

using te::ExprNode;
using te::ExprOp;

bool depends_on(const ExprNode* e, const ExprNode* v) {
  if (e == v) return true;
  for (const te::Expr& a : e->args)
    if (depends_on(a.get(), v)) return true;
  return false;
}

namespace {

// Interval arithmetic with overflow checks: an interval whose bound overflows int64 is unknown.
std::optional<IndexRange> add(IndexRange a, IndexRange b) {
  IndexRange r;
  if (__builtin_add_overflow(a.lo, b.lo, &r.lo) || __builtin_add_overflow(a.hi, b.hi, &r.hi)) return std::nullopt;
  return r;
}

std::optional<IndexRange> sub(IndexRange a, IndexRange b) {
  IndexRange r;
  if (__builtin_sub_overflow(a.lo, b.hi, &r.lo) || __builtin_sub_overflow(a.hi, b.lo, &r.hi)) return std::nullopt;
  return r;
}

std::optional<IndexRange> mul(IndexRange a, IndexRange b) {
  int64_t p[4];
  if (__builtin_mul_overflow(a.lo, b.lo, &p[0]) || __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
      __builtin_mul_overflow(a.hi, b.lo, &p[2]) || __builtin_mul_overflow(a.hi, b.hi, &p[3]))
    return std::nullopt;
  return IndexRange{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

int64_t floor_div(int64_t a, int64_t c) { return a / c - (a % c != 0 && a < 0 ? 1 : 0); }

std::optional<int64_t> positive_constant(const ExprNode* e) {
  if (e->op == ExprOp::IntImm && e->int_value > 0) return e->int_value;
  return std::nullopt;
}

}  // namespace

std::optional<IndexRange> index_range(const ExprNode* e, const VarRanges& vars) {
  if (e->dtype != DType::Int64) return std::nullopt;
  if (e->op == ExprOp::IntImm) return IndexRange{e->int_value, e->int_value};
  if (e->op == ExprOp::Var) {
    auto it = vars.find(e);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
  if (e->op == ExprOp::Select) {
    auto a = index_range(e->args[1].get(), vars), b = index_range(e->args[2].get(), vars);
    if (!a || !b) return std::nullopt;
    return IndexRange{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
  }
  if (!te::is_binary(e->op)) return std::nullopt;
  auto a = index_range(e->args[0].get(), vars);
  if (!a) return std::nullopt;
  const auto divisor = positive_constant(e->args[1].get());
  switch (e->op) {
    // Division by a positive constant (floor or truncating) is monotone in the dividend.
    case ExprOp::FloorDiv:
      if (!divisor) return std::nullopt;
      return IndexRange{floor_div(a->lo, *divisor), floor_div(a->hi, *divisor)};
    case ExprOp::Div:
      if (!divisor) return std::nullopt;
      return IndexRange{a->lo / *divisor, a->hi / *divisor};
    case ExprOp::FloorMod:
    case ExprOp::Mod: {
      if (!divisor) return std::nullopt;
      const int64_t c = *divisor;
      if (e->op == ExprOp::Mod && a->lo < 0) return IndexRange{-(c - 1), a->hi < 0 ? 0 : c - 1};
      if (floor_div(a->lo, c) == floor_div(a->hi, c))  // within one period: no wrap-around
        return IndexRange{a->lo - floor_div(a->lo, c) * c, a->hi - floor_div(a->hi, c) * c};
      return IndexRange{0, c - 1};
    }
    default: break;
  }
  auto b = index_range(e->args[1].get(), vars);
  if (!b) return std::nullopt;
  switch (e->op) {
    case ExprOp::Add: return add(*a, *b);
    case ExprOp::Sub: return sub(*a, *b);
    case ExprOp::Mul: return mul(*a, *b);
    case ExprOp::Min: return IndexRange{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    case ExprOp::Max: return IndexRange{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    default: return std::nullopt;
  }
}

}  // namespace kiln::llvm_backend
