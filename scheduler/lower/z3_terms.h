/// \file Loop-IR index expressions as Z3 integer terms, for the checks that prove facts about a lowered
/// program's accesses (bounds_check.h: inside the buffer; in_place_writes.h: no element written twice).
///
/// Why a class of its own: both checks state loop ranges and if-conditions as facts and ask Z3 about
/// index expressions, and must agree on what an index means (C's truncating division, floor division,
/// a select) and on what cannot be expressed (a loaded value), which stays an unconstrained unknown so
/// a proof never rests on a guess about it. Include only from .cc files of kiln_scheduler, which links Z3.
#pragma once
#include <z3++.h>

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "scheduler/te/expr.h"

namespace kiln::lower {

/// Z3 terms of loop-IR expressions: a loop variable is the constant in `vars` (the caller declares one
/// per loop and states its range), anything the translation cannot express exactly (a loaded value,
/// an unknown variable) is an unconstrained unknown.
class Z3Terms {
 public:
  z3::context ctx;
  std::map<const te::ExprNode*, z3::expr> vars;

  /// One unknown per distinct expression: two reads of sequence_lens[i0] in one index are one value,
  /// so `i < n ? n - 1 - i : i` stays provable although n itself is unknown.
  z3::expr unknown(const te::Expr& e, bool boolean = false);
  /// An integer term; nullopt when `e` is not an integer expression (a float compared in a guard).
  std::optional<z3::expr> integer(const te::Expr& e);
  /// A condition as a term: unknown (but one value per distinct expression) when not over integers.
  z3::expr condition(const te::Expr& e);
  /// A condition; nullopt when it is not one over integers (then it is no fact).
  std::optional<z3::expr> boolean(const te::Expr& e);

 private:
  std::vector<std::pair<te::Expr, z3::expr>> unknowns_;
};

}  // namespace kiln::lower
