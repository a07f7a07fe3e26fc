/// \file Rewriting and inspecting expressions: variables replaced by expressions, loads redirected.
/// Every schedule transformation that moves computation (inlining, splitting loops, caching) is one
/// of these.
#pragma once
#include <functional>
#include <map>
#include <optional>

#include "scheduler/te/expr.h"

namespace kiln::te {

/// `e` with every variable in `m` (by node identity) replaced by its expression.
Expr substitute(const Expr& e, const std::map<const ExprNode*, Expr>& m);

/// `e` with every Load rewritten by `f` (which sees the load with its indices already rewritten and
/// returns a replacement, or null to keep it).
Expr rewrite_loads(const Expr& e, const std::function<Expr(const Expr& load)>& f);

/// Whether `e` mentions the variable `v` anywhere, the indices of its loads included.
bool mentions(const Expr& e, const ExprNode* v);

/// The constant coefficient of `v` in `e` when `e` is affine in `v` (0 when `e` does not mention it);
/// nullopt otherwise. An index with coefficient 1 along a loop walks memory contiguously.
std::optional<int64_t> linear_coeff(const ExprNode* e, const ExprNode* v);

/// Calls `f` on every Load in `e`, outermost first.
void visit_loads(const Expr& e, const std::function<void(const Expr& load)>& f);

/// A copy of `n` with new operands.
Expr with_args(const ExprNode& n, std::vector<Expr> args);

}  // namespace kiln::te
