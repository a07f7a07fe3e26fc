/// \file Intervals of integer index expressions, for bound inference: which part of a producer a
/// consumer's loops read. Loop variables outside the attach point are fixed but unknown (symbolic);
/// those inside range over their loops. An interval is `base + [lo, hi]` with `base` a linear form in the
/// fixed variables, so a tile's region has a constant extent while its start moves with the outer loops.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "scheduler/te/expr.h"

namespace kiln::state {

/// sum(coeff * var) over fixed loop variables.
struct LinearForm {
  std::map<const te::ExprNode*, std::pair<te::Expr, int64_t>> terms;
  bool empty() const { return terms.empty(); }
  bool operator==(const LinearForm& o) const;
  te::Expr to_expr() const;  // null when empty
};

struct IndexInterval {
  LinearForm base;
  int64_t lo = 0, hi = 0;
};

/// What a variable is in the region being computed: ranged over [0, extent) or fixed (symbolic). A
/// variable not in the map is fixed.
using RangeMap = std::map<const te::ExprNode*, int64_t>;

/// The interval of an Int64 index expression, or nullopt when the expression is not one this analysis
/// bounds (data-dependent loads, float arithmetic, products of variables): the caller then assumes the
/// whole dimension.
std::optional<IndexInterval> index_interval(const te::Expr& e, const RangeMap& ranged);

/// The union of two intervals with the same base (nullopt when the bases differ).
std::optional<IndexInterval> union_interval(const IndexInterval& a, const IndexInterval& b);

}  // namespace kiln::state
